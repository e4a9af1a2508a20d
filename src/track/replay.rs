//! `normlab track DIR`: a run's records that its server does not have yet (all of them for a
//! run never tracked, the rest for one whose server went away), its params, artifacts and
//! status; for a sweep directory, its parent run and every run under it.

use super::sender::{Opening, Worker};
use super::state::TrackState;
use crate::run::layout::{self, Status};
use crate::run::track_target::TrackTarget;
use anyhow::Context;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What one directory's sending came to.
pub struct Sent {
    pub run_id: Option<String>,
    pub records: usize,
    pub warnings: Vec<String>,
    /// Set when the server stopped answering.
    pub undelivered: Option<String>,
}

/// Sends run `dir` to `target` (its own `run.track` when `None`) under `parent`.
pub fn send_run(dir: &Path, target: Option<&TrackTarget>, parent: Option<String>) -> anyhow::Result<Sent> {
    let text = crate::io::read_text(&layout::config(dir), "config")?;
    let cfg = crate::run::RunConfig::from_text(&text, &layout::config(dir).display().to_string(), &[])?;
    // The server named, else the config's, else the one an earlier `normlab track --to` chose.
    let earlier = TrackState::read(dir).ok().flatten().and_then(|st| TrackTarget::try_from(st.target).ok());
    let target = target.or(cfg.run.track.as_ref()).cloned().or(earlier).with_context(|| {
        format!("{} has no run.track; name the server with --to mlflow:http://HOST:PORT", dir.display())
    })?;
    let recipe = json_recipe(dir).unwrap_or_else(|| "unknown".into());
    let sweep = parent.as_ref().and(dir.parent().and_then(Path::parent)).map(|s| s.display().to_string());
    let opening = Opening {
        dir: dir.to_path_buf(),
        target,
        experiment: cfg.run.experiment.clone().unwrap_or_else(|| crate::run::track_target::DEFAULT_EXPERIMENT.into()),
        run_name: name_of(dir),
        tags: super::run_tags(&recipe, sweep.as_deref()),
        config_toml: with_vocab_size(&text, dir),
        parent_run_id: parent,
    };
    let metrics = layout::metrics(dir);
    let bytes = std::fs::read(&metrics).unwrap_or_default();
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let mut w = Worker::new(opening, warnings.clone(), bytes.len() as u64).replaying();
    let records = w.add_lines(&bytes, &metrics)?;
    w.end(status_of(dir), &super::run_artifacts(dir));
    let state: &TrackState = w.state();
    let sent = Sent {
        run_id: state.run_id.clone(),
        records,
        undelivered: w.gave_up().then(|| state.undelivered.clone().unwrap_or_default()),
        warnings: std::mem::take(&mut *warnings.lock().unwrap_or_else(|e| e.into_inner())),
    };
    Ok(sent)
}

/// `config.toml`'s text with `model.vocab_size` as the run trained it: a config that did not
/// set it (its vocabulary follows the tokenizer) gets the one `run.json` records.
fn with_vocab_size(text: &str, dir: &Path) -> String {
    let (Ok(mut table), Ok(info)) =
        (toml::from_str::<toml::Table>(text), crate::io::json::read::<layout::RunInfo>(&layout::info(dir)))
    else {
        return text.to_string();
    };
    if let Some(toml::Value::Table(model)) = table.get_mut("model") {
        model.entry("vocab_size").or_insert(toml::Value::Integer(info.data.vocab_size as i64));
    }
    toml::to_string(&table).unwrap_or_else(|_| text.to_string())
}

/// The MLflow status of a run directory's `status.json`.
fn status_of(dir: &Path) -> &'static str {
    match layout::read_status(dir).ok().flatten() {
        Some(Status::Finished { .. }) => "FINISHED",
        Some(Status::Diverged { .. }) => "FAILED",
        Some(Status::Stopped { .. }) => "KILLED",
        _ => "RUNNING",
    }
}

fn json_recipe(dir: &Path) -> Option<String> {
    crate::io::json::read::<layout::RunInfo>(&layout::info(dir)).ok().map(|i| i.recipe)
}

/// A directory's name, as its run is named on the server.
pub fn name_of(dir: &Path) -> String {
    std::path::absolute(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "run".into())
}
