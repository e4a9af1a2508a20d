//! Learning-rate schedules as pure functions of the step, so a resumed run gets exactly the
//! rates an uninterrupted one does.
//!
//! With `T` total steps, `W = round(warmup_fraction · T)` warm-up steps and peak `η`:
//! - warm-up (all kinds but `constant`): `lr(s) = η₀ + (η − η₀) · s / W` for `s < W`
//!   (seed 000: η₀ = 1e-10, 6 %);
//! - `cosine`: `lr(s) = η_end + (η − η_end) · ½(1 + cos(π (s − W) / (T − W)))` for `s ≥ W`
//!   (seed 000 Table 1, η_end = 0);
//! - `wsd` (warm-up–stable–decay, Wen et al. 2024): `η` until the last `D = round(decay_fraction
//!   · T)` steps, then linearly to `η_end`: `lr(s) = η + (η_end − η) · (s − (T − D) + 1) / D`;
//! - `constant`: `η` throughout (warm-up still applies if `warmup_fraction > 0`).

use anyhow::ensure;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    #[default]
    Cosine,
    Wsd,
    Constant,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// `cosine` (seed 000), `wsd` or `constant`.
    pub kind: ScheduleKind,
    /// Fraction of the steps spent warming up linearly (6 %).
    pub warmup_fraction: f64,
    /// Learning rate at step 0 (1e-10).
    pub warmup_start_lr: f64,
    /// Learning rate reached at the end of the decay (0).
    pub end_lr: f64,
    /// `wsd`: fraction of the steps spent decaying (20 %).
    pub decay_fraction: f64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            kind: ScheduleKind::Cosine,
            warmup_fraction: 0.06,
            warmup_start_lr: 1e-10,
            end_lr: 0.0,
            decay_fraction: 0.2,
        }
    }
}

impl ScheduleConfig {
    pub fn validate(&self, peak: f64) -> anyhow::Result<()> {
        ensure!((0.0..1.0).contains(&self.warmup_fraction), "schedule.warmup_fraction must be in [0, 1)");
        ensure!((0.0..=1.0).contains(&self.decay_fraction), "schedule.decay_fraction must be in [0, 1]");
        ensure!(
            self.kind != ScheduleKind::Wsd || self.warmup_fraction + self.decay_fraction <= 1.0,
            "schedule.warmup_fraction + schedule.decay_fraction must be ≤ 1 for wsd"
        );
        ensure!(
            self.warmup_start_lr >= 0.0 && self.warmup_start_lr <= peak,
            "schedule.warmup_start_lr must be in [0, optim.lr]"
        );
        ensure!(self.end_lr >= 0.0 && self.end_lr <= peak, "schedule.end_lr must be in [0, optim.lr]");
        Ok(())
    }

    /// Warm-up steps of a run of `total` steps: `round(warmup_fraction · total)`.
    pub fn warmup_steps(&self, total: usize) -> usize {
        (self.warmup_fraction * total as f64).round() as usize
    }

    /// The learning rate of step `s` (0-based) of `total`, with peak `peak`.
    pub fn lr(&self, s: usize, total: usize, peak: f64) -> f64 {
        let w = self.warmup_steps(total);
        if s < w {
            return self.warmup_start_lr + (peak - self.warmup_start_lr) * s as f64 / w as f64;
        }
        match self.kind {
            ScheduleKind::Constant => peak,
            ScheduleKind::Cosine => {
                let progress = (s - w) as f64 / (total - w).max(1) as f64;
                self.end_lr + (peak - self.end_lr) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
            }
            ScheduleKind::Wsd => {
                let d = (self.decay_fraction * total as f64).round() as usize;
                let decay_start = total - d;
                if s < decay_start {
                    peak
                } else {
                    peak + (self.end_lr - peak) * (s - decay_start + 1) as f64 / d as f64
                }
            }
        }
    }
}
