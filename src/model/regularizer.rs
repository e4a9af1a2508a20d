//! KiteNorm's variance regulariser (KiteNorm eq. 24):
//!
//! `R = (1/2L) Σ_{l=1}^{2L} E_{b,t}[ReLU(σ²(z_l) − 1)]`,
//!
//! `z_l` the hidden state right after the residual addition and before any outer norm, `σ²`
//! the biased variance over the hidden dimension. Added to the loss with weight λ.

use burn::tensor::Tensor;
use burn::tensor::activation::relu;

/// The name of the regulariser's loss term (before λ).
pub const REGULARIZER: &str = "reg";

/// `sums`: the `2L` tensors `z_l`, each `[B, T, d]`. Returns `[1]`.
pub fn variance_penalty(sums: &[Tensor<3>]) -> Tensor<1> {
    assert!(!sums.is_empty(), "variance_penalty needs at least one sublayer");
    let per_sublayer: Vec<Tensor<1>> = sums
        .iter()
        .map(|z| {
            let mean = z.clone().mean_dim(2);
            let var = (z.clone() - mean).square().mean_dim(2);
            relu(var - 1.0).mean()
        })
        .collect();
    Tensor::cat(per_sublayer, 0).mean()
}
