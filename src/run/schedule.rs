//! Learning-rate schedules as pure functions of the step, so a resumed run gets exactly the
//! rates an uninterrupted one does.
//!
//! With `T` total steps, `W = round(warmup_fraction · T)` warm-up steps (or `warmup_steps`
//! when given: KiteNorm's 1B runs warm up for 572 steps) and peak `η`:
//! - warm-up (all kinds but `constant`): `lr(s) = η₀ + (η − η₀) · s / W` for `s < W`
//!   (KiteNorm: η₀ = 1e-10, 6 %);
//! - `cosine`: `lr(s) = η_end + (η − η_end) · ½(1 + cos(π (s − W) / (T − W)))` for `s ≥ W`
//!   (KiteNorm Table 1, η_end = 0);
//! - `wsd` (warm-up–stable–decay, Wen et al. 2024): `η` until the last `D = round(decay_fraction
//!   · T)` steps, then linearly to `η_end`: `lr(s) = η + (η_end − η) · (s − (T − D) + 1) / D`;
//! - `constant`: `η` throughout (warm-up still applies if `warmup_fraction > 0`).
//!
//! `η_end` is `end_lr`, or `end_lr_ratio · η` when the ratio is given (the BHyT paper's C.1's "min LR
//! ratio", so that one setting serves every peak of a learning-rate grid).

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
    /// `cosine` (KiteNorm), `wsd` or `constant`.
    pub kind: ScheduleKind,
    /// Fraction of the steps spent warming up linearly (6 %).
    pub warmup_fraction: f64,
    /// Warm-up as a step count; replaces `warmup_fraction` when given.
    pub warmup_steps: Option<usize>,
    /// Learning rate at step 0 (1e-10).
    pub warmup_start_lr: f64,
    /// Learning rate reached at the end of the decay (0).
    pub end_lr: f64,
    /// The end learning rate as a fraction of the peak; replaces `end_lr` when given.
    pub end_lr_ratio: Option<f64>,
    /// `wsd`: fraction of the steps spent decaying (20 %).
    pub decay_fraction: f64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            kind: ScheduleKind::Cosine,
            warmup_fraction: 0.06,
            warmup_steps: None,
            warmup_start_lr: 1e-10,
            end_lr: 0.0,
            end_lr_ratio: None,
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
            "schedule.warmup_start_lr = {:e} must be in [0, optim.lr = {peak:e}]; lower schedule.warmup_start_lr, or \
             raise optim.lr",
            self.warmup_start_lr
        );
        ensure!(self.end_lr >= 0.0 && self.end_lr <= peak, "schedule.end_lr must be in [0, optim.lr]");
        if let Some(r) = self.end_lr_ratio {
            ensure!((0.0..=1.0).contains(&r), "schedule.end_lr_ratio must be in [0, 1] (a fraction of optim.lr)");
            ensure!(self.end_lr == 0.0, "give schedule.end_lr or schedule.end_lr_ratio, not both");
        }
        Ok(())
    }

    /// Checks the warm-up fits a run of `total` steps (with the decay, for `wsd`).
    pub fn validate_steps(&self, total: usize) -> anyhow::Result<()> {
        let Some(w) = self.warmup_steps else { return Ok(()) };
        let d = if self.kind == ScheduleKind::Wsd { self.decay_steps(total) } else { 0 };
        ensure!(
            w + d <= total,
            "schedule.warmup_steps = {w} does not fit a run of {total} steps{}",
            if d > 0 { format!(" with {d} decay steps") } else { String::new() }
        );
        Ok(())
    }

    /// Warm-up steps of a run of `total` steps: `warmup_steps`, else
    /// `round(warmup_fraction · total)`.
    pub fn warmup_steps(&self, total: usize) -> usize {
        self.warmup_steps.unwrap_or_else(|| (self.warmup_fraction * total as f64).round() as usize)
    }

    /// `wsd`'s decay steps: `round(decay_fraction · total)`.
    fn decay_steps(&self, total: usize) -> usize {
        (self.decay_fraction * total as f64).round() as usize
    }

    /// The learning rate the decay ends at, for peak `peak`.
    pub fn end(&self, peak: f64) -> f64 {
        self.end_lr_ratio.map_or(self.end_lr, |r| r * peak)
    }

    /// The learning rate of step `s` (0-based) of `total`, with peak `peak`.
    pub fn lr(&self, s: usize, total: usize, peak: f64) -> f64 {
        let w = self.warmup_steps(total);
        if s < w {
            return self.warmup_start_lr + (peak - self.warmup_start_lr) * s as f64 / w as f64;
        }
        let end = self.end(peak);
        match self.kind {
            ScheduleKind::Constant => peak,
            ScheduleKind::Cosine => {
                let progress = (s - w) as f64 / (total.saturating_sub(w)).max(1) as f64;
                end + (peak - end) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
            }
            ScheduleKind::Wsd => {
                let d = self.decay_steps(total);
                let decay_start = total - d;
                if s < decay_start { peak } else { peak + (end - peak) * (s - decay_start + 1) as f64 / d as f64 }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ScheduleConfig, ScheduleKind};

    #[test]
    fn warmup_as_a_step_count_replaces_the_fraction() {
        // KiteNorm's 1B runs: 572 warm-up steps of 7325, from 1e-10 to the peak 2e-3.
        let c = ScheduleConfig { kind: ScheduleKind::Wsd, warmup_steps: Some(572), ..Default::default() };
        assert_eq!(c.warmup_steps(7325), 572);
        assert_eq!(c.lr(0, 7325, 2e-3), 1e-10);
        assert!((c.lr(286, 7325, 2e-3) - (1e-10 + (2e-3 - 1e-10) * 0.5)).abs() < 1e-15);
        assert_eq!(c.lr(572, 7325, 2e-3), 2e-3, "stable from step 572");
        // wsd decays over the last round(0.2 · 7325) = 1465 steps: stable until step 5859.
        assert_eq!(c.lr(5859, 7325, 2e-3), 2e-3);
        assert!((c.lr(5860, 7325, 2e-3) - 2e-3 * (1.0 - 1.0 / 1465.0)).abs() < 1e-15);
        assert!(c.validate_steps(7325).is_ok());
        assert!(c.validate_steps(700).is_err(), "572 warm-up + 140 decay steps do not fit 700");
        let frac = ScheduleConfig::default();
        assert_eq!(frac.warmup_steps(7325), 440, "round(0.06 · 7325) without the count");
    }

    #[test]
    fn end_learning_rate_as_a_ratio_of_the_peak() {
        // The BHyT paper's C.3: min LR ratio 0.1 with cosine decay; the last step of T = 100 with W = 10
        // is at progress 89/90: end + (peak − end)·½(1 + cos(π·89/90)).
        let c = ScheduleConfig { end_lr_ratio: Some(0.1), warmup_fraction: 0.1, ..Default::default() };
        let (peak, end) = (5e-4, 5e-5);
        let want = end + (peak - end) * 0.5 * (1.0 + (std::f64::consts::PI * 89.0 / 90.0).cos());
        assert!((c.lr(99, 100, peak) - want).abs() < 1e-18);
        assert!((c.end(3e-4) - 3e-5).abs() < 1e-18, "the same ratio at every peak of a grid");
        assert!(c.validate(peak).is_ok());
        let both = ScheduleConfig { end_lr: 1e-5, ..c.clone() };
        assert!(both.validate(peak).is_err(), "end_lr and end_lr_ratio together");
        assert!(ScheduleConfig { end_lr_ratio: Some(1.5), ..c }.validate(peak).is_err());
    }
}
