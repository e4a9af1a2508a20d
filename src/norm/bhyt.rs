//! Bounded hyperbolic tanh, BHyT (the BHyT paper).
//!
//! BHyT* (eq. 1) scales the tanh input so that it stays inside `(−λ, λ)` with probability at
//! least `p` (Proposition 3.1, by Chebyshev): `y = γ ⊙ tanh(λ x / (κ s_x + |μ_x|))`,
//! `κ = (1 − p)^{−1/2}` (κ = 10 for p = 0.99). The paper's ε placement (Theorem 3.4) is
//! `κ √(s_x² + ε) + |μ_x|`.
//!
//! The BHyT authors' code uses an RMS denominator `κ √(mean(x²) + ε)` instead, which is also
//! what Algorithm 1 line 3 computes ("input variance" `(1/d) Σ x²`, i.e. a zero-mean
//! assumption). Both are offered ([`super::BhytDenominator`]); the paper's formula is the
//! default for BHyT*, Algorithm 1's second moment is what the approximate BHyT uses.
//!
//! BHyT (Algorithm 1) computes the statistic once per Transformer block; the norm before the
//! FFN uses `ŝ² = s_x² + ‖W_V W_O‖²_F / (T d) · (λ_attn/κ)²` (Theorem 3.5) instead of
//! recomputing it. [`bhyt_with_variance`] is the shared tanh step given a (possibly
//! approximated) variance.

use super::{BhytDenominator, broadcast};
use crate::kernels::{self, Denominator, Kernels, TanhNorm};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// `κ = (1 − p)^{−1/2}`.
pub fn kappa(p: f64) -> f64 {
    (1.0 - p).powf(-0.5)
}

/// Paper denominator `κ √(s_x² + ε) + |μ_x|` with `s_x²` the biased variance over the last
/// axis. Returns `[..., 1]`.
pub fn bhyt_std_denominator<const D: usize>(x: Tensor<D>, kappa: f64, eps: f64) -> Tensor<D> {
    let mean = x.clone().mean_dim(D - 1);
    let var = (x - mean.clone()).square().mean_dim(D - 1);
    (var + eps).sqrt() * kappa + mean.abs()
}

/// Authors'-code / Algorithm 1 denominator `κ √(mean(x²) + ε)`. Returns `[..., 1]`.
pub fn bhyt_rms_denominator<const D: usize>(x: Tensor<D>, kappa: f64, eps: f64) -> Tensor<D> {
    (x.square().mean_dim(D - 1) + eps).sqrt() * kappa
}

/// BHyT* with an explicit denominator: `γ ⊙ tanh(λ x / denom)`.
///
/// - `x`: `[..., d]`; `lambda`: `[1]`; `gamma`: `[d]` or `None`; `denom`: `[..., 1]`
pub fn bhyt_star<const D: usize>(
    x: Tensor<D>,
    lambda: Tensor<1>,
    gamma: Option<Tensor<1>>,
    denom: Tensor<D>,
) -> Tensor<D> {
    let y = (x * broadcast::<D>(lambda) / denom).tanh();
    match gamma {
        Some(g) => y * broadcast::<D>(g),
        None => y,
    }
}

/// Algorithm 1 lines 7–9 (and 3–5 with the exact variance): given a per-token variance
/// estimate `s²` (`[..., 1]`), `y = γ ⊙ tanh(λ x / (κ √(s² + ε)))`.
pub fn bhyt_with_variance<const D: usize>(
    x: Tensor<D>,
    variance: Tensor<D>,
    lambda: Tensor<1>,
    gamma: Option<Tensor<1>>,
    kappa: f64,
    eps: f64,
) -> Tensor<D> {
    let denom = (variance + eps).sqrt() * kappa;
    bhyt_star(x, lambda, gamma, denom)
}

/// A BHyT slot: learnable scalar λ (`[1]`), `γ ∈ ℝ^d`, the fixed `κ` and `ε`, and the
/// denominator of its exact form. Serves both kinds ([`super::Norm::BhytStar`], eq. 1, with
/// either denominator; [`super::Norm::Bhyt`], Algorithm 1, with the second moment), which
/// differ only in that a BHyT block's FFN norm is given the approximated variance instead of
/// measuring its input ([`Bhyt::forward_with_variance`], lines 7–9).
///
/// # Shapes
/// - input and output: `[..., d]`; a given variance `[..., 1]`
#[derive(Module, Debug)]
pub struct Bhyt {
    pub gain: Param<Tensor<1>>,
    pub lambda: Param<Tensor<1>>,
    #[module(skip)]
    pub kappa: f64,
    #[module(skip)]
    pub eps: f64,
    #[module(skip)]
    pub denominator: BhytDenominator,
}

impl Bhyt {
    /// The exact form, `γ ⊙ tanh(λ x / D)` with the configured denominator `D` (Algorithm 1
    /// line 3 is [`BhytDenominator::Rms`]), or its fused kernel when `k` fuses on `x`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        let lambda = self.lambda.val();
        let gain = Some(self.gain.val());
        if k.fuse_norm(&x) {
            let denominator = match self.denominator {
                BhytDenominator::Std => Denominator::Std,
                BhytDenominator::Rms => Denominator::Rms,
            };
            let n = TanhNorm { denominator, kappa: self.kappa, eps: self.eps };
            return kernels::tanh_norm(x, lambda, gain, None, None, n);
        }
        let denom = match self.denominator {
            BhytDenominator::Std => bhyt_std_denominator(x.clone(), self.kappa, self.eps),
            BhytDenominator::Rms => bhyt_rms_denominator(x.clone(), self.kappa, self.eps),
        };
        bhyt_star(x, lambda, gain, denom)
    }

    /// The tanh argument of the exact form, `λ x / D(x)` (what the probes test for saturation).
    pub fn argument<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let denom = match self.denominator {
            BhytDenominator::Std => bhyt_std_denominator(x.clone(), self.kappa, self.eps),
            BhytDenominator::Rms => bhyt_rms_denominator(x.clone(), self.kappa, self.eps),
        };
        x * broadcast::<D>(self.lambda.val()) / denom
    }

    /// With a given per-token variance `[..., 1]` (Algorithm 1 lines 7–9). A half-precision
    /// input is normalised in f32.
    pub fn forward_with_variance<const D: usize>(&self, x: Tensor<D>, variance: Tensor<D>, k: Kernels) -> Tensor<D> {
        let x = kernels::widen(x);
        let variance = kernels::widen(variance);
        let lambda = self.lambda.val();
        let gain = Some(self.gain.val());
        if k.fuse_norm(&x) {
            let n = TanhNorm { denominator: Denominator::Given, kappa: self.kappa, eps: self.eps };
            return kernels::tanh_norm(x, lambda, gain, None, Some(variance), n);
        }
        bhyt_with_variance(x, variance, lambda, gain, self.kappa, self.eps)
    }
}
