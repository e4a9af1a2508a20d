//! A run config: one TOML file with `[run]`, `[model]` (with its recipe), `[data]`, `[train]`,
//! `[optim]` and `[schedule]`. Every field has a default (KiteNorm Table 1 where it gives one,
//! scaled down to a laptop otherwise), unknown keys are errors, and `--set key=value` edits any
//! field from the command line.

use super::budget::{Budget, ParamCount};
use super::schedule::ScheduleConfig;
use crate::data::DataConfig;
use crate::model::ModelConfig;
use crate::model::params::ParamCounts;
use crate::recipe::ResolvedRecipe;
use anyhow::{Context, bail, ensure};
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
    /// `cpu`, or `wgpu` / `cuda:N` when built with those features.
    pub device: String,
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
}

impl Default for RunSection {
    fn default() -> Self {
        Self {
            dir: "runs/default".into(),
            device: "cpu".into(),
            eval_every: 50,
            eval_windows: 64,
            checkpoint_every: 100,
            keep_checkpoints: 2,
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
    /// Gradient checkpointing (burn's balanced strategy): activations of memory-bound
    /// operations are recomputed in the backward pass instead of kept, trading compute for
    /// memory on deep or long-context configurations. Gradients are unchanged.
    pub checkpoint_activations: bool,
    /// `f32` (default), `bf16` or `f16`: the type the matmuls and the activations between them
    /// compute in. Weights, gradients and AdamW's state stay f32; norm statistics, softmax,
    /// the loss and the regulariser are computed in f32. `f16` adds dynamic loss scaling
    /// (overflowed steps are skipped and recorded). See docs/training.md, "Mixed precision".
    pub precision: crate::kernels::Precision,
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
            checkpoint_activations: false,
            precision: crate::kernels::Precision::F32,
        }
    }
}

/// AdamW (Loshchilov & Hutter) with decoupled weight decay on matrices only, and global
/// gradient-norm clipping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimConfig {
    /// Peak learning rate.
    pub lr: f64,
    /// KiteNorm: β₁ = β₂ = 0.95.
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Applied to matrix parameters (embeddings, projections); never to norm gains, shifts,
    /// DyT α, BHyT λ or other vectors and scalars (KiteNorm Table 1: 0.1).
    pub weight_decay: f64,
    /// Global gradient-norm threshold (1.0); `0` disables clipping.
    pub grad_clip: f64,
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self { lr: 3e-3, beta1: 0.95, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, grad_clip: 1.0 }
    }
}

impl RunConfig {
    /// Reads `path` (or the defaults when `None`) and applies `--set key=value` edits.
    pub fn load(path: Option<&Path>, sets: &[String]) -> anyhow::Result<Self> {
        let (text, origin) = match path {
            Some(p) => (
                std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read config {}; check the path", p.display()))?,
                p.display().to_string(),
            ),
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
            Ok(cfg) => return Ok(cfg),
            Err(e) => e,
        };
        if !sets.is_empty() && Self::deserialize(table, text).is_ok() {
            let mut t = table.clone();
            for s in sets {
                apply_set(&mut t, s)?;
                if let Err(e) = Self::deserialize(&t, None) {
                    bail!("--set `{s}`: {}", e.message);
                }
            }
        }
        bail!("{origin}{}: {}", err.place, err.message)
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

    /// Checks every section and resolves the model's recipe (the one resolution a run makes);
    /// otherwise a clear error.
    /// Refuses `[eval]` tasks that cannot load (unknown names or layouts, missing files).
    pub fn check_eval(&self) -> anyhow::Result<()> {
        for t in crate::tasks::spec::expand(&self.eval.tasks, &self.eval.dir) {
            crate::tasks::spec::check(&t)?;
        }
        Ok(())
    }

    pub fn validate(&self) -> anyhow::Result<ResolvedRecipe> {
        let (_, recipe) = self.model.validate()?;
        self.data.validate()?;
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
        let o = &self.optim;
        ensure!(o.lr > 0.0 && o.lr.is_finite(), "optim.lr must be > 0 (got {})", o.lr);
        for (n, b) in [("optim.beta1", o.beta1), ("optim.beta2", o.beta2)] {
            ensure!((0.0..1.0).contains(&b), "{n} must be in [0, 1) (got {b})");
        }
        ensure!(o.eps > 0.0, "optim.eps must be > 0");
        ensure!(o.weight_decay >= 0.0, "optim.weight_decay must be ≥ 0");
        ensure!(o.grad_clip >= 0.0, "optim.grad_clip must be ≥ 0 (0 disables clipping)");
        ensure!(self.run.eval_windows > 0, "run.eval_windows must be > 0");
        self.schedule.validate(o.lr)?;
        self.probe.validate()?;
        crate::device::parse(&self.run.device)?;
        Ok(recipe)
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

/// `a.b.c=value`: parsed as the TOML line `a.b.c = value` (quoted key parts allowed:
/// `sweep.axes."optim.lr"=[1e-3, 3e-3]`), or with the value as a bare string if that fails
/// (`model.recipe=peri`), then merged into `table`.
/// Sets the dotted `key` of `table` to `value` (a preset name under a table becomes an
/// overlay on that preset, as with `--set`).
pub fn set_value(table: &mut toml::Table, key: &str, value: toml::Value) {
    let doc = key.rsplit('.').fold(value, |v, part| {
        let mut t = toml::Table::new();
        t.insert(part.trim().trim_matches('"').to_string(), v);
        toml::Value::Table(t)
    });
    if let toml::Value::Table(doc) = doc {
        merge(table, doc);
    }
}

pub fn apply_set(table: &mut toml::Table, set: &str) -> anyhow::Result<()> {
    let Some((key, raw)) = set.split_once('=') else {
        bail!("--set `{set}` is not key=value; e.g. --set optim.lr=1e-3");
    };
    let key = key.trim();
    ensure!(!key.is_empty(), "--set `{set}`: empty key");
    let quoted = toml::Value::String(raw.trim().to_string()).to_string();
    let doc: toml::Table = toml::from_str(&format!("{key} = {raw}"))
        .or_else(|_| toml::from_str(&format!("{key} = {quoted}")))
        .map_err(|_| anyhow::anyhow!("--set `{set}`: `{key}` is not a valid key; use dotted names like optim.lr"))?;
    merge(table, doc);
    replace_budget(table, key);
    Ok(())
}

/// The three ways to give a run's length; one `--set` of any of them replaces the others the
/// config file gave (`--set train.steps=200` on a config with `tokens_per_param = 20`).
const BUDGET_KEYS: [&str; 3] = ["steps", "tokens", "tokens_per_param"];

fn replace_budget(table: &mut toml::Table, key: &str) {
    let Some(given) = key.strip_prefix("train.").filter(|k| BUDGET_KEYS.contains(k)) else {
        return;
    };
    if let Some(toml::Value::Table(train)) = table.get_mut("train") {
        train.retain(|k, _| k == given || !BUDGET_KEYS.contains(&k));
    }
}

fn merge(dst: &mut toml::Table, src: toml::Table) {
    for (k, v) in src {
        match (dst.get_mut(&k), v) {
            (Some(toml::Value::Table(d)), toml::Value::Table(s)) => merge(d, s),
            // `model.recipe = "peri"` then `--set model.recipe.norm=rmsnorm`: the preset name
            // becomes an overlay on that preset.
            (Some(toml::Value::String(name)), toml::Value::Table(s)) => {
                let mut t = toml::Table::new();
                t.insert("preset".into(), toml::Value::String(name.clone()));
                merge(&mut t, s);
                dst.insert(k, toml::Value::Table(t));
            }
            (_, v) => {
                dst.insert(k, v);
            }
        }
    }
}

/// A config that does not deserialize: where (` (line 3: `…`)` or ` (at `model.x`)`) and why,
/// in one line.
struct ParseError {
    place: String,
    message: String,
}

/// Where the error `e` in `merged` (a table written out as TOML) is: the line of `original`,
/// the user's file, that holds the same key when there is one, else the dotted key.
fn describe_error(e: &toml::de::Error, merged: &str, message: &str, original: Option<&str>) -> String {
    let Some(span) = e.span() else { return String::new() };
    let line = merged[..span.start.min(merged.len())].matches('\n').count() + 1;
    let shown = merged.lines().nth(line - 1).unwrap_or("").trim();
    let section = merged
        .lines()
        .take(line)
        .filter_map(|l| l.trim().strip_prefix('['))
        .last()
        .map(|h| h.trim_end_matches(']').to_string())
        .unwrap_or_default();
    // A nested table's error points at its header and names the field last: "… in `norm`".
    let inner = message.rsplit_once(" in `").map(|(_, k)| k.trim_end_matches('`'));
    let key = match (shown.starts_with('['), inner) {
        (true, Some(k)) => format!("{section}.{k}"),
        (true, None) => section.clone(),
        (false, _) => {
            let k = shown.split('=').next().unwrap_or("").trim().trim_matches('"');
            if section.is_empty() { k.to_string() } else { format!("{section}.{k}") }
        }
    };
    match original.and_then(|t| find_line(t, &key)) {
        Some((n, text)) => format!(" (line {n}: `{text}`)"),
        None if !key.is_empty() => format!(" (at `{key}`)"),
        None => format!(" (`{shown}`)"),
    }
}

/// The line of `text` (number and content) that sets the dotted `key`, or else the nearest
/// enclosing key (an inline table holding it).
fn find_line(text: &str, key: &str) -> Option<(usize, String)> {
    let mut section = String::new();
    let mut best: Option<(usize, usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if let Some(h) = l.strip_prefix('[') {
            section = h.trim_start_matches('[').trim_end_matches(']').trim().replace('"', "");
            let depth = section.len();
            let inside = key == section || key.starts_with(&format!("{section}."));
            if inside && best.as_ref().is_none_or(|b| depth > b.1) {
                best = Some((i + 1, depth, l.to_string()));
            }
            continue;
        }
        let Some((k, _)) = l.split_once('=') else { continue };
        let k = k.trim().replace('"', "");
        let full = if section.is_empty() { k } else { format!("{section}.{k}") };
        if full == key {
            return Some((i + 1, l.to_string()));
        }
        if key.starts_with(&format!("{full}.")) && best.as_ref().is_none_or(|b| full.len() > b.1) {
            best = Some((i + 1, full.len(), l.to_string()));
        }
    }
    best.map(|(n, _, l)| (n, l))
}
