//! What the commands that read a finished (or running) run do: find its weights, rebuild its
//! model, and evaluate, probe or sample it (`normlab eval`, `probe`, `generate`).

use super::checkpoint::{self, load_weights};
use super::config::RunConfig;
use super::eval::Evaluated;
use super::run_dir;
use super::setup::load_run;
use crate::data::windows::{tiling_starts, validation_starts, windows};
use crate::data::{DataConfig, Dataset, TokenFile, Tokenizer, corpus, dataset};
use crate::decode::{Decoder, SampleOptions, generate};
use crate::dist::Ranks;
use crate::init::ParamSource;
use crate::io::json;
use crate::model::Transformer;
use crate::probe::offline::{OfflineProbe, probe_model};
use crate::recipe::ResolvedRecipe;
use anyhow::{bail, ensure};
use burn::tensor::{Device, Int, Tensor, TensorData};
use std::path::{Path, PathBuf};

/// A run and the weights to use: the final weights, else the latest checkpoint; a
/// `checkpoints/step-N` directory selects that checkpoint.
pub struct SavedRun {
    pub run: PathBuf,
    pub weights: PathBuf,
    pub cfg: RunConfig,
    /// The recipe of `cfg`, resolved when the run was opened.
    pub recipe: ResolvedRecipe,
    pub tokenizer: Tokenizer,
}

impl SavedRun {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let (run, weights) = resolve_weights(path)?;
        verify_weights(&run, &weights)?;
        let (cfg, recipe, tokenizer) = load_run(&run)?;
        Ok(Self { run, weights, cfg, recipe, tokenizer })
    }

    /// The run's model with the saved weights, on `device`.
    pub fn model(&self, device: &Device) -> anyhow::Result<Transformer> {
        load_weights(&self.weights, &self.cfg.model, &self.recipe, &self.tokenizer.fingerprint()?, device)
    }
}

/// Checks `weights` against the digest recorded for them: the final weights against the one in
/// `status.json`, a checkpoint's against its `state.json`.
fn verify_weights(run: &Path, weights: &Path) -> anyhow::Result<()> {
    if weights == run_dir::final_weights(run) {
        let Some(run_dir::Status::Finished { weights_sha256: Some(want), .. }) = run_dir::read_status(run)? else {
            return Ok(());
        };
        let have = checkpoint::file_sha256(weights)?;
        anyhow::ensure!(
            have == want,
            "{} does not match the SHA-256 recorded when the run finished ({}…, now {}…): the file was changed or \
             damaged; use a checkpoint instead (--checkpoint {})",
            weights.display(),
            &want[..12],
            &have[..12],
            run_dir::checkpoints(run).join("step-N").display()
        );
        return Ok(());
    }
    match weights.parent().and_then(checkpoint::damage) {
        Some(why) => bail!("the checkpoint {} cannot be used: {why}", weights.parent().unwrap_or(weights).display()),
        None => Ok(()),
    }
}

fn resolve_weights(path: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    if run_dir::checkpoint_state(path).is_file() {
        let run = path.parent().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
        return Ok((run, run_dir::checkpoint_weights(path)));
    }
    if run_dir::final_weights(path).is_file() {
        return Ok((path.to_path_buf(), run_dir::final_weights(path)));
    }
    match checkpoint::latest(path, &|m| crate::io::term::err(format_args!("{m}")))? {
        Some(c) => Ok((path.to_path_buf(), run_dir::checkpoint_weights(&c))),
        None if run_dir::config(path).is_file() => match run_dir::read_status(path).ok().flatten() {
            Some(run_dir::Status::Diverged { step, reason }) => bail!(
                "{} diverged at step {step} ({reason}) before its first checkpoint, so it has no weights; start a \
                    new run with a lower optim.lr (or a smaller run.checkpoint_every to keep weights from before \
                    a divergence)",
                path.display()
            ),
            _ => bail!(
                "{} has no weights yet (no checkpoint); train longer or wait for the first checkpoint",
                path.display()
            ),
        },
        None => bail!("{} is not a normlab run directory; give the run.dir of a run", path.display()),
    }
}

/// Token windows to evaluate or probe on, and where they come from in words.
pub struct Windows {
    pub tokens: TokenFile,
    pub starts: Vec<usize>,
    pub source: String,
}

/// The run's fixed validation windows, or all of `data` tiled (at most `limit` windows).
pub fn eval_windows(
    cfg: &RunConfig,
    tokenizer: Tokenizer,
    data: Option<&Path>,
    limit: Option<usize>,
    log: &dyn Fn(&str),
) -> anyhow::Result<Windows> {
    let seq = cfg.train.seq_len;
    ensure!(limit != Some(0), "--windows must be ≥ 1");
    let Some(p) = data else {
        let ds = Dataset::prepare(&cfg.data, Some(tokenizer), log)?;
        let starts = validation_starts(ds.val.len(), seq, limit.unwrap_or(cfg.run.eval_windows));
        return Ok(Windows {
            tokens: ds.val,
            starts,
            source: format!("the run's validation split ({})", ds.info.split_rule),
        });
    };
    ensure!(p.exists(), "--data {} does not exist", p.display());
    let dcfg = DataConfig { corpus: p.display().to_string(), ..cfg.data.clone() };
    let docs = corpus::read_documents(p, &dcfg)?;
    let ids = dataset::tokenize(&tokenizer, &docs)?;
    ensure!(
        ids.len() > seq + 1,
        "{} has {} tokens, fewer than one window of {} tokens",
        p.display(),
        ids.len(),
        seq + 1
    );
    let starts = tiling_starts(ids.len(), seq, limit);
    Ok(Windows {
        tokens: TokenFile::from_tokens(&ids),
        starts,
        source: format!("{} ({} documents)", p.display(), docs.len()),
    })
}

/// `normlab eval`'s result.
pub struct EvalSummary {
    pub weights: PathBuf,
    pub source: String,
    pub val_loss: f64,
    pub val_ppl: f64,
    pub tokens: usize,
    pub windows: usize,
    pub seq_len: usize,
    /// Pairs runs on their own data: the test sets decoded and scored.
    pub pairs: Option<super::pairs_eval::PairsEval>,
}

/// Validation loss and perplexity of a saved run on its validation windows or on `data`.
pub fn eval(path: &Path, data: Option<&Path>, limit: Option<usize>, log: &dyn Fn(&str)) -> anyhow::Result<EvalSummary> {
    let saved = SavedRun::open(path)?;
    let device = crate::device::parse(&saved.cfg.run.device)?;
    let model = saved.model(&device)?;
    let SavedRun { weights, cfg, tokenizer, .. } = saved;
    let seq_len = cfg.train.seq_len;
    if cfg.data.task == crate::data::Task::Pairs && data.is_none() {
        return eval_pairs(&model, &cfg, tokenizer, weights, &device, log);
    }
    let w = eval_windows(&cfg, tokenizer, data, limit, log)?;
    let on = Evaluated { model: &model, device: &device, ranks: Ranks::single() };
    let v = on.windows(&w.tokens, &w.starts, seq_len, cfg.micro_batch_size());
    Ok(EvalSummary {
        weights,
        source: w.source,
        val_loss: v.loss,
        val_ppl: v.perplexity,
        tokens: v.tokens,
        windows: w.starts.len(),
        seq_len,
        pairs: None,
    })
}

/// A pairs run on its own pairs: target-only loss on the validation pairs, and exact match and
/// F1 on every test set.
fn eval_pairs(
    model: &Transformer,
    cfg: &RunConfig,
    tokenizer: Tokenizer,
    weights: PathBuf,
    device: &Device,
    log: &dyn Fn(&str),
) -> anyhow::Result<EvalSummary> {
    let seq_len = cfg.train.seq_len;
    let mut ds = Dataset::prepare(&cfg.data, Some(tokenizer), log)?;
    ds.fit_pairs(seq_len, log)?;
    let p = ds.pairs.as_ref().expect("a pairs config prepares pairs");
    let v = Evaluated { model, device, ranks: Ranks::single() }.pairs(&p.val, p.end, cfg.micro_batch_size());
    let step = checkpoint::weights_step(&weights).unwrap_or(0);
    let scores = super::pairs_eval::score_sets(model, &ds.tokenizer, &p.tests, seq_len, step, device)?;
    Ok(EvalSummary {
        weights,
        source: format!("the run's {} validation pairs (target tokens only)", p.val.len()),
        val_loss: v.loss,
        val_ppl: v.perplexity,
        tokens: v.tokens,
        windows: p.val.len(),
        seq_len,
        pairs: Some(scores),
    })
}

/// Samples a continuation of `prompt` from a saved run (with the KV cache unless `cache` is
/// off); `on_text` receives the text as it grows.
pub fn sample(
    path: &Path,
    prompt: &str,
    opts: &SampleOptions,
    cache: bool,
    on_text: &mut dyn FnMut(&str, usize),
) -> anyhow::Result<String> {
    let saved = SavedRun::open(path)?;
    let device = crate::device::parse(&saved.cfg.run.device)?;
    let model = saved.model(&device)?;
    let d = Decoder { model: &model, device: &device, context: saved.cfg.train.seq_len, cache };
    generate(&d, &saved.tokenizer, prompt, opts, on_text)
}

/// `normlab probe`: the probes of a saved run (or, with `init`, of the freshly initialised model
/// of its config and seed) on `batches` micro-batches of windows; written to
/// `RUN/probes/{at}.json`. Returns the probe, where it was written and the windows' source.
pub fn probe(
    path: &Path,
    data: Option<&Path>,
    batches: usize,
    init: bool,
    log: &dyn Fn(&str),
) -> anyhow::Result<(OfflineProbe, PathBuf, String)> {
    ensure!(batches > 0, "--batches must be > 0");
    let saved = if init {
        let (cfg, recipe, tokenizer) = load_run(path)?;
        SavedRun { run: path.to_path_buf(), weights: PathBuf::new(), cfg, recipe, tokenizer }
    } else {
        SavedRun::open(path)?
    };
    let device = crate::device::parse(&saved.cfg.run.device)?;
    let ad = device.clone().autodiff();
    let (model, at) = if init {
        let seeded = ParamSource::Seeded(saved.cfg.train.seed);
        (Transformer::with_recipe(&saved.cfg.model, &saved.recipe, seeded, &ad)?, "init".to_string())
    } else {
        let step = crate::io::tensors::read(&saved.weights)?.metadata.get("step").cloned().unwrap_or_default();
        (saved.model(&ad)?, format!("step-{step}"))
    };
    let SavedRun { run, cfg, tokenizer, .. } = saved;
    let w = eval_windows(&cfg, tokenizer, data, Some(batches * cfg.micro_batch_size()), log)?;
    let seq = cfg.train.seq_len;
    let b = windows(&w.tokens, &w.starts, seq);
    let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq]), &device);
    let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, seq]), &device);
    let p = probe_model(&model, x, y, &device, cfg.probe.top_k, at.clone());
    let out = run_dir::probe_snapshot(&run, &at);
    json::write(&out, &p)?;
    Ok((p, out, w.source))
}
