//! A run config: one TOML file with `[run]`, `[model]` (with its recipe), `[data]`, `[train]`,
//! `[optim]` and `[schedule]`. Every field has a default (KiteNorm Table 1 where it gives one,
//! scaled down to a laptop otherwise), unknown keys are errors, and `--set key=value` edits any
//! field from the command line.

use super::budget::{Budget, ParamCount};
use super::edit::{ParseError, apply_set, describe_error};
use super::schedule::ScheduleConfig;
use crate::data::DataConfig;
use crate::model::ModelConfig;
use crate::model::base::params::ParamCounts;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    pub run: RunSection,
    pub model: ModelConfig,
    pub data: DataConfig,
    pub train: TrainSection,
    pub optim: OptimConfig,
    pub schedule: ScheduleConfig,
    pub probe: crate::probe::ProbeConfig,
    /// Downstream tasks evaluated during and after training (`[eval]`).
    pub eval: crate::tasks::spec::EvalSection,
    /// Supervised fine-tuning from a parent run's weights (`[finetune]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finetune: Option<super::finetune::FinetuneSection>,
    /// Whether the config set `model.vocab_size` itself (otherwise it follows the tokenizer).
    #[serde(skip)]
    pub vocab_size_given: bool,
}

/// Where the run lives and how often it reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSection {
    /// Run directory (created; must not already hold a run unless `--force`).
    pub dir: PathBuf,
    /// `cpu`, or `wgpu` / `vulkan` / `cuda:N` when built with those features.
    pub device: crate::device::DeviceName,
    /// Validation loss and perplexity every this many steps (and at the end); 0 = only at the
    /// end.
    pub eval_every: usize,
    /// Number of fixed validation windows of `seq_len + 1` tokens.
    pub eval_windows: usize,
    /// A checkpoint every this many steps (and at the end); 0 = only at the end.
    pub checkpoint_every: usize,
    /// How many of the newest checkpoints to keep (≥ 1): a damaged newest one falls back to
    /// the one before.
    pub keep_checkpoints: usize,
    /// A tracking server the run is also sent to (`"mlflow:http://host:5000"`); see
    /// [`super::track_target`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<super::track_target::TrackTarget>,
    /// The tracking server's experiment (default `normlab`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<String>,
}

impl Default for RunSection {
    fn default() -> Self {
        Self {
            dir: "runs/default".into(),
            device: crate::device::DeviceName::Cpu,
            eval_every: 50,
            eval_windows: 64,
            checkpoint_every: 100,
            keep_checkpoints: 2,
            track: None,
            experiment: None,
        }
    }
}

/// Batch, budget, seeds and divergence rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainSection {
    /// Sequences per optimizer step (KiteNorm: 128).
    pub batch_size: usize,
    /// Sequences per forward/backward; `batch_size / micro_batch_size` gradients are
    /// accumulated per step. Default: the whole batch at once.
    pub micro_batch_size: Option<usize>,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Optimizer steps. Give this, `tokens` or `tokens_per_param`.
    pub steps: Option<usize>,
    /// Token budget: the whole steps of `batch_size · seq_len` tokens that fit (KiteNorm D.1's
    /// 6866 and 12207 steps are 1.8e9 and 3.2e9 tokens).
    pub tokens: Option<f64>,
    /// Token budget as training tokens per model parameter (Chinchilla: 20); steps =
    /// ⌈ratio · params / (batch_size · seq_len)⌉.
    pub tokens_per_param: Option<f64>,
    /// Which parameters `tokens_per_param` counts: `"all"` (default) or `"non_embedding"`
    /// (see [`ParamCount`]).
    pub param_count: ParamCount,
    /// Model-initialisation seed (KiteNorm: 7).
    pub seed: u64,
    /// Data-sampler seed (KiteNorm: 7).
    pub sampler_seed: u64,
    /// The run is stopped as diverged when the loss exceeds this multiple of its running
    /// minimum (or is NaN/inf, or the gradient norm is).
    pub divergence_factor: f64,
    /// Skip the update of a step whose loss or gradient norm is more than this many sample
    /// standard deviations above its mean over recent accepted steps (OLMo-core's
    /// skip-step); 0 (the default) turns it off. Skipped steps are recorded in the metrics.
    pub skip_step_sigma: f64,
    /// Accepted steps the skip rule's mean and deviation are taken over.
    pub skip_step_window: usize,
    /// Accepted steps before the skip rule may skip.
    pub skip_step_min_history: usize,
    /// Skips in a row after which an outlier is applied anyway (and said so).
    pub skip_step_max_consecutive: usize,
    /// `[train.rollback]`: go back to a checkpoint after repeated spikes (off without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<super::rollback::RollbackRule>,
    /// Gradient checkpointing (burn's balanced strategy): activations of memory-bound
    /// operations are recomputed in the backward pass instead of kept, trading compute for
    /// memory on deep or long-context configurations. Gradients are unchanged.
    pub checkpoint_activations: bool,
    /// `f32` (default), `bf16` or `f16`: the type the matmuls and the activations between them
    /// compute in. Weights, gradients and AdamW's state stay f32; norm statistics, softmax,
    /// the loss and the regulariser are computed in f32. `f16` adds dynamic loss scaling
    /// (overflowed steps are skipped and recorded). See docs/training.md, "Mixed precision".
    pub precision: crate::kernels::Precision,
    /// PaLM's z-loss coefficient `c` (0 = off): the loss gains `c · mean over tokens of
    /// log²Z`, Z the softmax normaliser of the output logits, which keeps log Z near 0 (OLMo 2:
    /// 1e-5). Reported as `z` in the metrics.
    pub z_loss: f64,
}

impl Default for TrainSection {
    fn default() -> Self {
        Self {
            batch_size: 16,
            micro_batch_size: None,
            seq_len: 128,
            steps: Some(400),
            tokens: None,
            tokens_per_param: None,
            param_count: ParamCount::All,
            seed: 7,
            sampler_seed: 7,
            divergence_factor: 3.0,
            skip_step_sigma: 0.0,
            skip_step_window: 128,
            skip_step_min_history: 20,
            skip_step_max_consecutive: 3,
            rollback: None,
            checkpoint_activations: false,
            precision: crate::kernels::Precision::F32,
            z_loss: 0.0,
        }
    }
}

pub use super::optim::OptimConfig;

impl RunConfig {
    /// Reads `path` (or the defaults when `None`) and applies `--set key=value` edits.
    pub fn load(path: Option<&Path>, sets: &[String]) -> anyhow::Result<Self> {
        let (text, origin) = match path {
            Some(p) => (crate::io::read_text(p, "config")?, p.display().to_string()),
            None => (String::new(), "the defaults".to_string()),
        };
        Self::from_text(&text, &origin, sets)
    }

    /// A config from TOML text (`origin` names it in messages), with `--set` edits applied.
    pub fn from_text(text: &str, origin: &str, sets: &[String]) -> anyhow::Result<Self> {
        let table: toml::Table = toml::from_str(text).with_context(|| format!("{origin} is not valid TOML"))?;
        Self::from_parts(&table, origin, Some(text), sets)
    }

    /// A config from an in-memory table (a sweep's run); `origin` names where the table came
    /// from. Errors cite the dotted key, since the table's text exists nowhere on disk.
    pub fn from_table(table: &toml::Table, origin: &str) -> anyhow::Result<Self> {
        Self::from_parts(table, origin, None, &[])
    }

    /// The config of `table` with `sets` applied. `text`, the file `table` was read from, lets
    /// an error cite its line. An error that only the edits cause is blamed on the first edit
    /// that causes it, not on the file.
    pub fn from_parts(table: &toml::Table, origin: &str, text: Option<&str>, sets: &[String]) -> anyhow::Result<Self> {
        let mut edited = table.clone();
        for s in sets {
            apply_set(&mut edited, s)?;
        }
        let err = match Self::deserialize(&edited, text) {
            Ok(cfg) => {
                super::edit::check_f32_range(&edited).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
                return Ok(cfg);
            }
            Err(e) => e,
        };
        let clip = super::edit::clip;
        if !sets.is_empty() && Self::deserialize(table, text).is_ok() {
            let mut t = table.clone();
            for s in sets {
                apply_set(&mut t, s)?;
                if let Err(e) = Self::deserialize(&t, None) {
                    bail!("--set `{}`: {}", clip(s), clip(&e.message));
                }
            }
        }
        bail!("{origin}{}: {}", err.place, clip(&err.message))
    }

    /// The config of a table, or where (in `text`, when given) and why it is wrong.
    fn deserialize(table: &toml::Table, text: Option<&str>) -> Result<Self, ParseError> {
        let merged = toml::to_string(table).map_err(|e| ParseError { place: String::new(), message: e.to_string() })?;
        let mut cfg: RunConfig = toml::from_str(&merged).map_err(|e| {
            let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
            ParseError { place: describe_error(&e, &merged, &message, text), message }
        })?;
        cfg.vocab_size_given = table.get("model").and_then(|m| m.get("vocab_size")).is_some();
        // A token budget (a count or a ratio) replaces the default step count.
        let train = table.get("train");
        let given = |k: &str| train.and_then(|t| t.get(k)).is_some();
        if (given("tokens") || given("tokens_per_param")) && !given("steps") {
            cfg.train.steps = None;
        }
        Ok(cfg)
    }

    /// Sets `model.vocab_size` to the tokenizer's, or refuses a config that asked for another.
    pub fn fit_vocab(&mut self, tokenizer_vocab: usize, tokenizer: &str) -> anyhow::Result<()> {
        // An imported checkpoint's embedding may have padding rows beyond the tokenizer's.
        let fits = if self.model.pad_vocab {
            self.model.vocab_size >= tokenizer_vocab
        } else {
            self.model.vocab_size == tokenizer_vocab
        };
        if self.vocab_size_given && !fits {
            bail!(
                "model.vocab_size = {} but the {tokenizer} tokenizer has {tokenizer_vocab} tokens; remove \
                    model.vocab_size (it follows the tokenizer) or set it to {tokenizer_vocab}",
                self.model.vocab_size
            );
        }
        if !self.vocab_size_given {
            self.model.vocab_size = tokenizer_vocab;
        }
        Ok(())
    }

    /// The skip-step rule of `train.skip_step_*`.
    pub fn skip_rule(&self) -> super::skip::SkipRule {
        let t = &self.train;
        super::skip::SkipRule {
            sigma: t.skip_step_sigma,
            window: t.skip_step_window,
            min_history: t.skip_step_min_history,
            max_consecutive: t.skip_step_max_consecutive,
        }
    }

    pub fn micro_batch_size(&self) -> usize {
        self.train.micro_batch_size.unwrap_or(self.train.batch_size)
    }

    /// The micro-batches of every step (over all ranks of a job).
    pub fn micro_batches(&self) -> usize {
        self.train.batch_size / self.micro_batch_size()
    }

    /// Refuses `ranks` processes that cannot share every step's micro-batches evenly.
    pub fn check_ranks(&self, ranks: usize) -> anyhow::Result<()> {
        let batch = self.train.batch_size;
        let micro = self.micro_batch_size();
        let n = self.micro_batches();
        if n.is_multiple_of(ranks) {
            return Ok(());
        }
        anyhow::bail!(
            "train.batch_size / train.micro_batch_size = {batch} / {micro} = {n} micro-batches per step cannot be shared \
             evenly by {ranks} ranks; set train.micro_batch_size so that the count is a multiple of {ranks} (e.g. {})",
            (batch / ranks).max(1)
        )
    }

    /// The training budget `train.steps`, `train.tokens` or `train.tokens_per_param` gives.
    pub fn budget(&self) -> anyhow::Result<Budget> {
        let t = &self.train;
        Budget::from_fields(t.steps, t.tokens, t.tokens_per_param, t.param_count)
    }

    /// Optimizer steps for a model with `params` parameters; refuses a warm-up that does not
    /// fit them.
    pub fn total_steps(&self, params: ParamCounts) -> anyhow::Result<usize> {
        let steps = self.budget()?.steps(params, self.train.batch_size * self.train.seq_len);
        self.schedule.validate_steps(steps)?;
        Ok(steps)
    }

    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string(self)?)
    }

    /// [`RunConfig::to_toml`] for a config still to be trained: without `model.vocab_size`
    /// unless the config set it, so that the run's vocabulary follows its tokenizer (a BPE or
    /// GPT-2 run written with the byte default would be refused).
    pub fn to_toml_to_train(&self) -> anyhow::Result<String> {
        let mut table = toml::Table::try_from(self)?;
        if !self.vocab_size_given
            && let Some(model) = table.get_mut("model").and_then(|m| m.as_table_mut())
        {
            model.remove("vocab_size");
        }
        Ok(toml::to_string(&table)?)
    }
}
