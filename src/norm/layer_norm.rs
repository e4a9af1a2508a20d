//! LayerNorm (Ba et al., 2016) and its scalarised form (KiteNorm eq. 4).

use super::{broadcast, value};
use crate::kernels::{self, Kernels};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// `y = γ ⊙ (x − μ(x)) / √(σ²(x) + ε) + β`, statistics over the last (hidden) axis, **without**
/// Bessel correction (KiteNorm D.2).
///
/// - `x`: `[..., d]`
/// - `gamma`: `[d]` (vector LayerNorm) or `[1]` (scalarised LayerNorm, γ′); `None` means γ = 1
/// - `beta`: `[d]` or `[1]`; `None` means no shift
/// - returns `[..., d]`
///
/// Written from primitive ops rather than burn's fused `layer_norm` so that every gradient is
/// the autodiff of these lines (checked against finite differences and PyTorch in the tests).
pub fn layer_norm<const D: usize>(
    x: Tensor<D>,
    gamma: Option<Tensor<1>>,
    beta: Option<Tensor<1>>,
    eps: f64,
) -> Tensor<D> {
    let mean = x.clone().mean_dim(D - 1);
    let centred = x - mean;
    let var = centred.clone().square().mean_dim(D - 1);
    let mut y = centred / (var + eps).sqrt();
    if let Some(g) = gamma {
        y = y * broadcast::<D>(g);
    }
    if let Some(b) = beta {
        y = y + broadcast::<D>(b);
    }
    y
}

/// A LayerNorm slot's parameters: `γ, β ∈ ℝ^d` (vector LayerNorm) or `γ′, β′ ∈ ℝ` (scalarised,
/// KiteNorm eq. 4); an absent `gain` is γ ≡ 1 (Peri-LN's frozen output gain), an absent
/// `shift` no β (KEEL).
///
/// # Shapes
/// - input and output: `[..., d]`
#[derive(Module, Debug)]
pub struct LayerNorm {
    pub gain: Option<Param<Tensor<1>>>,
    pub shift: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub eps: f64,
}

impl LayerNorm {
    /// [`layer_norm`], or its fused kernel when `k` fuses on `x`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        let (gain, shift) = (value(&self.gain), value(&self.shift));
        if k.fuse_norm(&x) {
            kernels::norm_affine(x, gain, shift, self.eps, true)
        } else {
            layer_norm(x, gain, shift, self.eps)
        }
    }

    /// LayerNorm-1p: the stored gain is zero-centred, the applied one `1 + γ`.
    pub fn forward_1p<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        let gain = value(&self.gain).map(|g| g + 1.0);
        let shift = value(&self.shift);
        if k.fuse_norm(&x) {
            kernels::norm_affine(x, gain, shift, self.eps, true)
        } else {
            layer_norm(x, gain, shift, self.eps)
        }
    }

    /// This norm of `a·x + c·b` (`[a, c]` = `scales`) by the fused kernel.
    pub fn forward_sum<const D: usize>(&self, x: Tensor<D>, b: Tensor<D>, scales: [f64; 2]) -> Tensor<D> {
        kernels::add_norm(x, b, scales, value(&self.gain), value(&self.shift), self.eps, true)
    }
}
