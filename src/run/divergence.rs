//! Divergence: a NaN/inf loss or gradient norm, or a loss above `factor` × the running
//! minimum of its moving average, stops the run before the bad update is applied.
//!
//! The minimum is taken over an exponential moving average (α = 0.1) rather than over raw
//! batch losses: late in training one lucky batch can have a third of the typical loss, and a
//! rule keyed to it would call ordinary batch noise a divergence.

use serde::{Deserialize, Serialize};

/// Weight of the newest loss in the moving average.
const EMA_ALPHA: f64 = 0.1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DivergenceMonitor {
    pub factor: f64,
    /// Moving average of the training loss (None before the first step).
    pub ema: Option<f64>,
    /// Lowest moving average seen so far (∞ before the first step; JSON writes ∞ as null, read
    /// back as ∞: a checkpoint taken before the first step, as an import writes).
    #[serde(deserialize_with = "null_is_infinity")]
    pub running_min: f64,
}

fn null_is_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

impl DivergenceMonitor {
    pub fn new(factor: f64) -> Self {
        Self { factor, ema: None, running_min: f64::INFINITY }
    }

    /// The reason this step diverged, or `None`; then folds the loss into the statistics.
    pub fn check(&mut self, loss: f64, grad_norm: f64) -> Option<String> {
        if !loss.is_finite() {
            return Some(format!("loss is {loss}"));
        }
        if !grad_norm.is_finite() {
            return Some(format!("gradient norm is {grad_norm}"));
        }
        if loss > self.factor * self.running_min {
            return Some(format!(
                "loss {loss:.4} exceeds {} × the running minimum {:.4} of its moving average",
                self.factor, self.running_min
            ));
        }
        let ema = self.ema.map_or(loss, |e| (1.0 - EMA_ALPHA) * e + EMA_ALPHA * loss);
        self.ema = Some(ema);
        self.running_min = self.running_min.min(ema);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_nan_inf_and_blow_up_but_not_noise() {
        let mut m = DivergenceMonitor::new(3.0);
        assert_eq!(m.check(5.0, 1.0), None);
        // EMA: 5 → 0.9·5 + 0.1·1 = 4.6 → 0.9·4.6 + 0.1·1 = 4.24.
        assert_eq!(m.check(1.0, 1.0), None);
        assert_eq!(m.check(1.0, 1.0), None);
        assert!((m.running_min - 4.24).abs() < 1e-12);
        // One lucky batch does not lower the bar to a third of its loss.
        assert_eq!(m.check(0.1, 1.0), None);
        assert!((m.running_min - 3.826).abs() < 1e-12);
        assert_eq!(m.check(11.4, 1.0), None, "2.98× the minimum average is allowed");
        let mut m = DivergenceMonitor { factor: 3.0, ema: Some(2.0), running_min: 2.0 };
        assert!(m.check(6.1, 1.0).unwrap().contains("running minimum 2.0000"));
        assert!(m.check(f64::NAN, 1.0).unwrap().contains("NaN"));
        assert!(m.check(2.0, f64::INFINITY).unwrap().contains("gradient norm is inf"));
        assert_eq!(m.running_min, 2.0, "diverged steps do not update the statistics");
    }
}
