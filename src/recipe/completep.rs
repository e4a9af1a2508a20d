//! CompleteP's depth parametrisation as a recipe option (Dey et al., "Don't be lazy: CompleteP
//! enables compute-efficient deep transformers", NeurIPS 2025; the authors' `nanoGPT-mup`,
//! branch `completep`, `Block.forward` and `configure_optimizers`), at α = 1:
//!
//! ```text
//! m       = L / L_base                       the depth multiplier
//! z_l     = a·X_l + (c·m^{-1})·N_out(F_l(s·N_in(X_l)))
//! ε_layer = ε·m^{-1}                          AdamW's ε inside the Transformer layers
//! η, σ_init, λ_wd unchanged                   (the LR correction m^{α-1} is 1 at α = 1)
//! ```

use super::spec::{CompletePSpec, RecipeSpec};
use anyhow::ensure;

/// A resolved CompleteP: the depth tuned at and the multiplier `m = L / L_base`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompleteP {
    pub base_layers: usize,
    pub multiplier: f64,
}

impl CompleteP {
    /// `m^{-1}`: what every residual branch and the layers' AdamW ε are multiplied by.
    pub fn branch_scale(self) -> f64 {
        1.0 / self.multiplier
    }
}

/// Resolves `spec` for `n_layers` (the resolver then scales every sublayer's `c` by
/// [`CompleteP::branch_scale`]).
pub fn resolve(spec: &CompletePSpec, recipe: &RecipeSpec, n_layers: usize) -> anyhow::Result<CompleteP> {
    ensure!(
        spec.base_layers >= 1,
        "`completep.base_layers` must be ≥ 1 (the depth, in Transformer layers, the learning rate was tuned at)"
    );
    ensure!(
        recipe.hypersphere.is_none() && recipe.moment_control.is_none(),
        "`completep` scales the residual branches of a standard-parametrised model; nGPT (`hypersphere`) and \
         DeepScaleLM (`moment_control`) set their own scales: use one or the other"
    );
    Ok(CompleteP { base_layers: spec.base_layers, multiplier: n_layers as f64 / spec.base_layers as f64 })
}
