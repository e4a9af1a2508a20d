//! TaperNorm (Kanavalau, Amo Alonso & Lall, 2026, "Gated Normalization Removal and Scale
//! Anchoring in Pre-Norm Transformers", arXiv 2602.10408): an RMSNorm that a global gate `g`
//! tapers into a fixed, sample-independent scaling,
//!
//! ```text
//! y = g · γ ⊙ x/r(x) + (1 − g) · c · γ̃ ⊙ x,      r(x) = √(mean(x²) + ε)
//! ```
//!
//! `g` is 1 (RMSNorm exactly) until the taper starts and 0 (a per-feature scaling that folds
//! into the next projection) after it ends. `c` is the least-squares scalar that makes the
//! linear branch match the normalised one at the taper start,
//! `c = E[‖γ⊙x‖²/r(x)] / E[‖γ⊙x‖²]`, from exponential moving averages of the two expectations
//! collected while `g = 1`; γ̃ starts as a copy of γ then and learns on its own. `g`, `c` and
//! the two averages are buffers: stored with the weights (a checkpoint resumes them, an export
//! carries them) but never given a gradient. The schedule that moves them is
//! [`crate::recipe::Taper`], applied by the model after each optimizer step.
//!
//! # Shapes
//! - input and output: `[..., d]`; γ, γ̃: `[d]`; `g`, `c`, the averages: `[1]`

use super::broadcast;
use super::rms_norm::rms_norm_by;
use crate::kernels::{self, Kernels};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// One TaperNorm slot: its learnable gains and its four buffers.
#[derive(Module, Debug)]
pub struct TaperNorm {
    /// γ, the RMSNorm branch's gain (init 1).
    pub gain: Param<Tensor<1>>,
    /// γ̃, the linear branch's gain (init 1; γ's copy from the taper start on).
    pub taper_gain: Param<Tensor<1>>,
    /// The gate `g` (buffer, init 1).
    pub taper_gate: Param<Tensor<1>>,
    /// The calibrated scale `c` (buffer, init 1; set once, at the taper start).
    pub taper_scale: Param<Tensor<1>>,
    /// The moving average of `mean_t ‖γ⊙x_t‖²/r(x_t)` (buffer, init 0).
    pub taper_ema_scaled: Param<Tensor<1>>,
    /// The moving average of `mean_t ‖γ⊙x_t‖²` (buffer, init 0).
    pub taper_ema_energy: Param<Tensor<1>>,
    #[module(skip)]
    pub eps: f64,
}

/// The leaf names of TaperNorm's buffers (stored with the weights, never given a gradient).
pub const TAPER_BUFFERS: [&str; 4] = ["taper_gate", "taper_scale", "taper_ema_scaled", "taper_ema_energy"];

impl TaperNorm {
    /// `g · γ ⊙ x/r(x) + (1 − g) · c · γ̃ ⊙ x` over the last axis; the RMSNorm branch through
    /// the fused kernel where `k` fuses.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        let g = self.taper_gate.val();
        let normed = rms_norm_by(x.clone(), Some(self.gain.val()), self.eps, k);
        // (1 − g)·c·γ̃ is a [d] vector: one pass over x for the whole linear branch.
        let linear = self.taper_gain.val() * (self.taper_scale.val() * (g.clone().neg() + 1.0));
        normed * broadcast::<D>(g) + x * broadcast::<D>(linear)
    }

    /// The two statistics of the calibration, `[mean_t ‖γ⊙x_t‖²/r(x_t), mean_t ‖γ⊙x_t‖²]`
    /// over every token of `x` `[..., d]`, outside the autodiff graph.
    pub fn calibration<const D: usize>(&self, x: Tensor<D>) -> Tensor<1> {
        let x = kernels::widen(x.detach());
        let energy = (x.clone() * broadcast::<D>(self.gain.val().detach())).square().sum_dim(D - 1);
        let r = (x.square().mean_dim(D - 1) + self.eps).sqrt();
        let n = energy.shape().num_elements();
        let scaled = (energy.clone() / r).reshape([n]).mean();
        Tensor::cat(vec![scaled, energy.reshape([n]).mean()], 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{f64_tensor, values};

    fn param(v: &[f64]) -> Param<Tensor<1>> {
        Param::from_tensor(f64_tensor(v, [v.len()], false))
    }

    /// γ = [1, 2], γ̃ = [3, −1]; rows x = [3, 4] (r = √12.5) and [1, 0] (r = √0.5), ε = 0.
    fn norm(gate: f64, scale: f64) -> TaperNorm {
        TaperNorm {
            gain: param(&[1.0, 2.0]),
            taper_gain: param(&[3.0, -1.0]),
            taper_gate: param(&[gate]),
            taper_scale: param(&[scale]),
            taper_ema_scaled: param(&[0.0]),
            taper_ema_energy: param(&[0.0]),
            eps: 0.0,
        }
    }

    fn x() -> Tensor<2> {
        f64_tensor(&[3.0, 4.0, 1.0, 0.0], [2, 2], false)
    }

    #[test]
    fn the_forward_by_hand() {
        let (r1, r2) = (12.5f64.sqrt(), 0.5f64.sqrt());
        // g = 1: RMSNorm exactly, γ ⊙ x/r.
        let y = values(norm(1.0, 0.7).forward(x(), Kernels::Composite));
        let want = [3.0 / r1, 8.0 / r1, 1.0 / r2, 0.0];
        assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{y:?}");
        // g = ¼, c = ½: ¼·γ⊙x/r + ¾·½·γ̃⊙x.
        let y = values(norm(0.25, 0.5).forward(x(), Kernels::Composite));
        let want = [0.25 * 3.0 / r1 + 0.375 * 9.0, 0.25 * 8.0 / r1 - 0.375 * 4.0, 0.25 * 1.0 / r2 + 0.375 * 3.0, 0.0];
        assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{y:?} vs {want:?}");
        // g = 0: the linear map alone, c·γ̃ ⊙ x.
        let y = values(norm(0.0, 0.5).forward(x(), Kernels::Composite));
        assert_eq!(y, vec![4.5, -2.0, 1.5, 0.0]);
    }

    /// ‖γ⊙x‖² = 9 + 64 = 73 and 1; the statistics are their means with and without ÷ r.
    #[test]
    fn the_calibration_statistics_by_hand() {
        let s = values(norm(1.0, 1.0).calibration(x()));
        let want = [(73.0 / 12.5f64.sqrt() + 1.0 / 0.5f64.sqrt()) / 2.0, 37.0];
        assert!(s.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{s:?} vs {want:?}");
    }
}
