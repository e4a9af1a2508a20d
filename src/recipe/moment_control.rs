//! DeepScaleLM's moment-control initialisation as a recipe option: what it needs from the rest
//! of the recipe. The standard deviations themselves depend on the model's widths and are
//! computed where the model is built ([`crate::model::moment_sigmas`]).

use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// DeepScaleLM's initialisation (Kedia et al., 2024, "Transformers Get Stable"; the authors'
/// Megatron-LM code, `moment_control_sigma`): unit-variance embeddings, `W_Q`, `W_K` at
/// `σ² = 1/d`, the FFN at unit output variance, and `W_V`, `W_O` per layer at unit output
/// variance given the token correlation `r` that the model carries at that depth, tracked from
/// `r0` through every sublayer's skip and residual scales.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MomentControlSpec {
    /// The correlation between two positions' embeddings (the authors measured 0.221 on their
    /// Wikipedia BERT data; the default).
    #[serde(default = "authors_r0")]
    pub r0: f64,
}

impl Default for MomentControlSpec {
    fn default() -> Self {
        Self { r0: authors_r0() }
    }
}

fn authors_r0() -> f64 {
    0.221
}

/// A resolved moment-control initialisation: the token correlation of the embeddings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MomentControl {
    pub r0: f64,
}

/// Checks `spec` (what it needs of the rest of the recipe, [`super::resolve`] checks).
pub fn resolve(spec: &MomentControlSpec) -> anyhow::Result<MomentControl> {
    let r0 = spec.r0;
    ensure!(
        r0.is_finite() && r0 > 0.0 && r0 <= 1.0,
        "`init.r0` = {r0} must lie in (0, 1] (a correlation; the authors measured 0.221)"
    );
    Ok(MomentControl { r0 })
}
