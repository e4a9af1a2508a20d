//! SpikeScore, as OLMo-core's `StabilityMonitorCallback` defines it: a step's training loss
//! (cross-entropy) is a spike when it exceeds the mean of the previous [`WINDOW`] losses by
//! more than [`SIGMA`] of their population standard deviation, and likewise its global
//! gradient norm; nothing is a spike before the window is full or when its deviation is below
//! 1e-10. A step with either spike counts once. The score is the share of such steps,
//! `spikes / steps`, reported once [`WINDOW`] steps are seen (OLMo-core's
//! `spike/SpikeScore (total)`).
//!
//! The window and threshold are fixed, not settings: a score is only comparable across runs,
//! recipes and papers when every run measures it alike.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Values the mean and deviation are taken over (OLMo-core: `window_size = 128`).
pub const WINDOW: usize = 128;
/// Standard deviations above the mean that make a spike (OLMo-core: `threshold_std = 6.0`).
pub const SIGMA: f64 = 6.0;

/// The monitor's memory, saved in checkpoints so that a resumed run scores alike.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpikeMonitor {
    losses: VecDeque<f64>,
    grad_norms: VecDeque<f64>,
    /// Steps seen, and those with a spike (of the loss, the gradient norm or both).
    pub steps: usize,
    pub spikes: usize,
    /// The newest spikes (at most [`WINDOW`]), for the rollback rule.
    pub recent: VecDeque<SpikeAt>,
}

/// A step with a spike.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpikeAt {
    pub step: usize,
    pub loss: f64,
    pub grad_norm: f64,
    pub loss_spike: bool,
    pub grad_spike: bool,
}

impl SpikeMonitor {
    /// Scores one step; returns its spike, if it is one.
    pub fn observe(&mut self, step: usize, loss: f64, grad_norm: f64) -> Option<SpikeAt> {
        let loss_spike = is_spike(loss, &mut self.losses);
        let grad_spike = is_spike(grad_norm, &mut self.grad_norms);
        push(&mut self.losses, loss);
        push(&mut self.grad_norms, grad_norm);
        self.steps += 1;
        if !(loss_spike || grad_spike) {
            return None;
        }
        self.spikes += 1;
        let at = SpikeAt { step, loss, grad_norm, loss_spike, grad_spike };
        self.recent.push_back(at.clone());
        if self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
        Some(at)
    }

    /// SpikeScore: the share of steps with a spike, once [`WINDOW`] steps are seen.
    pub fn score(&self) -> Option<f64> {
        (self.steps >= WINDOW).then(|| self.spikes as f64 / self.steps as f64)
    }

    /// The spikes at steps after `after`.
    pub fn since(&self, after: usize) -> Vec<SpikeAt> {
        self.recent.iter().filter(|s| s.step > after).cloned().collect()
    }
}

/// Whether `value` is above mean + [`SIGMA`]·σ of a full window (σ the population deviation).
fn is_spike(value: f64, history: &mut VecDeque<f64>) -> bool {
    if history.len() < WINDOW {
        return false;
    }
    let (mean, std) = crate::stats::mean_std(history.make_contiguous());
    std >= 1e-10 && value > mean + SIGMA * std
}

fn push(history: &mut VecDeque<f64>, value: f64) {
    history.push_back(value);
    if history.len() > WINDOW {
        history.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Losses alternating 1.0 and 1.2 have mean 1.1 and population σ 0.1 over any full
    /// window, so the threshold is 1.1 + 6·0.1 = 1.7: 1.69 is no spike, 1.71 is. Nothing counts
    /// before 128 values, a constant history (σ = 0) flags nothing, and the score is spikes
    /// over steps from the 128th step on.
    #[test]
    fn spikes_follow_olmo_cores_rule() {
        let mut early = SpikeMonitor::default();
        for i in 0..WINDOW {
            assert!(
                early.observe(i + 1, if i == 5 { 50.0 } else { 1.0 }, 1.0).is_none(),
                "not before the window fills"
            );
        }
        assert_eq!(early.score(), Some(0.0));
        let mut m = SpikeMonitor::default();
        for i in 0..WINDOW {
            m.observe(i + 1, if i % 2 == 0 { 1.0 } else { 1.2 }, 1.0);
        }
        assert!(m.clone().observe(129, 1.69, 1.0).is_none());
        let s = m.observe(129, 1.71, 1.0).expect("a loss spike");
        assert!(s.loss_spike && !s.grad_spike, "a constant gradient norm has σ = 0: never a spike");
        assert_eq!(m.spikes, 1);
        assert!((m.score().unwrap() - 1.0 / 129.0).abs() < 1e-15);
        assert_eq!(m.since(128).len(), 1);
        assert!(m.since(129).is_empty());
    }
}
