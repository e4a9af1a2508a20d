//! Checkpoints: weights as safetensors (names as in [`crate::model::params`]; linear weights
//! are `[d_in, d_out]`, the transpose of `torch.nn.Linear.weight`), burn's AdamW state as a
//! burnpack file, and the trainer state (step, sampler, divergence monitor, metrics length) as
//! JSON. A checkpoint is written into a temporary directory, renamed into place, and only then
//! published by rewriting `latest.json` atomically; older checkpoints are removed after.

use super::divergence::DivergenceMonitor;
use super::run_dir;
use crate::init::ParamSource;
use crate::io::json;
use crate::io::tensors;
use crate::io::write_atomic;
use crate::model::params::named_values;
use crate::model::{ModelConfig, Transformer};
use anyhow::{Context, bail, ensure};
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

/// `checkpoints/latest.json`: the checkpoint to resume from.
#[derive(Serialize, Deserialize)]
struct Latest {
    step: usize,
    dir: String,
}

/// Saves a checkpoint of `state.step` under `run/checkpoints/`.
pub fn save(run: &Path, model: &Transformer, optim: &ModuleOptimizer, state: &TrainerState) -> anyhow::Result<()> {
    let root = run_dir::checkpoints(run);
    let name = run_dir::checkpoint_name(state.step);
    let tmp = root.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    save_weights(&run_dir::checkpoint_weights(&tmp), model, state.step, &state.tokenizer)?;
    let optim_bytes = optim.into_bytes().map_err(|e| anyhow::anyhow!("cannot serialise the optimizer state: {e:?}"))?;
    write_atomic(&run_dir::checkpoint_optimizer(&tmp), &optim_bytes)?;
    json::write(&run_dir::checkpoint_state(&tmp), state)?;
    let dest = root.join(&name);
    if dest.exists() {
        std::fs::remove_dir_all(&dest)?;
    }
    std::fs::rename(&tmp, &dest)?;
    write_atomic(
        &run_dir::latest_checkpoint(run),
        serde_json::to_string(&Latest { step: state.step, dir: name.clone() })?.as_bytes(),
    )?;
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
    let p = run_dir::latest_checkpoint(run);
    if !p.is_file() {
        return Ok(None);
    }
    let l: Latest = json::read(&p)?;
    let dir = run_dir::checkpoints(run).join(&l.dir);
    ensure!(
        run_dir::checkpoint_state(&dir).is_file(),
        "{} names {}, which is missing; the checkpoint was deleted",
        p.display(),
        dir.display()
    );
    Ok(Some(dir))
}

pub fn load_state(ckpt: &Path) -> anyhow::Result<TrainerState> {
    json::read(&run_dir::checkpoint_state(ckpt))
}

pub fn load_optimizer(ckpt: &Path, optim: ModuleOptimizer) -> anyhow::Result<ModuleOptimizer> {
    let p = run_dir::checkpoint_optimizer(ckpt);
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
                "{} was saved with {key} `{have}` but the config asks for `{want}`; use the config the weights were \
                    trained with (the run's config.toml)",
                path.display()
            );
        }
        Ok(())
    };
    check("recipe", &spec.name)?;
    check("n_layers", &cfg.n_layers.to_string())?;
    check("tokenizer", tokenizer)?;
    Transformer::new(cfg, ParamSource::Loaded(file.tensors), device)
        .with_context(|| format!("loading {}", path.display()))
}
