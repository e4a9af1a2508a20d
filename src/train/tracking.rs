//! The run's tracking server (`run.track`, [`crate::track`]): the sender started with the run
//! (continuing the server's run after a resume), its warnings shown on the progress line, and
//! the run ended there with its status and files.

use super::progress::Progress;
use super::trainer::Trainer;
use crate::run::CheckedConfig;
use crate::run::checkpoint::TrainerState;
use crate::track::{Opening, Tracker};
use std::path::Path;

impl Trainer {
    /// The sender of a run whose config names a tracking server.
    pub(super) fn open_tracker(cfg: &CheckedConfig, dir: &Path, state: &TrainerState) -> Option<Tracker> {
        let target = cfg.run.track.clone()?;
        let parent = std::env::var(crate::track::PARENT_ENV).ok().filter(|p| !p.is_empty());
        // A sweep's run lives in SWEEP/runs/NAME.
        let sweep = parent.as_ref().and(dir.parent().and_then(Path::parent)).map(|s| s.display().to_string());
        let opening = Opening {
            dir: dir.to_path_buf(),
            target,
            experiment: cfg
                .run
                .experiment
                .clone()
                .unwrap_or_else(|| crate::run::track_target::DEFAULT_EXPERIMENT.into()),
            run_name: crate::track::replay::name_of(dir),
            tags: crate::track::run_tags(&cfg.recipe().name, sweep.as_deref()),
            // The config as trained, `model.vocab_size` (fitted to the tokenizer) included.
            config_toml: cfg.to_toml().unwrap_or_default(),
            parent_run_id: parent,
        };
        Some(Tracker::start(opening, state.metrics_bytes))
    }

    /// The tracking server's warnings since the last step, on the progress line.
    pub(super) fn tracking_warnings(&self, progress: &mut Progress) {
        for w in self.tracker.iter().flat_map(Tracker::take_warnings) {
            progress.warn(&format!("tracking: {w}"));
        }
    }

    /// Ends the run on its tracking server with `status` (MLflow's `FINISHED`, `FAILED`,
    /// `KILLED`) and its files.
    pub(super) fn end_tracking(&mut self, status: &'static str, progress: &Progress) {
        if let Some(t) = self.tracker.take() {
            for w in t.finish(status, crate::track::run_artifacts(&self.dir)) {
                progress.println(&format!("warning: tracking: {w}"));
            }
        }
    }
}
