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

use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// `[recipe.init] kind = "completep", base_layers = 2`: CompleteP (Dey et al., "Don't be lazy: CompleteP enables
/// compute-efficient deep transformers", NeurIPS 2025), the depth parametrisation α = 1 of the
/// authors' `nanoGPT-mup` (branch `completep`). With `m = L / base_layers`, every residual branch
/// is multiplied by `m^{-1}` before the addition and AdamW's ε of every parameter inside the
/// Transformer layers by `m^{-1}` (the embedding, final norm and output projection keep ε);
/// learning rates (`m^{α−1} = 1`), initialisations and weight decay stay as tuned at
/// `base_layers`, which is what lets the best learning rate found there transfer to depth `L`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletePSpec {
    /// The depth `L_base` (Transformer layers) the hyperparameters were tuned at.
    pub base_layers: usize,
}

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
pub fn resolve(spec: &CompletePSpec, n_layers: usize) -> anyhow::Result<CompleteP> {
    ensure!(
        spec.base_layers >= 1,
        "`init.base_layers` must be ≥ 1 (the depth, in Transformer layers, the learning rate was tuned at)"
    );
    Ok(CompleteP { base_layers: spec.base_layers, multiplier: n_layers as f64 / spec.base_layers as f64 })
}
