//! The logits concern of a recipe: what the output projection reads and what the loss adds,
//! `logits = c·tanh(N_final(X_{2L+1}) W_out / c)` with `N_final` a norm slot and `c` Gemma 2's
//! soft-cap, and `loss = CE + λ·R` with `R` KiteNorm's variance regulariser (eq. 24).

use super::attention::check_softcap;
use super::expr::Vars;
use super::slot::{self, BaseNorm, NormSpec};
use crate::norm::NormKind;
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};

/// `[recipe.logits]` as a recipe writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogitsSpec {
    /// `N_final`, the norm before the output projection; none by default.
    #[serde(default = "NormSpec::none")]
    pub norm: NormSpec,
    /// Soft-capping of the output logits, `c·tanh(logits/c)` (Gemma 2: 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softcap: Option<f64>,
    /// Weight λ of KiteNorm's variance regulariser (KiteNorm eq. 24) in the training loss.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub regularizer: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Default for LogitsSpec {
    fn default() -> Self {
        Self { norm: NormSpec::none(), softcap: None, regularizer: 0.0 }
    }
}

/// The logits resolved.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Logits {
    pub norm: Option<NormKind>,
    pub softcap: Option<f64>,
    pub regularizer: f64,
}

/// Resolves `spec` under the base norm `base`.
pub fn resolve(spec: &LogitsSpec, base: BaseNorm, vars: &Vars, eps: f64) -> anyhow::Result<Logits> {
    ensure!(
        spec.regularizer >= 0.0 && spec.regularizer.is_finite(),
        "`logits.regularizer` must be ≥ 0, got {}",
        spec.regularizer
    );
    check_softcap("logits.softcap", spec.softcap)?;
    let norm = slot::resolve(&spec.norm, base, vars, eps).context("logits.norm")?;
    Ok(Logits { norm, softcap: spec.softcap, regularizer: spec.regularizer })
}
