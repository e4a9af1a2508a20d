//! RMSNorm (Zhang & Sennrich, 2019).

use super::broadcast;
use burn::tensor::Tensor;

/// `y = γ ⊙ x / √(mean(x²) + ε)` over the last (hidden) axis.
///
/// - `x`: `[..., d]`; `gamma`: `[d]` or `None` (γ = 1, e.g. Peri-LN with a frozen output gain)
/// - returns `[..., d]`
pub fn rms_norm<const D: usize>(x: Tensor<D>, gamma: Option<Tensor<1>>, eps: f64) -> Tensor<D> {
    let ms = x.clone().square().mean_dim(D - 1);
    let y = x / (ms + eps).sqrt();
    match gamma {
        Some(g) => y * broadcast::<D>(g),
        None => y,
    }
}
