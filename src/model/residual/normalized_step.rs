//! nGPT's normalized update (Loshchilov et al., 2024, "nGPT: Normalized Transformer with
//! Representation Learning on the Hypersphere", eqs. 10–11; NVIDIA's `model.py` block): the
//! hidden state moves along the sphere towards the normalised branch output by a learnable
//! per-channel step α (the eigen learning rate), then returns to the sphere:
//!
//! ```text
//! X̂       = N_outer(X_l)                          (the stream, renormalised)
//! z_l     = X̂ + |α| ⊙ (N_out(F_l(N_in(X_l))) − X̂)
//! X_{l+1} = N_outer(z_l)
//! ```
//!
//! It replaces the residual step `a·X_l + c·branch` of [`crate::model::sublayer`], which it equals
//! with `a = 1 − |α|`, `c = |α|` on the renormalised stream.

use crate::kernels::Kernels;
use crate::norm::{Norm, maybe_norm};
use burn::tensor::Tensor;

/// The step from `x` towards `branch` by `alpha` (`[1, 1, d]`, already `|α|`), on the sphere
/// `outer` defines: `(X_{l+1}, z_l)`.
pub fn normalized_step(
    outer: &Option<Norm>,
    x: Tensor<3>,
    branch: Tensor<3>,
    alpha: Tensor<3>,
    k: Kernels,
) -> (Tensor<3>, Tensor<3>) {
    // The stream is already unit-norm when N_outer is; nGPT's reference renormalises it
    // anyway, which also fixes the gradient's radial part.
    let x_hat = maybe_norm(outer, x, k);
    let sum = x_hat.clone() + (branch - x_hat) * alpha;
    (maybe_norm(outer, sum.clone(), k), sum)
}
