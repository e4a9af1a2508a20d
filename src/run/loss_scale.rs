//! Dynamic loss scaling for f16 training (Micikevicius et al. 2018; PyTorch's `GradScaler`
//! defaults): the loss is multiplied by `S` before the backward pass so that small gradients
//! survive f16's range, and the gradients are divided by `S` before anything reads them. A
//! step whose gradients overflowed (a non-finite global norm while the loss is finite) is
//! skipped and `S` halves; after `GROWTH_INTERVAL` good steps in a row `S` doubles. bf16 and
//! f32 have f32's range and use `S = 1`.

use serde::{Deserialize, Serialize};

/// PyTorch's `GradScaler(init_scale=2**16, growth_factor=2, backoff_factor=0.5,
/// growth_interval=2000)`.
pub const INITIAL_SCALE: f64 = 65536.0;
pub const GROWTH_INTERVAL: usize = 2000;
/// Below this scale an overflow is no longer a scaling problem: the run is treated as
/// diverged (the gradients are non-finite at any scale).
pub const MIN_SCALE: f64 = 1.0;

/// The scale and its history, saved in checkpoints so that a resumed run scales alike.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossScale {
    /// The current `S`.
    pub scale: f64,
    /// Good steps since the last change of `S`.
    pub good_steps: usize,
    /// Steps skipped for overflow in the whole run.
    pub overflows: usize,
}

impl Default for LossScale {
    fn default() -> Self {
        Self { scale: INITIAL_SCALE, good_steps: 0, overflows: 0 }
    }
}

/// What the scaler decided about a step.
#[derive(Clone, Debug, PartialEq)]
pub enum ScaleDecision {
    Apply,
    /// Gradients overflowed at this scale: skip the update (the message says so).
    Skip(String),
    /// Non-finite gradients even at [`MIN_SCALE`]: a divergence, not an overflow.
    Diverged,
}

impl LossScale {
    /// Updates the scale after a step whose (unscaled) global gradient norm is `grad_norm`.
    pub fn update(&mut self, grad_norm: f64) -> ScaleDecision {
        if grad_norm.is_finite() {
            self.good_steps += 1;
            if self.good_steps >= GROWTH_INTERVAL {
                self.scale *= 2.0;
                self.good_steps = 0;
            }
            return ScaleDecision::Apply;
        }
        if self.scale / 2.0 < MIN_SCALE {
            return ScaleDecision::Diverged;
        }
        let was = self.scale;
        self.scale /= 2.0;
        self.good_steps = 0;
        self.overflows += 1;
        ScaleDecision::Skip(format!("f16 gradients overflowed at loss scale {was}; scale lowered to {}", self.scale))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_on_overflow_and_doubles_after_the_growth_interval() {
        let mut s = LossScale::default();
        assert!(matches!(s.update(f64::INFINITY), ScaleDecision::Skip(_)));
        assert_eq!((s.scale, s.overflows), (32768.0, 1));
        assert!(matches!(s.update(f64::NAN), ScaleDecision::Skip(_)));
        assert_eq!(s.scale, 16384.0);
        for _ in 0..GROWTH_INTERVAL - 1 {
            assert_eq!(s.update(1.0), ScaleDecision::Apply);
        }
        assert_eq!(s.scale, 16384.0);
        assert_eq!(s.update(1.0), ScaleDecision::Apply);
        assert_eq!((s.scale, s.good_steps), (32768.0, 0));
    }

    #[test]
    fn overflow_at_the_floor_is_a_divergence() {
        let mut s = LossScale { scale: 1.0, good_steps: 5, overflows: 16 };
        assert_eq!(s.update(f64::INFINITY), ScaleDecision::Diverged);
    }
}
