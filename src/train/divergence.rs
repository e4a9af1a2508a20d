//! Divergence: a NaN/inf loss or gradient norm, or a loss above `factor` × its running
//! minimum, stops the run before the bad update is applied.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DivergenceMonitor {
    pub factor: f64,
    /// Lowest training loss seen so far (∞ before the first step).
    pub running_min: f64,
}

impl DivergenceMonitor {
    pub fn new(factor: f64) -> Self {
        Self { factor, running_min: f64::INFINITY }
    }

    /// The reason this step diverged, or `None`; updates the running minimum.
    pub fn check(&mut self, loss: f64, grad_norm: f64) -> Option<String> {
        if !loss.is_finite() {
            return Some(format!("loss is {loss}"));
        }
        if !grad_norm.is_finite() {
            return Some(format!("gradient norm is {grad_norm}"));
        }
        if loss > self.factor * self.running_min {
            return Some(format!(
                "loss {loss:.4} exceeds {} × its running minimum {:.4}",
                self.factor, self.running_min
            ));
        }
        self.running_min = self.running_min.min(loss);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_nan_inf_and_blow_up_but_not_noise() {
        let mut m = DivergenceMonitor::new(3.0);
        assert_eq!(m.check(5.5, 1.0), None);
        assert_eq!(m.check(2.0, 1.0), None);
        assert_eq!(m.check(5.9, 1.0), None, "2.95× the minimum is still allowed");
        assert!(m.check(6.1, 1.0).unwrap().contains("running minimum 2.0000"));
        assert!(m.check(f64::NAN, 1.0).unwrap().contains("NaN"));
        assert!(m.check(2.0, f64::INFINITY).unwrap().contains("gradient norm is inf"));
        assert_eq!(m.running_min, 2.0);
    }
}
