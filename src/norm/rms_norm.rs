//! RMSNorm (Zhang & Sennrich, 2019).

use super::{broadcast, value};
use crate::kernels::{self, Kernels};
use burn::module::{Module, Param};
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

/// RMSNorm-Approx's FFN-input form (the BHyT paper's Table 5): `y = γ ⊙ x / √(s² + ε)` with a given
/// per-token variance `s²` in place of `mean(x²)`.
///
/// - `x`: `[..., d]`; `variance`: `[..., 1]`; `gamma`: `[d]` or `None`
/// - returns `[..., d]`
pub fn rms_with_variance<const D: usize>(
    x: Tensor<D>,
    variance: Tensor<D>,
    gamma: Option<Tensor<1>>,
    eps: f64,
) -> Tensor<D> {
    let y = x / (variance + eps).sqrt();
    match gamma {
        Some(g) => y * broadcast::<D>(g),
        None => y,
    }
}

/// Zero-centred RMSNorm (Qwen3-Next's `Qwen3NextRMSNorm`): `y = (1 + γ) ⊙ x/√(mean(x²) + ε)`
/// with γ stored zero-centred, initialised to 0. The optimizer decays γ like a weight matrix
/// ([`crate::train::optim`]), which pulls the applied gain towards 1, not towards 0.
///
/// # Shapes
/// - input and output: `[..., d]`; `centred_gain`: `[d]`
#[derive(Module, Debug)]
pub struct ZeroCentredRmsNorm {
    pub centred_gain: Param<Tensor<1>>,
    #[module(skip)]
    pub eps: f64,
}

/// The leaf name of a zero-centred, decayed gain (what the optimizer recognises it by).
pub const CENTRED_GAIN: &str = "centred_gain";

impl ZeroCentredRmsNorm {
    /// The applied gain `1 + γ`.
    fn gain(&self) -> Tensor<1> {
        self.centred_gain.val() + 1.0
    }

    /// `(1 + γ) ⊙ x/√(mean(x²) + ε)`, by the fused kernel when `k` fuses on `x`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        if k.fuse_norm(&x) {
            kernels::norm_affine(x, Some(self.gain()), None, self.eps, false)
        } else {
            rms_norm(x, Some(self.gain()), self.eps)
        }
    }

    /// This norm of `a·x + c·b` (`[a, c]` = `scales`) by the fused kernel.
    pub fn forward_sum<const D: usize>(&self, x: Tensor<D>, b: Tensor<D>, scales: [f64; 2]) -> Tensor<D> {
        kernels::add_norm(x, b, scales, Some(self.gain()), None, self.eps, false)
    }
}

/// An RMSNorm slot's parameters: `γ ∈ ℝ^d`, or `γ′ ∈ ℝ` (scalarised: KiteNorm's scalar slots
/// under `norm = "rmsnorm"`); an absent `gain` is γ ≡ 1.
///
/// # Shapes
/// - input and output: `[..., d]`
#[derive(Module, Debug)]
pub struct RmsNorm {
    pub gain: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub eps: f64,
}

/// [`rms_norm`], or its fused kernel when `k` fuses on `x`.
pub(super) fn rms_norm_by<const D: usize>(x: Tensor<D>, gamma: Option<Tensor<1>>, eps: f64, k: Kernels) -> Tensor<D> {
    if k.fuse_norm(&x) { kernels::norm_affine(x, gamma, None, eps, false) } else { rms_norm(x, gamma, eps) }
}

impl RmsNorm {
    /// [`rms_norm`], or its fused kernel when `k` fuses on `x`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        rms_norm_by(x, value(&self.gain), self.eps, k)
    }

    /// RMSNorm-Approx's FFN-input form: `γ ⊙ x / √(s² + ε)` with a given per-token `s²`
    /// (`[..., 1]`) in place of `mean(x²)`, by the fused kernel when `k` fuses on both. A
    /// half-precision input is normalised in f32.
    pub fn forward_with_variance<const D: usize>(&self, x: Tensor<D>, variance: Tensor<D>, k: Kernels) -> Tensor<D> {
        let (x, variance) = (kernels::widen(x), kernels::widen(variance));
        if k.fuse_norm(&x) && k.fuse_norm(&variance) && x.dtype() == variance.dtype() {
            return kernels::rms_given(x, value(&self.gain), variance, self.eps);
        }
        rms_with_variance(x, variance, value(&self.gain), self.eps)
    }

    /// This norm of `a·x + c·b` (`[a, c]` = `scales`) by the fused kernel.
    pub fn forward_sum<const D: usize>(&self, x: Tensor<D>, b: Tensor<D>, scales: [f64; 2]) -> Tensor<D> {
        kernels::add_norm(x, b, scales, value(&self.gain), None, self.eps, false)
    }
}
