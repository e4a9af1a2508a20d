//! Checkpoints: weights as safetensors (names as in [`crate::model::base::params`]; linear weights
//! are `[d_in, d_out]`, the transpose of `torch.nn.Linear.weight`), burn's AdamW state as a
//! burnpack file, and the trainer state (step, sampler, divergence monitor, metrics length) as
//! JSON with the SHA-256 of the other two files. A checkpoint is written into a temporary
//! directory, renamed into place, and only then published by rewriting `latest.json`
//! atomically; the newest `run.keep_checkpoints` are kept. Resuming does not trust
//! `latest.json`: it verifies the checkpoints newest first and takes the first intact one.

use super::divergence::DivergenceMonitor;
use super::layout;
use crate::init::ParamSource;
use crate::io::json;
use crate::io::tensors;
use crate::io::write_atomic;
use crate::model::base::params::named_values;
use crate::model::{ModelConfig, Transformer};
use crate::recipe::ResolvedRecipe;
use anyhow::{Context, bail};
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Everything besides weights and optimizer moments that a resumed run needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    /// Optimizer steps completed.
    pub step: usize,
    pub total_steps: usize,
    pub sampler_state: u64,
    pub divergence: DivergenceMonitor,
    /// The skip-step rule's recent accepted steps (empty when skipping is off).
    #[serde(default)]
    pub skip: super::skip::SkipHistory,
    /// Length of `metrics.jsonl` at this step.
    pub metrics_bytes: u64,
    pub wall_s: f64,
    pub tokens: u64,
    pub tokenizer: String,
    pub recipe: String,
    /// The probes' gradient statistics and output position.
    #[serde(default)]
    pub probe: Option<crate::probe::ProbeState>,
    /// f16's dynamic loss scale (unused in f32 and bf16).
    #[serde(default)]
    pub loss_scale: super::loss_scale::LossScale,
    /// The latest validation (already in `metrics.jsonl`): a run resumed after its last step
    /// finishes with it instead of validating, and recording, a second time.
    #[serde(default)]
    pub last_eval: Option<super::metrics::EvalRecord>,
    /// SpikeScore's window and counts.
    #[serde(default)]
    pub spikes: super::spike_score::SpikeMonitor,
    /// The learning-rate factor rollbacks have set (1 without any).
    #[serde(default = "one")]
    pub lr_scale: f64,
    /// ZClip's statistics (`optim.clip.rule = "zclip"`; unused otherwise).
    #[serde(default, skip_serializing_if = "super::zclip::ZClipState::is_unused")]
    pub zclip: super::zclip::ZClipState,
    /// Every rollback of the run, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollbacks: Vec<super::rollback::RollbackRecord>,
}

fn one() -> f64 {
    1.0
}

/// `checkpoints/latest.json`: the newest checkpoint, for people and tools (resuming scans).
#[derive(Serialize, Deserialize)]
struct Latest {
    step: usize,
    dir: String,
}

/// SHA-256 of a checkpoint's weights and optimizer files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checksums {
    pub weights: String,
    pub optimizer: String,
}

/// `state.json`: the trainer state and the checksums that verify the checkpoint. (Files
/// written before checksums existed have none and are accepted if complete.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StateFile {
    #[serde(flatten)]
    state: TrainerState,
    #[serde(default)]
    sha256: Option<Checksums>,
}

/// SHA-256 of a file's bytes, in hex.
pub fn file_sha256(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(crate::data::cache::sha256_hex(&bytes))
}

/// Saves a checkpoint of `state.step` under `run/checkpoints/`, keeping the newest `keep`.
/// On failure nothing half-written is left and the previous checkpoints stay as they were.
pub fn save(
    run: &Path,
    model: &Transformer,
    optim: &ModuleOptimizer,
    state: &TrainerState,
    keep: usize,
) -> anyhow::Result<()> {
    let root = layout::checkpoints(run);
    let name = layout::checkpoint_name(state.step);
    let tmp = root.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    let written = write_checkpoint(&tmp, model, optim, state);
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    written?;
    let dest = root.join(&name);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).with_context(|| format!("cannot remove the old {}", dest.display()))?;
    }
    std::fs::rename(&tmp, &dest).with_context(|| format!("cannot rename {} to {}", tmp.display(), dest.display()))?;
    crate::io::atomic::sync_dir(&root)?;
    let latest = Latest { step: state.step, dir: name };
    write_atomic(&layout::latest_checkpoint(run), serde_json::to_string(&latest)?.as_bytes())?;
    for (_, old) in checkpoint_dirs(run)?.into_iter().skip(keep.max(1)) {
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(())
}

fn write_checkpoint(
    dir: &Path,
    model: &Transformer,
    optim: &ModuleOptimizer,
    state: &TrainerState,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let weights = layout::checkpoint_weights(dir);
    save_weights(&weights, model, state.step, &state.tokenizer)?;
    let optim_bytes = optim.into_bytes().map_err(|e| anyhow::anyhow!("cannot serialise the optimizer state: {e:?}"))?;
    let optim_bytes = in_name_order(optim_bytes)?;
    write_atomic(&layout::checkpoint_optimizer(dir), &optim_bytes)?;
    let sha256 = Checksums { weights: file_sha256(&weights)?, optimizer: crate::data::cache::sha256_hex(&optim_bytes) };
    json::write(&layout::checkpoint_state(dir), &StateFile { state: state.clone(), sha256: Some(sha256) })
}

/// The optimizer state with its tensors in name order: burn writes them in the order of a hash
/// map, so the same state would give other bytes from run to run.
fn in_name_order(bytes: burn::tensor::Bytes) -> anyhow::Result<Vec<u8>> {
    let err = |e: burn_pack::Error| anyhow::anyhow!("cannot serialise the optimizer state: {e:?}");
    let reader = burn_pack::Reader::from_bytes(bytes).map_err(err)?;
    let (scalars, metadata) = (reader.scalars().clone(), reader.metadata().clone());
    let mut tensors = reader.into_tensors().map_err(err)?;
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    let mut writer = burn_pack::Writer::new(tensors);
    for (k, v) in &scalars {
        writer = writer.with_scalar(k, *v);
    }
    for (k, v) in &metadata {
        writer = writer.with_metadata(k, v);
    }
    Ok(writer.into_bytes().map_err(err)?.to_vec())
}

/// The run's checkpoint directories, newest first.
fn checkpoint_dirs(run: &Path) -> anyhow::Result<Vec<(usize, PathBuf)>> {
    let root = layout::checkpoints(run);
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let mut dirs: Vec<(usize, PathBuf)> = std::fs::read_dir(&root)
        .with_context(|| format!("cannot list {}", root.display()))?
        .flatten()
        .filter_map(|e| {
            let step = e.file_name().to_str()?.strip_prefix("step-")?.parse().ok()?;
            Some((step, e.path()))
        })
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    Ok(dirs)
}

/// The newest intact checkpoint of a run written before `step` (a rollback's target).
pub fn newest_before(run: &Path, step: usize) -> anyhow::Result<Option<PathBuf>> {
    Ok(checkpoint_dirs(run)?.into_iter().find(|(s, dir)| *s < step && damage(dir).is_none()).map(|(_, dir)| dir))
}

/// Removes the checkpoints written after `step` (the stretch a rollback abandons).
pub fn remove_after(run: &Path, step: usize) -> anyhow::Result<()> {
    for (_, dir) in checkpoint_dirs(run)?.into_iter().filter(|(s, _)| *s > step) {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(())
}

/// Why a checkpoint cannot be used, or `None` when it is intact.
pub fn damage(ckpt: &Path) -> Option<String> {
    let state: StateFile = match json::read(&layout::checkpoint_state(ckpt)) {
        Ok(s) => s,
        Err(e) => return Some(format!("{e:#}")),
    };
    let files = [(layout::checkpoint_weights(ckpt), "weights"), (layout::checkpoint_optimizer(ckpt), "optimizer")];
    let want = state.sha256.map(|c| [c.weights, c.optimizer]);
    for (i, (path, what)) in files.iter().enumerate() {
        let have = match file_sha256(path) {
            Ok(h) => h,
            Err(_) => return Some(format!("its {what} file {} is missing", path.display())),
        };
        if want.as_ref().is_some_and(|w| w[i] != have) {
            return Some(format!(
                "its {what} file {} does not match its checksum (truncated or corrupt)",
                path.display()
            ));
        }
    }
    None
}

/// The newest intact checkpoint of a run (verified against its checksums), whatever
/// `latest.json` says; damaged newer ones are named through `log`. `None` when the run has no
/// checkpoint at all; an error when it has some and none is intact.
pub fn latest(run: &Path, log: &dyn Fn(&str)) -> anyhow::Result<Option<PathBuf>> {
    let dirs = checkpoint_dirs(run)?;
    let mut damaged = Vec::new();
    for (_, dir) in &dirs {
        match damage(dir) {
            None => {
                if !damaged.is_empty() {
                    log(&format!("skipping damaged checkpoints ({}); using {}", damaged.join("; "), dir.display()));
                }
                return Ok(Some(dir.clone()));
            }
            Some(why) => damaged.push(format!("{}: {why}", dir.display())),
        }
    }
    if damaged.is_empty() {
        return Ok(None);
    }
    bail!(
        "every checkpoint of {} is damaged ({}); nothing was deleted — restore a checkpoint from a backup or start a \
            new run",
        run.display(),
        damaged.join("; ")
    )
}

/// The trainer state and checksums of `state.json` bytes (as [`load_state`] reads them).
pub fn parse_state(bytes: &[u8]) -> anyhow::Result<(TrainerState, Option<Checksums>)> {
    let f: StateFile = serde_json::from_slice(bytes).context("state.json is corrupt")?;
    Ok((f.state, f.sha256))
}

/// The step and directory named by `latest.json` bytes.
pub fn parse_latest(bytes: &[u8]) -> anyhow::Result<(usize, String)> {
    let l: Latest = serde_json::from_slice(bytes).context("latest.json is corrupt")?;
    Ok((l.step, l.dir))
}

pub fn load_state(ckpt: &Path) -> anyhow::Result<TrainerState> {
    json::read::<StateFile>(&layout::checkpoint_state(ckpt)).map(|f| f.state)
}

pub fn load_optimizer(ckpt: &Path, optim: ModuleOptimizer) -> anyhow::Result<ModuleOptimizer> {
    let p = layout::checkpoint_optimizer(ckpt);
    let bytes = std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
    optim
        .from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes))
        .map_err(|e| anyhow::anyhow!("{} is corrupt ({e:?}); resume from an earlier run or start again", p.display()))
}

/// Writes the weights with metadata naming the recipe, shape and tokenizer.
pub fn save_weights(path: &Path, model: &Transformer, step: usize, tokenizer: &str) -> anyhow::Result<()> {
    let tensors: BTreeMap<String, _> = named_values(model).into_iter().collect();
    let meta = BTreeMap::from([
        ("format".to_string(), "normlab-weights-1; linear weights are [d_in, d_out]".to_string()),
        ("normlab_version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("recipe".to_string(), model.meta.recipe.clone()),
        ("n_layers".to_string(), model.n_layers().to_string()),
        ("step".to_string(), step.to_string()),
        ("tokenizer".to_string(), tokenizer.to_string()),
    ]);
    tensors::write(path, &tensors, &meta)
}

/// Builds the model of `cfg` (its recipe resolved as `recipe`) from saved weights, refusing
/// weights of another recipe, depth or tokenizer with a message that says so.
pub fn load_weights(
    path: &Path,
    cfg: &ModelConfig,
    recipe: &ResolvedRecipe,
    tokenizer: &str,
    device: &Device,
) -> anyhow::Result<Transformer> {
    let file = tensors::read(path)?;
    let m = &file.metadata;
    let check = |key: &str, want: &str| -> anyhow::Result<()> {
        if let Some(have) = m.get(key)
            && have != want
        {
            bail!(
                "{} was saved with {key} `{have}` but the config asks for `{want}`; use the config the weights were \
                    trained with (the run's config.toml)",
                path.display()
            );
        }
        Ok(())
    };
    check("recipe", &recipe.name)?;
    check("n_layers", &cfg.n_layers.to_string())?;
    check("tokenizer", tokenizer)?;
    check_finite(&file, path)?;
    Transformer::with_recipe(cfg, recipe, ParamSource::Loaded(file.tensors), device)
        .with_context(|| format!("loading {}", path.display()))
}

/// Refuses weights holding NaN or ∞, naming the first tensor that does.
pub fn check_finite(file: &tensors::TensorFile, path: &Path) -> anyhow::Result<()> {
    for (name, t) in &file.tensors {
        let values = t.clone().convert::<f32>().try_into_vec::<f32>().unwrap_or_default();
        if values.iter().any(|v| !v.is_finite()) {
            bail!(
                "{}: tensor `{name}` holds non-finite values (NaN or ∞): the weights are damaged or come from a diverged \
                 run; use an earlier checkpoint (RUN/checkpoints/step-N)",
                path.display()
            );
        }
    }
    Ok(())
}

/// The training step saved weights were written at (from their metadata).
pub fn weights_step(path: &Path) -> Option<usize> {
    tensors::read(path).ok()?.metadata.get("step")?.parse().ok()
}
