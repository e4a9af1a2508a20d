//! SeeDNorm (Cai, Zhu, Liu & Min, 2025, "SeeDNorm: Self-Rescaled Dynamic Normalization"):
//! RMSNorm whose gain is rescaled per token by a function of the raw input, so that the input's
//! norm, which RMSNorm divides away, still reaches the output.

use super::broadcast;
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// `y = [tanh(x·βᵀ)·α + γ] ⊙ x/√(mean(x²) + ε)`: `x·βᵀ` one number per token (the raw,
/// un-normalised input against β), `tanh` of it times `α ∈ ℝ^d` added to the static gain γ.
///
/// - `x`: `[..., d]`; `gamma`, `alpha`, `beta`: `[d]`
/// - returns `[..., d]`
pub fn seednorm<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    alpha: Tensor<1>,
    beta: Tensor<1>,
    eps: f64,
) -> Tensor<D> {
    let ms = x.clone().square().mean_dim(D - 1);
    let rescale = (x.clone() * broadcast::<D>(beta)).sum_dim(D - 1).tanh();
    let gain = rescale * broadcast::<D>(alpha) + broadcast::<D>(gamma);
    gain * (x / (ms + eps).sqrt())
}

/// A SeeDNorm slot's parameters, `γ, α, β ∈ ℝ^d`: γ starts at 1 and α, β at the recipe's values
/// (default α = 1, β = 0: RMSNorm at initialisation, with β receiving gradient from the first
/// step and α from the step after).
///
/// # Shapes
/// - input and output: `[..., d]`
#[derive(Module, Debug)]
pub struct SeeDNorm {
    pub gain: Param<Tensor<1>>,
    pub alpha: Param<Tensor<1>>,
    pub beta: Param<Tensor<1>>,
    pub eps: f64,
}

impl SeeDNorm {
    /// [`seednorm`], composed of burn's ops (there is no fused kernel for it).
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        seednorm(x, self.gain.val(), self.alpha.val(), self.beta.val(), self.eps)
    }
}
