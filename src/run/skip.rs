//! Skip-step on outliers (what llm.c #637/#711 and OLMo-core's `SkipStepOptimizer` users asked
//! for): when a step's loss or global gradient norm is more than `k` sample standard deviations
//! above its mean over the recent accepted steps, the update is not applied. The batch is
//! consumed and the schedule moves on, as if the step had produced a zero update.
//!
//! Skipped steps stay out of the statistics, so one bad batch cannot raise the bar for the
//! next. Skips in a row are each reported; after `max_consecutive` of them an outlier is
//! applied anyway and joins the statistics (the level has shifted: a divergence, if it is one,
//! is then caught by the divergence rule), so the rule can never freeze a run.

use crate::stats::{mean, sample_std};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `train.skip_step_*`: the rule's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SkipRule {
    /// `k`; 0 turns skipping off.
    pub sigma: f64,
    /// Accepted steps the mean and deviation are taken over.
    pub window: usize,
    /// No skipping before this many accepted steps.
    pub min_history: usize,
    /// Skips in a row after which an outlier is applied anyway.
    pub max_consecutive: usize,
}

/// The rule's memory, saved in checkpoints so that a resumed run decides alike.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SkipHistory {
    /// Loss and gradient norm of the newest accepted steps, oldest first.
    pub losses: VecDeque<f64>,
    pub grad_norms: VecDeque<f64>,
    /// Steps skipped in a row just before the next one.
    pub consecutive: usize,
    /// Steps skipped in the whole run.
    pub skipped: usize,
}

/// What to do with a step.
#[derive(Clone, Debug, PartialEq)]
pub enum SkipDecision {
    Apply,
    /// Do not update; the reason names the statistic and its threshold.
    Skip(String),
    /// An outlier applied anyway after `max_consecutive` skips in a row; the reason says so.
    ApplyAfterSkips(String),
}

impl SkipHistory {
    /// Decides about a step with this loss and gradient norm and updates the history.
    pub fn decide(&mut self, rule: &SkipRule, loss: f64, grad_norm: f64) -> SkipDecision {
        let outlier = self.outlier(rule, loss, grad_norm);
        match outlier {
            Some(why) if self.consecutive < rule.max_consecutive => {
                self.consecutive += 1;
                self.skipped += 1;
                let streak = if self.consecutive > 1 {
                    format!(" ({} skips in a row)", self.consecutive)
                } else {
                    String::new()
                };
                SkipDecision::Skip(format!("{why}{streak}"))
            }
            Some(why) => {
                let n = self.consecutive;
                self.accept(rule, loss, grad_norm);
                SkipDecision::ApplyAfterSkips(format!(
                    "{why}, but applied: {n} steps were skipped in a row, so the level has shifted; it now counts in \
                        the statistics"
                ))
            }
            None => {
                self.accept(rule, loss, grad_norm);
                SkipDecision::Apply
            }
        }
    }

    fn accept(&mut self, rule: &SkipRule, loss: f64, grad_norm: f64) {
        self.consecutive = 0;
        if rule.sigma <= 0.0 {
            return;
        }
        self.losses.push_back(loss);
        self.grad_norms.push_back(grad_norm);
        while self.losses.len() > rule.window {
            self.losses.pop_front();
            self.grad_norms.pop_front();
        }
    }

    /// Which statistic is an outlier, in words; `None` when neither is (or too little history).
    fn outlier(&self, rule: &SkipRule, loss: f64, grad_norm: f64) -> Option<String> {
        if rule.sigma <= 0.0 || self.losses.len() < rule.min_history.max(2) {
            return None;
        }
        let check = |name: &str, x: f64, hist: &VecDeque<f64>| {
            let h: Vec<f64> = hist.iter().copied().collect();
            let (m, s) = (mean(&h), sample_std(&h));
            let bar = m + rule.sigma * s;
            (x > bar).then(|| format!("{name} {x:.4} > mean {m:.4} + {}σ = {bar:.4}", rule.sigma))
        };
        check("loss", loss, &self.losses).or_else(|| check("gradient norm", grad_norm, &self.grad_norms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: SkipRule = SkipRule { sigma: 3.0, window: 4, min_history: 3, max_consecutive: 2 };

    #[test]
    fn skips_outliers_after_enough_history_and_keeps_them_out() {
        let mut h = SkipHistory::default();
        // Too little history: even a huge loss is applied.
        assert_eq!(h.decide(&RULE, 2.0, 1.0), SkipDecision::Apply);
        assert_eq!(h.decide(&RULE, 100.0, 1.0), SkipDecision::Apply);
        let mut h = SkipHistory::default();
        for loss in [2.0, 3.0, 4.0] {
            assert_eq!(h.decide(&RULE, loss, 1.0), SkipDecision::Apply);
        }
        // Losses 2, 3, 4: mean 3, sample std 1, bar 3 + 3·1 = 6.
        assert_eq!(h.decide(&RULE, 5.9, 1.0), SkipDecision::Apply);
        let SkipDecision::Skip(why) = h.decide(&RULE, 20.0, 1.0) else { panic!("20 is an outlier") };
        assert!(why.starts_with("loss 20.0000 > mean"), "{why}");
        assert_eq!(h.losses, [2.0, 3.0, 4.0, 5.9], "the skipped loss stays out");
        // Gradient norms 1, 1, 1, 1 have σ = 0: anything above 1 is an outlier.
        let SkipDecision::Skip(why) = h.decide(&RULE, 3.0, 1.5) else { panic!("norm outlier") };
        assert!(why.contains("gradient norm 1.5000") && why.contains("2 skips in a row"), "{why}");
        assert_eq!(h.skipped, 2);
        // A third outlier in a row is applied, said so, and joins the window (oldest drops).
        let SkipDecision::ApplyAfterSkips(why) = h.decide(&RULE, 30.0, 1.0) else { panic!("third in a row") };
        assert!(why.contains("2 steps were skipped in a row"), "{why}");
        assert_eq!(h.losses, [3.0, 4.0, 5.9, 30.0]);
        assert_eq!(h.consecutive, 0);
    }

    #[test]
    fn sigma_zero_turns_it_off() {
        let rule = SkipRule { sigma: 0.0, ..RULE };
        let mut h = SkipHistory::default();
        for loss in [1.0, 1.0, 1.0, 1.0, 1e6] {
            assert_eq!(h.decide(&rule, loss, 1.0), SkipDecision::Apply);
        }
        assert!(h.losses.is_empty(), "no history is kept when off");
    }
}
