//! Rollback on repeated spikes (`[train.rollback]`), the recovery OLMo and metaseq runs
//! perform by hand and PaLM describes: after `spikes` SpikeScore spikes ([`super::spike_score`])
//! within `within` steps, the run goes back to its newest checkpoint before the first of them,
//! skips the batches it had drawn since that checkpoint (the ones that led into the spikes),
//! and continues at `lr_factor` times its rate. A run rolls back at most `max` times; after
//! that spikes are only counted.
//!
//! ```toml
//! [train.rollback]
//! spikes = 3         # spikes within `within` steps that trigger a rollback
//! within = 128
//! lr_factor = 0.5    # the rate is multiplied by this at each rollback
//! max = 3
//! ```

use super::spike_score::SpikeAt;
use serde::{Deserialize, Serialize};

/// `[train.rollback]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RollbackRule {
    /// Spikes within `within` steps that trigger a rollback.
    pub spikes: usize,
    /// The steps the spikes are counted over (the newest step and those before it).
    pub within: usize,
    /// The factor the learning rate is multiplied by at each rollback, in (0, 1].
    pub lr_factor: f64,
    /// Rollbacks in one run at most.
    pub max: usize,
}

impl Default for RollbackRule {
    fn default() -> Self {
        Self { spikes: 3, within: 128, lr_factor: 0.5, max: 3 }
    }
}

impl RollbackRule {
    /// Refuses a rule that could never fire or would never end; `checkpoint_every` is the
    /// run's (a rollback needs checkpoints to go back to).
    pub fn check(&self, checkpoint_every: usize) -> anyhow::Result<()> {
        anyhow::ensure!(self.spikes >= 1, "train.rollback.spikes must be ≥ 1");
        anyhow::ensure!(
            self.within >= self.spikes,
            "train.rollback.within ({}) is shorter than train.rollback.spikes ({}): no window could hold that many \
                spikes; make within ≥ spikes",
            self.within,
            self.spikes
        );
        anyhow::ensure!(
            self.lr_factor > 0.0 && self.lr_factor <= 1.0,
            "train.rollback.lr_factor = {} must be in (0, 1] (0.5 halves the rate at each rollback)",
            self.lr_factor
        );
        anyhow::ensure!(self.max >= 1, "train.rollback.max must be ≥ 1 (remove [train.rollback] to turn it off)");
        anyhow::ensure!(
            checkpoint_every > 0,
            "[train.rollback] goes back to a checkpoint, but run.checkpoint_every = 0 writes none; set \
                run.checkpoint_every (e.g. 100)"
        );
        Ok(())
    }

    /// The spikes that call for a rollback at `step`, when `done` rollbacks have happened.
    pub fn due<'a>(
        &self,
        step: usize,
        recent: impl IntoIterator<Item = &'a SpikeAt>,
        done: usize,
    ) -> Option<Vec<SpikeAt>> {
        let window: Vec<SpikeAt> = recent.into_iter().filter(|s| s.step + self.within > step).cloned().collect();
        (done < self.max && window.len() >= self.spikes).then_some(window)
    }
}

/// A rollback as `metrics.jsonl` and the checkpoints record it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RollbackRecord {
    /// The step whose spike triggered it.
    pub step: usize,
    /// The checkpoint's step the run went back to.
    pub to_step: usize,
    /// The spikes of the window.
    pub spikes: Vec<SpikeAt>,
    /// The steps whose batches are skipped (`to_step + 1 ..= step`).
    pub skipped_steps: usize,
    /// The learning-rate factor from now on (the product of every rollback's factor).
    pub lr_scale: f64,
}

/// Where a rollback can be stopped (`Trainer::rollback_fault`): after each of its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RollbackPhase {
    /// The checkpoints after the one rolled back to are gone.
    CheckpointsRemoved,
    /// `metrics.jsonl` and the probes are cut back to that checkpoint.
    OutputsCut,
    /// The rollback's record is written.
    Recorded,
}

impl RollbackPhase {
    pub const ALL: [RollbackPhase; 3] =
        [RollbackPhase::CheckpointsRemoved, RollbackPhase::OutputsCut, RollbackPhase::Recorded];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(step: usize) -> SpikeAt {
        SpikeAt { step, loss: 9.0, grad_norm: 1.0, loss_spike: true, grad_spike: false }
    }

    /// Three spikes within 10 steps: steps 91, 95 and 100 are inside the window ending at 100
    /// (100 − 10 < s), step 90 is not; the fourth rollback of a `max = 3` rule never comes.
    #[test]
    fn a_rollback_is_due_after_k_spikes_within_the_window() {
        let rule = RollbackRule { spikes: 3, within: 10, lr_factor: 0.5, max: 3 };
        assert!(rule.due(100, &[at(90), at(95), at(100)], 0).is_none());
        let due = rule.due(100, &[at(90), at(91), at(95), at(100)], 0).unwrap();
        assert_eq!(due.iter().map(|s| s.step).collect::<Vec<_>>(), [91, 95, 100]);
        assert!(rule.due(100, &[at(91), at(95), at(100)], 3).is_none());
        assert!(rule.check(0).is_err() && rule.check(50).is_ok());
        assert!(RollbackRule { lr_factor: 0.0, ..rule.clone() }.check(50).is_err());
        assert!(RollbackRule { within: 2, ..rule }.check(50).is_err());
    }
}
