//! The run directory, the one place its layout is known:
//!
//! ```text
//! RUN/config.toml          the full config, every default filled in (reused by --resume)
//! RUN/run.json             version, machine, seeds, parameter count, steps, data summary
//! RUN/tokenizer.json       BPE runs: the tokenizer (byte and GPT-2 need no file)
//! RUN/metrics.jsonl        per-step and per-validation records
//! RUN/probes.jsonl         live probe records
//! RUN/tb/                  TensorBoard event files
//! RUN/status.json          running / finished / diverged (with step and reason)
//! RUN/checkpoints/latest.json, RUN/checkpoints/step-NNNNNN/{model.safetensors,optimizer.bpk,state.json}
//! RUN/model.safetensors    the final weights
//! RUN/probes/{init,step-N}.json   `normlab probe` results
//! RUN/report/              `normlab report RUN`
//! RUN/evaluation.json      `normlab evaluate RUN`
//! RUN/tracking.json        the tracking server's run and what of metrics.jsonl it has
//! RUN/.lock                the pid of the process training the run (the lock itself is
//!                          flock(2) on RUN; see crate::io::lock)
//! ```
//!
//! The directory appears by one rename once its first files are complete, so a run that fails
//! during set-up leaves nothing behind that looks like a run.

use crate::data::DataInfo;
use crate::device::Machine;
use crate::io::json;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Exit status of `normlab train` when the run diverged (errors exit with 2), which a sweep
/// reads as [`Status::Diverged`].
pub const EXIT_DIVERGED: i32 = 3;

/// Weights, in a run's root (final) and in each checkpoint.
const WEIGHTS: &str = "model.safetensors";

pub fn config(run: &Path) -> PathBuf {
    run.join("config.toml")
}
pub fn info(run: &Path) -> PathBuf {
    run.join("run.json")
}
pub fn tokenizer(run: &Path) -> PathBuf {
    run.join("tokenizer.json")
}
pub fn metrics(run: &Path) -> PathBuf {
    run.join("metrics.jsonl")
}
/// `tracking.json` of a run or a sweep directory (`crate::track`).
pub fn tracking(dir: &Path) -> PathBuf {
    dir.join("tracking.json")
}
pub fn status(run: &Path) -> PathBuf {
    run.join("status.json")
}
/// Exact match and F1 of a pairs run's test sets ([`super::pairs_eval::PairsEval`]).
pub fn pairs_eval(run: &Path) -> PathBuf {
    run.join("pairs_eval.json")
}

pub fn probes(run: &Path) -> PathBuf {
    run.join("probes.jsonl")
}
/// `alerts.jsonl`: the gradient-norm alerts (`probe.alert_warmup_factor`).
pub fn alerts(run: &Path) -> PathBuf {
    run.join("alerts.jsonl")
}

pub fn tensorboard(run: &Path) -> PathBuf {
    run.join("tb")
}
/// `normlab probe`'s result at `at` (`init` or `step-N`).
pub fn probe_snapshot(run: &Path, at: &str) -> PathBuf {
    run.join("probes").join(format!("{at}.json"))
}
pub fn final_weights(run: &Path) -> PathBuf {
    run.join(WEIGHTS)
}
/// `normlab evaluate`'s result ([`crate::tasks::evaluate::Evaluation`]).
pub fn evaluation(run: &Path) -> PathBuf {
    run.join("evaluation.json")
}

pub fn report(run: &Path) -> PathBuf {
    run.join("report")
}
pub fn checkpoints(run: &Path) -> PathBuf {
    run.join("checkpoints")
}
/// The pointer to the latest complete checkpoint.
pub fn latest_checkpoint(run: &Path) -> PathBuf {
    checkpoints(run).join("latest.json")
}
/// The directory name of the checkpoint at `step`.
pub fn checkpoint_name(step: usize) -> String {
    format!("step-{step:06}")
}
pub fn checkpoint_weights(ckpt: &Path) -> PathBuf {
    ckpt.join(WEIGHTS)
}
pub fn checkpoint_optimizer(ckpt: &Path) -> PathBuf {
    ckpt.join("optimizer.bpk")
}
pub fn checkpoint_state(ckpt: &Path) -> PathBuf {
    ckpt.join("state.json")
}

/// The run's lock ([`crate::io::lock`]), held by the one process training the run.
pub type RunLock = crate::io::lock::DirLock;

/// Takes the run's lock, or says which process holds it.
pub fn lock(run: &Path) -> anyhow::Result<RunLock> {
    match crate::io::lock::try_lock(run)? {
        Ok(l) => Ok(l),
        Err(holder) => bail!(
            "the run in {} is being trained right now by another normlab process ({holder}); wait for it to finish \
                or stop it, then resume",
            run.display()
        ),
    }
}

/// Whether another process holds the run's lock now.
pub fn is_locked(run: &Path) -> bool {
    crate::io::lock::is_locked(run)
}

/// Removes what an interrupted writer left: `.NAME.*.tmp` files and `.step-N.tmp` directories
/// in the run directory and its `checkpoints/`.
pub fn remove_temporaries(run: &Path) {
    for dir in [run.to_path_buf(), checkpoints(run)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let p = e.path();
                let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
            }
        }
    }
}

/// `run.json`: what was run, where, with which seeds and sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub normlab_version: String,
    pub command: Vec<String>,
    pub started_unix: u64,
    pub machine: Machine,
    pub device: String,
    pub seed: u64,
    pub sampler_seed: u64,
    pub params: usize,
    /// All but the token embedding and the output projection (absent in older runs).
    #[serde(default)]
    pub params_non_embedding: Option<usize>,
    pub total_steps: usize,
    pub tokens_per_step: usize,
    pub tokens_per_param: f64,
    pub recipe: String,
    pub data: DataInfo,
    /// Validation loss of the training split's unigram distribution (see
    /// [`crate::data::Dataset::unigram_loss`]); absent in runs made before it was recorded.
    #[serde(default)]
    pub unigram_loss: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Status {
    Running {
        step: usize,
        total_steps: usize,
    },
    Finished {
        step: usize,
        #[serde(deserialize_with = "json::nan")]
        val_loss: f64,
        #[serde(deserialize_with = "json::nan")]
        val_ppl: f64,
        wall_s: f64,
        /// SHA-256 of the final `model.safetensors`, checked by every command that reads it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weights_sha256: Option<String>,
    },
    Diverged {
        step: usize,
        reason: String,
    },
    /// Stopped by a signal at a step's end, with a checkpoint of that step: resumable.
    Stopped {
        step: usize,
        total_steps: usize,
        signal: String,
    },
}

pub fn write_status(dir: &Path, s: &Status) -> anyhow::Result<()> {
    json::write(&status(dir), s)
}

/// `None` when the directory holds no run.
pub fn read_status(dir: &Path) -> anyhow::Result<Option<Status>> {
    let p = status(dir);
    if !p.is_file() {
        return Ok(None);
    }
    json::read(&p).map(Some)
}

/// Whether `dir` holds a normlab run (its config, its record or its status).
pub fn holds_run(dir: &Path) -> bool {
    config(dir).is_file() || info(dir).is_file() || status(dir).is_file()
}

/// A new run may use `dir` when it does not exist, is empty, or `force` is set (then it is
/// removed).
pub fn claim(dir: &Path, force: bool) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let empty = dir.is_dir() && std::fs::read_dir(dir)?.next().is_none();
    if empty {
        std::fs::remove_dir(dir).with_context(|| format!("cannot remove the empty {}", dir.display()))?;
        return Ok(());
    }
    if is_locked(dir) {
        bail!(
            "run.dir {} is being trained right now by another normlab process; choose another run.dir (--set \
                run.dir=...)",
            dir.display()
        );
    }
    if force && config(dir).is_file() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        return Ok(());
    }
    match read_status(dir).ok().flatten() {
        Some(s) => bail!(
            "run.dir {} already holds a run ({}); continue it with `normlab train --resume {}`, choose another \
                run.dir (--set run.dir=...), or pass --force to replace it",
            dir.display(),
            describe(&s),
            dir.display()
        ),
        None if force => {
            bail!("{} exists and is not a normlab run; refusing to delete it — choose another run.dir", dir.display())
        }
        None => bail!("{} exists and is not empty; choose another run.dir (--set run.dir=...)", dir.display()),
    }
}

pub fn describe(s: &Status) -> String {
    match s {
        Status::Running { step, total_steps } => {
            format!("interrupted after the checkpoint at step {step}/{total_steps}")
        }
        Status::Finished { step, val_loss, .. } => format!("finished {step} steps, val loss {val_loss:.4}"),
        Status::Diverged { step, reason } => format!("diverged at step {step}: {reason}"),
        Status::Stopped { step, total_steps, signal } => {
            format!("stopped by {signal} at step {step}/{total_steps} (checkpoint written)")
        }
    }
}

/// Lets `write` fill a temporary sibling of `dir` (laid out as a run directory), then renames
/// it to `dir` and returns the run's lock, taken on the temporary directory before anything is
/// written: a run is never visible unlocked. Two processes creating the same run race on the
/// rename; the loser gets the same refusal as [`claim`]. Temporaries that interrupted creators
/// left beside it (unlocked `.NAME.creating-PID` directories of any run) are removed first.
pub fn create(dir: &Path, write: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<RunLock> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let name = dir.file_name().context("run.dir has no final component")?.to_string_lossy().into_owned();
    remove_abandoned_creations(parent);
    let tmp = parent.join(format!(".{name}.creating-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let result = (|| {
        let lock = lock(&tmp)?;
        write(&tmp)?;
        if let Err(e) = std::fs::rename(&tmp, dir) {
            if dir.exists() {
                claim(dir, false)?;
            }
            return Err(e).with_context(|| format!("cannot create {}", dir.display()));
        }
        crate::io::atomic::sync_dir(parent)?;
        Ok(lock)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Removes the `.NAME.creating-PID` directories in `parent` (any `NAME`) whose creator is gone:
/// no process PID, and nobody holds their lock. A sweep calls it on its runs at every start,
/// so that a sweep killed while creating a run leaves nothing behind once it is rerun.
pub fn remove_abandoned_creations(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let pid = e.file_name().to_str().and_then(|n| {
            let (_, pid) = n.strip_prefix('.')?.rsplit_once(".creating-")?;
            pid.parse::<u32>().ok()
        });
        let Some(pid) = pid else { continue };
        if p.is_dir() && !crate::io::lock::alive(pid) && !is_locked(&p) {
            let _ = std::fs::remove_dir_all(&p);
        }
    }
}
