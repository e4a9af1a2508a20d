//! Dynamic Tanh (Zhu et al., 2025): a statistics-free replacement for a norm layer.

use super::broadcast;
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
