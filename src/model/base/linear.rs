//! Bias-free projection `y = x W`, `W ∈ ℝ^{d_in × d_out}`.
//!
//! Stored as `[d_in, d_out]`, the transpose of `torch.nn.Linear.weight`, so the forward is one
//! 2-D matmul over all tokens.

use crate::kernels::{Kernels, Precision};
use burn::module::Param;
use burn::tensor::Tensor;

/// `x`: `[B, T, d_in]`, `w`: `[d_in, d_out]` → `[B, T, d_out]`, computed in `p` (a half
/// precision returns a half-precision output; see [`crate::kernels::precision`]), by the
/// strided gemm when `k` fuses ([`Kernels::matmul`]).
pub fn project(x: Tensor<3>, w: &Param<Tensor<2>>, p: Precision, k: Kernels) -> Tensor<3> {
    let [b, t, d_in] = x.dims();
    let w = w.val();
    let d_out = w.dims()[1];
    k.matmul(p, x.reshape([b * t, d_in]), w).reshape([b, t, d_out])
}
