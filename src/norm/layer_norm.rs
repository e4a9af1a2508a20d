//! LayerNorm (Ba et al., 2016) and its scalarised form (KiteNorm eq. 4).

use super::broadcast;
use burn::tensor::Tensor;

/// `y = γ ⊙ (x − μ(x)) / √(σ²(x) + ε) + β`, statistics over the last (hidden) axis, **without**
/// Bessel correction (seed 000 D.2).
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
