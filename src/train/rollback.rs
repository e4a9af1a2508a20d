//! The rollback itself ([`crate::run::rollback`] holds the rule and its record): the model,
//! optimizer and trainer state of the newest checkpoint before the spikes, the sampler where
//! it stood at the spike (so the batches drawn since that checkpoint are skipped), the rate
//! scaled, the outputs cut back to the checkpoint and the rollback recorded. The result is
//! written at once as the checkpoint of its step, replacing that checkpoint: a run killed after
//! a rollback resumes after it, bit for bit.
//!
//! The checkpoints after the one rolled back to are removed first, before the outputs are cut:
//! a run killed anywhere inside the rollback then has that checkpoint as its newest and at least
//! its records (what any kill between checkpoints leaves), so a plain resume repeats the steps
//! since it, meets the same spikes and rolls back the same way.

use super::optim;
use super::progress::Progress;
use super::trainer::Trainer;
use crate::data::Sampler;
use crate::run::checkpoint::{self, TrainerState};
use crate::run::layout;
use crate::run::metrics::MetricsRecord;
use crate::run::rollback::{RollbackPhase, RollbackRecord};
use crate::run::spike_score::SpikeAt;

impl Trainer {
    /// The spikes that call for a rollback after this step, under `[train.rollback]`.
    pub(super) fn rollback_due(&self) -> Option<Vec<SpikeAt>> {
        let rule = self.cfg.train.rollback.as_ref()?;
        rule.due(self.state.step, &self.state.spikes.recent, self.state.rollbacks.len())
    }

    /// Goes back to the newest checkpoint before the first of `spikes`; `false` (with a
    /// warning) when no checkpoint precedes them.
    pub(super) fn roll_back(
        &mut self,
        spikes: Vec<SpikeAt>,
        wall_s: f64,
        progress: &mut Progress,
    ) -> anyhow::Result<bool> {
        let first = spikes.first().map_or(self.state.step, |s| s.step);
        let Some(ckpt) = checkpoint::newest_before(&self.dir, first)? else {
            self.warn_unmet(first, spikes.len(), progress);
            return Ok(false);
        };
        let (state, model, optim) = self.ranks.all_ok(self.load_checkpoint(&ckpt))?;
        let factor = self.cfg.train.rollback.as_ref().map_or(1.0, |r| r.lr_factor);
        let record = RollbackRecord {
            step: self.state.step,
            to_step: state.step,
            spikes,
            skipped_steps: self.state.step - state.step,
            lr_scale: self.state.lr_scale * factor,
        };
        progress.println(&format!(
            "step {}: {} spikes within the rollback window; back to the checkpoint of step {}, skipping the batches \
                of {} steps, learning rate ×{}",
            record.step,
            record.spikes.len(),
            record.to_step,
            record.skipped_steps,
            record.lr_scale
        ));
        if self.out.is_some() {
            checkpoint::remove_after(&self.dir, state.step)?;
        }
        self.fault(RollbackPhase::CheckpointsRemoved)?;
        let resumed = TrainerState {
            sampler_state: self.state.sampler_state,
            lr_scale: record.lr_scale,
            rollbacks: [self.state.rollbacks.clone(), vec![record.clone()]].concat(),
            ..state
        };
        self.sampler = Sampler::from_state(resumed.sampler_state);
        self.model = model;
        self.optim = optim;
        self.state = resumed;
        self.reopen_outputs()?;
        self.fault(RollbackPhase::OutputsCut)?;
        self.record(&MetricsRecord::Rollback(record))?;
        self.fault(RollbackPhase::Recorded)?;
        self.checkpoint(wall_s)?;
        Ok(true)
    }

    /// That `count` spikes from step `first` on call for a rollback no checkpoint precedes: said
    /// once for these spikes, not at every step they stay inside the window.
    fn warn_unmet(&mut self, first: usize, count: usize, progress: &mut Progress) {
        if self.rollback_unmet == Some(first) {
            return;
        }
        self.rollback_unmet = Some(first);
        progress.warn(&format!(
            "step {}: {count} spikes call for a rollback, but no checkpoint precedes the first (step {first}); going \
             on (checkpoint more often with run.checkpoint_every, or keep more with run.keep_checkpoints)",
            self.state.step
        ));
    }

    /// The error [`Trainer::rollback_fault`] asks for after `phase`.
    fn fault(&self, phase: RollbackPhase) -> anyhow::Result<()> {
        anyhow::ensure!(self.rollback_fault != Some(phase), "the rollback was stopped after {phase:?} (a test)");
        Ok(())
    }

    /// The trainer state, model and optimizer that checkpoint `ckpt` saved.
    fn load_checkpoint(
        &self,
        ckpt: &std::path::Path,
    ) -> anyhow::Result<(TrainerState, crate::model::Transformer, burn::optim::ModuleOptimizer)> {
        let state = checkpoint::load_state(ckpt)?;
        let weights = layout::checkpoint_weights(ckpt);
        let model = checkpoint::load_weights(&weights, &self.cfg.model, self.cfg.recipe(), &state.tokenizer, &self.ad)?;
        let fresh = optim::build(&optim::settings(&self.cfg.optim, &model), &model);
        let optim = checkpoint::load_optimizer(ckpt, fresh)?;
        Ok((state, model, optim))
    }
}
