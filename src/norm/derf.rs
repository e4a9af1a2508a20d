//! Dynamic erf (Chen, Lu, Zhu, Sun & Liu, 2025, "Stronger Normalization-Free Transformers"): a
//! statistics-free replacement for a norm layer, DyT with the error function and a learnable
//! shift inside it.

use super::broadcast;
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// `y = γ ⊙ erf(α x + s) + β`.
///
/// - `x`: `[..., d]`; `alpha`, `offset`: `[1]` (learnable scalars α and s); `gamma`, `beta`: `[d]`
/// - returns `[..., d]`
pub fn derf<const D: usize>(
    x: Tensor<D>,
    alpha: Tensor<1>,
    offset: Tensor<1>,
    gamma: Tensor<1>,
    beta: Tensor<1>,
) -> Tensor<D> {
    let y = (x * broadcast::<D>(alpha) + broadcast::<D>(offset)).erf();
    y * broadcast::<D>(gamma) + broadcast::<D>(beta)
}

/// A Derf slot's parameters: scalars α (initialised per recipe; the Derf repository's GPT-2
/// configuration: 1.0) and s (0), and `γ, β ∈ ℝ^d` (1 and 0).
///
/// # Shapes
/// - input and output: `[..., d]`
#[derive(Module, Debug)]
pub struct Derf {
    pub gain: Param<Tensor<1>>,
    pub shift: Param<Tensor<1>>,
    pub alpha: Param<Tensor<1>>,
    pub offset: Param<Tensor<1>>,
}

impl Derf {
    /// [`derf`], composed of burn's ops (there is no fused kernel for it).
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        derf(x, self.alpha.val(), self.offset.val(), self.gain.val(), self.shift.val())
    }
}
