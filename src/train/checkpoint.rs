//! Checkpoints: weights as safetensors (names as in [`crate::model::params`]; linear weights
//! are `[d_in, d_out]`, the transpose of `torch.nn.Linear.weight`), burn's AdamW state as a
//! burnpack file, and the trainer state (step, sampler, divergence monitor, metrics length) as
//! JSON. A checkpoint is written into a temporary directory, renamed into place, and only then
//! published by rewriting `latest.json` atomically; older checkpoints are removed after.

use super::divergence::DivergenceMonitor;
use super::run_dir::CHECKPOINTS;
use crate::io::tensors::{self, write_atomic};
use crate::model::init::ParamSource;
use crate::model::params::named_values;
use crate::model::{ModelConfig, Transformer};
use anyhow::{Context, bail, ensure};
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const WEIGHTS: &str = "model.safetensors";
pub const OPTIMIZER: &str = "optimizer.bpk";
pub const STATE: &str = "state.json";
const LATEST: &str = "latest.json";

/// Everything besides weights and optimizer moments that a resumed run needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    /// Optimizer steps completed.
    pub step: usize,
    pub total_steps: usize,
    pub sampler_state: u64,
    pub divergence: DivergenceMonitor,
    /// Length of `metrics.jsonl` at this step.
    pub metrics_bytes: u64,
    pub wall_s: f64,
    pub tokens: u64,
    pub tokenizer: String,
    pub recipe: String,
    /// The probes' gradient statistics and output position.
    #[serde(default)]
    pub probe: Option<crate::probe::ProbeState>,
}

#[derive(Serialize, Deserialize)]
struct Latest {
    step: usize,
    dir: String,
}

/// Saves a checkpoint of `state.step` under `run/checkpoints/`.
pub fn save(run: &Path, model: &Transformer, optim: &ModuleOptimizer, state: &TrainerState) -> anyhow::Result<()> {
    let root = run.join(CHECKPOINTS);
    let name = format!("step-{:06}", state.step);
    let tmp = root.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    save_weights(&tmp.join(WEIGHTS), model, state.step, &state.tokenizer)?;
    let optim_bytes = optim.into_bytes().map_err(|e| anyhow::anyhow!("cannot serialise the optimizer state: {e:?}"))?;
    write_atomic(&tmp.join(OPTIMIZER), &optim_bytes)?;
    write_atomic(&tmp.join(STATE), serde_json::to_string_pretty(state)?.as_bytes())?;
    let dest = root.join(&name);
    if dest.exists() {
        std::fs::remove_dir_all(&dest)?;
    }
    std::fs::rename(&tmp, &dest)?;
    write_atomic(&root.join(LATEST), serde_json::to_string(&Latest { step: state.step, dir: name.clone() })?.as_bytes())?;
    for e in std::fs::read_dir(&root)?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("step-") && n != name {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    Ok(())
}

/// The latest complete checkpoint directory of a run, if any.
pub fn latest(run: &Path) -> anyhow::Result<Option<PathBuf>> {
    let p = run.join(CHECKPOINTS).join(LATEST);
    if !p.is_file() {
        return Ok(None);
    }
    let l: Latest = serde_json::from_str(&std::fs::read_to_string(&p)?).with_context(|| format!("{} is corrupt", p.display()))?;
    let dir = run.join(CHECKPOINTS).join(&l.dir);
    ensure!(dir.join(STATE).is_file(), "{} names {}, which is missing; the checkpoint was deleted", p.display(), dir.display());
    Ok(Some(dir))
}

pub fn load_state(ckpt: &Path) -> anyhow::Result<TrainerState> {
    let p = ckpt.join(STATE);
    serde_json::from_str(&std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?)
        .with_context(|| format!("{} is corrupt", p.display()))
}

pub fn load_optimizer(ckpt: &Path, optim: ModuleOptimizer) -> anyhow::Result<ModuleOptimizer> {
    let p = ckpt.join(OPTIMIZER);
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

/// Builds the model of `cfg` from saved weights, refusing weights of another recipe, depth or
/// tokenizer with a message that says so.
pub fn load_weights(path: &Path, cfg: &ModelConfig, tokenizer: &str, device: &Device) -> anyhow::Result<Transformer> {
    let file = tensors::read(path)?;
    let (spec, _) = cfg.validate()?;
    let m = &file.metadata;
    let check = |key: &str, want: &str| -> anyhow::Result<()> {
        if let Some(have) = m.get(key)
            && have != want
        {
            bail!(
                "{} was saved with {key} `{have}` but the config asks for `{want}`; use the config the weights were trained with (the run's config.toml)",
                path.display()
            );
        }
        Ok(())
    };
    check("recipe", &spec.name)?;
    check("n_layers", &cfg.n_layers.to_string())?;
    check("tokenizer", tokenizer)?;
    Transformer::new(cfg, ParamSource::Loaded(file.tensors), device).with_context(|| format!("loading {}", path.display()))
}
