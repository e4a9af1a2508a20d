//! [`CheckedConfig`]: a run config checked once, into values that cannot be wrong. Every
//! section is validated, the model's recipe resolved for its depth and width (the one
//! resolution a run makes), the `[eval]` tasks expanded (suites into their tasks) and each
//! checked to load. Every command that computes from a config (train, resume, the commands on
//! a saved run, serve, a sweep's check of its runs) gets this type, never the raw
//! [`RunConfig`], and opens the device through it.

use super::config::RunConfig;
use crate::kernels::Precision;
use crate::recipe::ResolvedRecipe;
use crate::tasks::spec::TaskSpec;
use anyhow::{bail, ensure};
use burn::tensor::Device;
use std::path::PathBuf;

/// A checked run config; read its fields through `Deref` (`checked.train.seq_len`).
#[derive(Clone, Debug)]
pub struct CheckedConfig {
    config: RunConfig,
    recipe: ResolvedRecipe,
    tasks: Vec<TaskSpec>,
}

impl RunConfig {
    /// Checks every section, resolves the recipe and expands the tasks; otherwise one clear
    /// error naming the field and what it must be.
    pub fn check(mut self) -> anyhow::Result<CheckedConfig> {
        self.data.context_tokens = Some(self.train.seq_len + 1);
        let (_, recipe) = self.model.validate()?;
        self.data.validate()?;
        self.check_run_and_train()?;
        self.check_optim()?;
        self.schedule.validate(self.optim.lr)?;
        self.probe.validate()?;
        let tasks = crate::tasks::spec::expand(&self.eval.tasks, &self.eval.dir);
        for t in &tasks {
            crate::tasks::spec::check(t)?;
        }
        Ok(CheckedConfig { config: self, recipe, tasks })
    }

    fn check_run_and_train(&self) -> anyhow::Result<()> {
        let t = &self.train;
        ensure!(
            self.run.keep_checkpoints >= 1,
            "run.keep_checkpoints must be ≥ 1 (the newest checkpoint is always kept)"
        );
        ensure!(self.run.eval_windows >= 1, "run.eval_windows must be ≥ 1");
        ensure!(t.batch_size > 0, "train.batch_size must be > 0");
        ensure!(t.seq_len > 0, "train.seq_len must be > 0");
        let micro = self.micro_batch_size();
        ensure!(
            micro > 0 && t.batch_size.is_multiple_of(micro),
            "train.micro_batch_size = {micro} must be > 0 and divide train.batch_size = {}",
            t.batch_size
        );
        self.budget()?;
        ensure!(t.divergence_factor > 1.0, "train.divergence_factor must be > 1 (got {})", t.divergence_factor);
        ensure!(
            t.skip_step_sigma >= 0.0 && t.skip_step_sigma.is_finite(),
            "train.skip_step_sigma must be ≥ 0 (0 turns skipping off; got {})",
            t.skip_step_sigma
        );
        ensure!(
            t.skip_step_window >= 2 && t.skip_step_min_history >= 2 && t.skip_step_min_history <= t.skip_step_window,
            "train.skip_step_min_history must be ≥ 2 and ≤ train.skip_step_window"
        );
        if let Some(r) = &t.rollback {
            r.check(self.run.checkpoint_every)?;
        }
        Ok(())
    }

    fn check_optim(&self) -> anyhow::Result<()> {
        self.optim.check()?;
        ensure!(self.train.z_loss >= 0.0, "train.z_loss must be ≥ 0 (0 turns it off)");
        Ok(())
    }
}

impl std::ops::Deref for CheckedConfig {
    type Target = RunConfig;

    fn deref(&self) -> &RunConfig {
        &self.config
    }
}

impl CheckedConfig {
    /// The model's recipe, resolved for its depth and width.
    pub fn recipe(&self) -> &ResolvedRecipe {
        &self.recipe
    }

    /// The `[eval]` tasks, suites expanded into their tasks, each checked to load.
    pub fn tasks(&self) -> &[TaskSpec] {
        &self.tasks
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The config, to be written or edited (and then checked again).
    pub fn into_config(self) -> RunConfig {
        self.config
    }

    /// The same run in another directory (a resumed run that restarts from step 0).
    pub fn in_dir(mut self, dir: PathBuf) -> Self {
        self.config.run.dir = dir;
        self
    }

    /// `[finetune]`, to record the parent's digest in when the run starts.
    pub fn finetune_mut(&mut self) -> Option<&mut super::finetune::FinetuneSection> {
        self.config.finetune.as_mut()
    }

    /// Sets `model.vocab_size` to the tokenizer's, or refuses a config that asked for another
    /// (see [`RunConfig::fit_vocab`]); the recipe does not depend on the vocabulary.
    pub fn fit_vocab(&mut self, tokenizer_vocab: usize, tokenizer: &str) -> anyhow::Result<()> {
        self.config.fit_vocab(tokenizer_vocab, tokenizer)
    }

    /// Opens `run.device` (once per command: a CUDA device is asked of its driver here) and
    /// refuses a `train.precision` it cannot compute in (wgpu's WGSL has f16 but no bf16: burn
    /// would run it and produce NaN).
    pub fn open_device(&self) -> anyhow::Result<Device> {
        let name = self.run.device;
        let device = name.open(&self.data.cache_dir().join("kernels"))?;
        check_precision(&device, &name.to_string(), self.train.precision)?;
        self.model.kernels.check_on(&device)?;
        Ok(device)
    }
}

/// Refuses a half precision `device` (named `name`) cannot compute in.
pub fn check_precision(device: &Device, name: &str, p: Precision) -> anyhow::Result<()> {
    match p.half() {
        Some(h) if !device.supports_dtype(h) => bail!(
            "train.precision = \"{}\" is not supported on run.device = \"{}\"{}; use \"f16\" or \"f32\"",
            format!("{p:?}").to_lowercase(),
            name,
            if name == "wgpu" { " (WGSL has no bfloat16; the vulkan device may have it)" } else { "" }
        ),
        _ => Ok(()),
    }
}
