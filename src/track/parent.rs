//! A sweep's parent run: created when the sweep starts (its `sweep.toml` as params), named to
//! the runs it starts through [`super::PARENT_ENV`] so that each is its child, and ended with
//! the sweep's report, results and plan as artifacts and each method's mean final loss as a
//! metric.

use super::sender::{Opening, Worker};
use super::state::TrackState;
use crate::run::track_target::TrackTarget;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The sweep in `dir` as the server should know it.
pub struct SweepOpening<'a> {
    pub dir: &'a Path,
    pub target: &'a TrackTarget,
    pub experiment: &'a str,
    /// `sweep.toml` as run.
    pub sweep_toml: String,
}

fn opening(s: &SweepOpening<'_>) -> Opening {
    let name = super::replay::name_of(s.dir);
    Opening {
        dir: s.dir.to_path_buf(),
        target: s.target.clone(),
        experiment: s.experiment.to_string(),
        run_name: name.clone(),
        tags: vec![
            ("normlab.sweep".into(), s.dir.display().to_string()),
            ("normlab.version".into(), env!("CARGO_PKG_VERSION").into()),
            ("mlflow.source.name".into(), "normlab".into()),
        ],
        config_toml: s.sweep_toml.clone(),
        parent_run_id: None,
    }
}

/// Creates (or finds again) the parent run; its id, or the warnings that say why there is none.
pub fn open(s: &SweepOpening<'_>) -> Result<String, Vec<String>> {
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let mut w = Worker::new(opening(s), warnings.clone(), 0);
    w.flush(true);
    let taken = std::mem::take(&mut *warnings.lock().unwrap_or_else(|e| e.into_inner()));
    match (&w.state().run_id, w.gave_up()) {
        (Some(id), false) => Ok(id.clone()),
        _ => Err(taken),
    }
}

/// The parent run's id, when the sweep in `dir` has one.
pub fn id(dir: &Path) -> Option<String> {
    TrackState::read(dir).ok().flatten()?.run_id
}

/// Ends the parent run: `metrics` (name, value) at step 0, the sweep's `files`, the status.
pub fn finish(
    s: &SweepOpening<'_>,
    metrics: &[(String, f64)],
    files: &[(String, PathBuf)],
    status: &'static str,
) -> Vec<String> {
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let mut w = Worker::new(opening(s), warnings.clone(), 0);
    let now = super::mlflow::now_ms();
    for (key, value) in metrics.iter().filter(|(_, v)| v.is_finite()) {
        w.push_metric(super::mlflow::Metric {
            key: super::keys::sanitize(key),
            value: *value,
            timestamp: now,
            step: 0,
        });
    }
    w.end(status, files);
    std::mem::take(&mut *warnings.lock().unwrap_or_else(|e| e.into_inner()))
}
