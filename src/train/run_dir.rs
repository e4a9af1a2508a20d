//! The run directory:
//!
//! ```text
//! RUN/config.toml          the full config, every default filled in (reused by --resume)
//! RUN/run.json             version, machine, seeds, parameter count, steps, data summary
//! RUN/tokenizer.json       BPE runs: the tokenizer (byte and GPT-2 need no file)
//! RUN/metrics.jsonl        per-step and per-validation records
//! RUN/status.json          running / finished / diverged (with step and reason)
//! RUN/checkpoints/latest.json, RUN/checkpoints/step-NNNNNN/{model.safetensors,optimizer.bpk,state.json}
//! RUN/model.safetensors    the final weights
//! ```
//!
//! The directory appears by one rename once its first files are complete, so a run that fails
//! during set-up leaves nothing behind that looks like a run.

use crate::io::tensors::write_atomic;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const CONFIG: &str = "config.toml";
pub const RUN_INFO: &str = "run.json";
pub const TOKENIZER: &str = "tokenizer.json";
pub const METRICS: &str = "metrics.jsonl";
pub const STATUS: &str = "status.json";
pub const CHECKPOINTS: &str = "checkpoints";
pub const FINAL_WEIGHTS: &str = "model.safetensors";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Status {
    Running { step: usize, total_steps: usize },
    Finished { step: usize, val_loss: f64, val_ppl: f64, wall_s: f64 },
    Diverged { step: usize, reason: String },
}

pub fn write_status(dir: &Path, s: &Status) -> anyhow::Result<()> {
    write_atomic(&dir.join(STATUS), serde_json::to_string_pretty(s)?.as_bytes())
}

/// `None` when the directory holds no run.
pub fn read_status(dir: &Path) -> anyhow::Result<Option<Status>> {
    let p = dir.join(STATUS);
    if !p.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&p)?;
    Ok(Some(serde_json::from_str(&text).with_context(|| format!("{} is corrupt", p.display()))?))
}

/// A new run may use `dir` when it does not exist, is empty, or `force` is set (then it is
/// removed).
pub fn claim(dir: &Path, force: bool) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let empty = dir.is_dir() && std::fs::read_dir(dir)?.next().is_none();
    if empty {
        std::fs::remove_dir(dir)?;
        return Ok(());
    }
    if force && dir.join(CONFIG).is_file() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        return Ok(());
    }
    match read_status(dir).ok().flatten() {
        Some(s) => bail!(
            "run.dir {} already holds a run ({}); continue it with `normlab train --resume {}`, choose another run.dir (--set run.dir=...), or pass --force to replace it",
            dir.display(),
            describe(&s),
            dir.display()
        ),
        None if force => bail!("{} exists and is not a normlab run; refusing to delete it — choose another run.dir", dir.display()),
        None => bail!("{} exists and is not empty; choose another run.dir (--set run.dir=...)", dir.display()),
    }
}

pub fn describe(s: &Status) -> String {
    match s {
        Status::Running { step, total_steps } => format!("stopped at step {step}/{total_steps}"),
        Status::Finished { step, val_loss, .. } => format!("finished {step} steps, val loss {val_loss:.4}"),
        Status::Diverged { step, reason } => format!("diverged at step {step}: {reason}"),
    }
}

/// Writes `files` into a temporary sibling of `dir` and renames it to `dir`.
pub fn create(dir: &Path, files: &[(&str, Vec<u8>)]) -> anyhow::Result<()> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let name = dir.file_name().context("run.dir has no final component")?.to_string_lossy();
    let tmp = parent.join(format!(".{name}.creating-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let result = (|| {
        for (f, bytes) in files {
            write_atomic(&tmp.join(f), bytes)?;
        }
        std::fs::rename(&tmp, dir).with_context(|| format!("cannot create {}", dir.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}
