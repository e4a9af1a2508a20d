//! TaperNorm's global schedule (Kanavalau, Amo Alonso & Lall, 2026, "Gated Normalization
//! Removal and Scale Anchoring in Pre-Norm Transformers"): one gate `g` for every `tapernorm`
//! slot, held at 1 while the calibration averages collect, then a half-cosine to 0:
//!
//! ```text
//! after optimizer step k (S = start, E = end, in steps):
//!   k ≤ S:      m ← β·m + (1 − β)·(mean_t ‖γ⊙x_t‖²/r(x_t)),  n ← β·n + (1 − β)·(mean_t ‖γ⊙x_t‖²)
//!   k = S:      c ← m / n,   γ̃ ← γ
//!   g(k) = 1 (k ≤ S),  ½·(1 + cos(π·(k − S)/(E − S))) (S < k < E),  0 (k ≥ E)
//! ```
//!
//! `S` defaults to the end of the learning-rate warm-up (the gate is held through it), `E` to
//! half of training; both may be given as fractions of the run. Only the internal (sublayer
//! input) norms taper: the final norm anchors the pre-logit scale (the paper's "scale
//! anchoring"), and removing it needs an auxiliary scale loss normlab does not build.

use anyhow::{bail, ensure};
use serde::{Deserialize, Serialize};

/// `[recipe.placement.taper] start = 0.1, end = 0.5, decay = 0.99`: the global gate of the recipe's
/// `tapernorm` slots (TaperNorm; see [`crate::recipe::taper`]). Every field has a default, and
/// a recipe with a `tapernorm` slot and no `taper` uses them all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaperSpec {
    /// The fraction of the run after which the gate starts to fall (and `c` is calibrated);
    /// unset: the end of the learning-rate warm-up, through which the paper holds the gate at 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    /// The fraction of the run after which the gate is 0 (default ½).
    #[serde(default = "TaperSpec::default_end")]
    pub end: f64,
    /// The decay β of the calibration's moving averages (default 0.99).
    #[serde(default = "TaperSpec::default_decay")]
    pub decay: f64,
}

impl TaperSpec {
    fn default_end() -> f64 {
        0.5
    }
    fn default_decay() -> f64 {
        0.99
    }
}

impl Default for TaperSpec {
    fn default() -> Self {
        Self { start: None, end: Self::default_end(), decay: Self::default_decay() }
    }
}

/// A resolved taper schedule (fractions of the run, checked).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Taper {
    /// Where the gate starts to fall, as a fraction of the run; `None`: at the end of the
    /// learning-rate warm-up.
    pub start: Option<f64>,
    /// Where it reaches 0, as a fraction of the run.
    pub end: f64,
    /// The calibration averages' decay β.
    pub decay: f64,
}

/// The schedule of one run in optimizer steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaperSteps {
    /// `S`: the step after which `c` is calibrated and γ̃ copied (≥ 1).
    pub start: usize,
    /// `E`: the first step after which `g = 0` (> `start`).
    pub end: usize,
}

impl Taper {
    /// `S` and `E` for a run of `total` steps whose learning-rate warm-up lasts `warmup` steps.
    /// `S` is at least 1 (the averages need a step) and `E` at least `S + 1`.
    pub fn steps(self, total: usize, warmup: usize) -> TaperSteps {
        let at = |f: f64| (f * total as f64).round() as usize;
        let start = self.start.map_or(warmup, at).max(1);
        TaperSteps { start, end: at(self.end).max(start + 1) }
    }
}

impl TaperSteps {
    /// The gate for the forward after `done` optimizer steps.
    pub fn gate(self, done: usize) -> f64 {
        if done <= self.start {
            1.0
        } else if done >= self.end {
            0.0
        } else {
            let progress = (done - self.start) as f64 / (self.end - self.start) as f64;
            0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
        }
    }

    /// Whether step `done`'s statistics go into the calibration averages.
    pub fn collects(self, done: usize) -> bool {
        done <= self.start
    }
}

/// The recipe's taper schedule when a sublayer input norm is `tapernorm` (`tapers`): the
/// written `taper` or its defaults, checked; `None` otherwise.
pub fn resolve(taper: Option<&TaperSpec>, tapers: bool) -> anyhow::Result<Option<Taper>> {
    match (tapers, taper) {
        (false, None) => Ok(None),
        (false, Some(_)) => {
            bail!("`placement.taper` schedules `tapernorm` slots and the recipe has none; set `input = \"tapernorm\"`")
        }
        (true, t) => checked(t.cloned().unwrap_or_default()).map(Some),
    }
}

fn checked(t: TaperSpec) -> anyhow::Result<Taper> {
    let fraction = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
    ensure!(fraction(t.end) && t.end > 0.0, "`taper.end` = {} must lie in (0, 1] (a fraction of the run)", t.end);
    if let Some(s) = t.start {
        ensure!(fraction(s) && s < t.end, "`taper.start` = {s} must lie in [0, taper.end) (a fraction of the run)");
    }
    ensure!(t.decay > 0.0 && t.decay < 1.0, "`taper.decay` = {} must lie in (0, 1)", t.decay);
    Ok(Taper { start: t.start, end: t.end, decay: t.decay })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S = 3, E = 6: held at 1 through step 3, cos(π/3) → ¾ and cos(2π/3) → ¼, then 0.
    #[test]
    fn the_gate_by_hand() {
        let s = TaperSteps { start: 3, end: 6 };
        let gates: Vec<f64> = (0..=7).map(|k| s.gate(k)).collect();
        let want = [1.0, 1.0, 1.0, 1.0, 0.75, 0.25, 0.0, 0.0];
        assert!(gates.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-15), "{gates:?}");
        assert!(s.collects(3) && !s.collects(4));
    }

    /// The default start is the warm-up's end; a start of 0 still leaves one step to calibrate.
    #[test]
    fn steps_from_fractions() {
        let t = Taper { start: None, end: 0.5, decay: 0.99 };
        assert_eq!(t.steps(1000, 60), TaperSteps { start: 60, end: 500 });
        assert_eq!(Taper { start: Some(0.0), ..t }.steps(10, 0), TaperSteps { start: 1, end: 5 });
        assert_eq!(Taper { start: Some(0.5), end: 0.5, ..t }.steps(4, 0), TaperSteps { start: 2, end: 3 });
    }
}
