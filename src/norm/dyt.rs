//! Dynamic Tanh (Zhu et al., 2025): a statistics-free replacement for a norm layer.

use super::broadcast;
use crate::kernels::{self, Denominator, Kernels, TanhNorm};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// `y = γ ⊙ tanh(α x) + β`.
///
/// - `x`: `[..., d]`; `alpha`: `[1]` (learnable scalar); `gamma`, `beta`: `[d]` (either `None`
///   means 1 or no shift)
/// - returns `[..., d]`
pub fn dyt<const D: usize>(
    x: Tensor<D>,
    alpha: Tensor<1>,
    gamma: Option<Tensor<1>>,
    beta: Option<Tensor<1>>,
) -> Tensor<D> {
    let mut y = (x * broadcast::<D>(alpha)).tanh();
    if let Some(g) = gamma {
        y = y * broadcast::<D>(g);
    }
    if let Some(b) = beta {
        y = y + broadcast::<D>(b);
    }
    y
}

/// A DyT slot's parameters: the learnable scalar α (`[1]`, initialised per recipe) and
/// `γ, β ∈ ℝ^d` (initialised to 1 and 0).
///
/// # Shapes
/// - input and output: `[..., d]`
#[derive(Module, Debug)]
pub struct Dyt {
    pub gain: Param<Tensor<1>>,
    pub shift: Param<Tensor<1>>,
    pub alpha: Param<Tensor<1>>,
}

impl Dyt {
    /// [`dyt`], or the fused tanh-norm kernel (denominator 1) when `k` fuses on `x`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        let alpha = self.alpha.val();
        let gain = Some(self.gain.val());
        let shift = Some(self.shift.val());
        if k.fuse_norm(&x) {
            let n = TanhNorm { denominator: Denominator::One, kappa: 1.0, eps: 0.0 };
            return kernels::tanh_norm(x, alpha, gain, shift, None, n);
        }
        dyt(x, alpha, gain, shift)
    }
}
