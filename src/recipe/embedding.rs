//! The embedding concern of a recipe: what the residual stream starts from,
//! `X_1 = N_emb(e · m · Embed(x))`, with `e` a learnable scalar (DyT's LLaMA recipe: √d), `m` a
//! constant (Gemma's normalizer √d) and `N_emb` a norm slot (Peri-LN).

use super::expr::{Scale, Vars, scale_value};
use super::slot::{self, BaseNorm, NormSpec};
use crate::norm::NormKind;
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};

/// `[recipe.embedding]` as a recipe writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSpec {
    /// The initial value of a learnable scalar `e` multiplying the token embeddings (DyT's
    /// LLaMA recipe: `"sqrt(d)"`); none when unset (`"none"` removes a preset's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
    /// A constant `m` multiplying the token embeddings (Gemma's normalizer `"sqrt(d)"`): fixed,
    /// unlike `scale`; none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<Scale>,
    /// `N_emb`, the norm applied to the token embedding (Peri-LN); none by default.
    #[serde(default = "NormSpec::none")]
    pub norm: NormSpec,
}

impl Default for EmbeddingSpec {
    fn default() -> Self {
        Self { scale: None, multiplier: None, norm: NormSpec::none() }
    }
}

/// The embedding resolved.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Embedding {
    /// Initial value of the learnable embedding scale `e`, when the recipe has one.
    pub scale: Option<f64>,
    /// The constant multiplying the token embeddings (Gemma's `√d`), when the recipe has one.
    pub multiplier: Option<f64>,
    pub norm: Option<NormKind>,
}

/// Resolves `spec` under the base norm `base`.
pub fn resolve(spec: &EmbeddingSpec, base: BaseNorm, vars: &Vars, eps: f64) -> anyhow::Result<Embedding> {
    let scale = match &spec.scale {
        Some(Scale::Expr(e)) if e.trim() == "none" => None,
        Some(s) => Some(scale_value(s, vars).context("embedding.scale")?),
        None => None,
    };
    let multiplier =
        spec.multiplier.as_ref().map(|s| scale_value(s, vars)).transpose().context("embedding.multiplier")?;
    if let Some(m) = multiplier {
        ensure!(m.is_finite() && m > 0.0, "`embedding.multiplier` = {m} must be a positive number (Gemma: sqrt(d))");
    }
    let norm = slot::resolve(&spec.norm, base, vars, eps).context("embedding.norm")?;
    Ok(Embedding { scale, multiplier, norm })
}
