//! DeepScaleLM's moment-control initialisation as a recipe option: what it needs from the rest
//! of the recipe. The standard deviations themselves depend on the model's widths and are
//! computed where the model is built ([`crate::model::moment_control`]).

use super::spec::{MomentControlSpec, RecipeSpec};
use anyhow::ensure;

/// A resolved moment-control initialisation: the token correlation of the embeddings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MomentControl {
    pub r0: f64,
}

/// Checks `spec` against the recipe it belongs to: nGPT's unit-norm weights would undo it. (What
/// it needs of every sublayer, `resolve` checks on the resolved plans.)
pub fn resolve(spec: &MomentControlSpec, recipe: &RecipeSpec) -> anyhow::Result<MomentControl> {
    let r0 = spec.r0;
    ensure!(
        r0.is_finite() && r0 > 0.0 && r0 <= 1.0,
        "`moment_control.r0` = {r0} must lie in (0, 1] (a correlation; the authors measured 0.221)"
    );
    ensure!(
        recipe.hypersphere.is_none(),
        "`moment_control` draws the weights at their moment-conserving scales, which nGPT's unit-norm projection \
            undoes; use one or the other"
    );
    Ok(MomentControl { r0 })
}
