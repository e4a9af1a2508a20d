//! Bounded hyperbolic tanh, BHyT (seed 003).
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

use super::broadcast;
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
