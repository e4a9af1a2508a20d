//! Starting a run (check the config once, then create the run directory in one step) and
//! resuming one from its latest checkpoint.

use super::optim;
use super::trainer::Trainer;
use crate::data::{Dataset, Tokenizer};
use crate::init::ParamSource;
use crate::io::{json, write_atomic};
use crate::model::Transformer;
use crate::model::base::params::ParamCounts;
use crate::run::checkpoint::{self, TrainerState};
use crate::run::config::RunConfig;
use crate::run::divergence::DivergenceMonitor;
use crate::run::layout::{self, RunInfo, Status};
use crate::run::metrics::LostRecord;
use crate::run::{CheckedConfig, load_run};
use anyhow::{Context, bail};
use std::path::Path;

/// What `--resume` found.
pub enum Resumed {
    Trainer(Box<Trainer>),
    AlreadyFinished(Status),
}

/// Validates the config, prepares the data and the model, then creates the run directory.
pub fn start(cfg: RunConfig, force: bool, log: &dyn Fn(&str)) -> anyhow::Result<Trainer> {
    start_with(cfg, force, None, log)
}

/// A new run whose parameters come from `init` (a parameter source and the tokenizer the
/// weights were trained with: an imported checkpoint) instead of the seeded initialisation.
pub fn start_with(
    cfg: RunConfig,
    force: bool,
    init: Option<(ParamSource, Tokenizer)>,
    log: &dyn Fn(&str),
) -> anyhow::Result<Trainer> {
    let p = prepare(cfg, init, log)?;
    let dir = p.cfg.run.dir.clone();
    layout::claim(&dir, force)?;
    let lock = create_run_dir(&dir, &p.cfg, &p.data, p.counts, p.state.total_steps)?;
    Trainer::assemble(p.cfg, dir, p.data, p.model, p.optim, p.state, p.device, p.ad, Some(lock), p.tasks)
}

/// A new run as a rank that only computes, once rank 0 has created its directory: the same
/// data, seeded model and optimizer, writing nothing.
pub fn follow_start(cfg: RunConfig, log: &dyn Fn(&str)) -> anyhow::Result<Trainer> {
    let p = prepare(cfg, None, log)?;
    let dir = p.cfg.run.dir.clone();
    Trainer::assemble(p.cfg, dir, p.data, p.model, p.optim, p.state, p.device, p.ad, None, p.tasks)
}

/// A new run's data, model, optimizer and first state, from a validated config.
struct Prepared {
    cfg: CheckedConfig,
    data: Dataset,
    model: Transformer,
    optim: burn::optim::ModuleOptimizer,
    state: TrainerState,
    counts: ParamCounts,
    device: burn::tensor::Device,
    ad: burn::tensor::Device,
    tasks: Vec<crate::tasks::Task>,
}

fn prepare(cfg: RunConfig, init: Option<(ParamSource, Tokenizer)>, log: &dyn Fn(&str)) -> anyhow::Result<Prepared> {
    // From the sizes alone, before the recipe is resolved or anything is allocated.
    check_memory(&cfg, cfg.model.matrix_params())?;
    let mut cfg = cfg.check()?;
    if let Some(w) = crate::recipe::theorem_3_6_warning(cfg.recipe()) {
        log(&format!("warning: {w}"));
    }
    let device = cfg.open_device()?;
    let dir = cfg.run.dir.clone();
    let parent = cfg.finetune_mut().map(|f| crate::run::saved::open_parent(f, &dir)).transpose()?;
    let (source, tokenizer) = match (init, parent) {
        (Some((s, t)), _) => (s, Some(t)),
        (None, Some(parent)) => super::finetune::parent_init(&cfg, parent)?,
        (None, None) => (ParamSource::Seeded(cfg.train.seed), None),
    };
    if cfg.model.lora.is_some() && matches!(source, ParamSource::Seeded(_)) {
        log("warning: [model.lora] on a model drawn from train.seed: only the adapters train, on frozen random \
             weights; to adapt a trained model, fine-tune it (normlab finetune --checkpoint RUN)");
    }
    let mut data = Dataset::prepare(&cfg.data, tokenizer, log)?;
    cfg.fit_vocab(data.tokenizer.vocab_size(), &data.info.tokenizer)?;
    data.check_seq_len(cfg.train.seq_len)?;
    data.fit_examples(cfg.train.seq_len, log)?;
    let tasks = super::trainer::load_tasks(&cfg, &data.tokenizer)?;
    // Again with the tokenizer's vocabulary, before the model is built (a model too large to
    // build would abort the process inside the allocator).
    check_memory(&cfg, cfg.model.matrix_params())?;
    let ad = autodiff_device(&device, cfg.train.checkpoint_activations);
    let model = match source {
        ParamSource::Seeded(_) => drawn_model(&cfg, &data, &ad, log)?,
        loaded => Transformer::with_recipe(&cfg.model, cfg.recipe(), loaded, &ad)?,
    };
    let counts = crate::model::base::params::counts(&model);
    let (params, total_steps) = (counts.all, cfg.total_steps(counts)?);
    check_memory(&cfg, params as f64)?;
    let optim = optim::build(&optim::settings(&cfg.optim, &model), &model);
    let state = first_state(&cfg, &data, &model, total_steps);
    Ok(Prepared { cfg, data, model, optim, state, counts, device, ad, tasks })
}

/// A new run's trainer state before step 1.
fn first_state(cfg: &CheckedConfig, data: &Dataset, model: &Transformer, total_steps: usize) -> TrainerState {
    TrainerState {
        step: 0,
        total_steps,
        sampler_state: cfg.train.sampler_seed,
        divergence: DivergenceMonitor::new(cfg.train.divergence_factor),
        skip: Default::default(),
        metrics_bytes: 0,
        wall_s: 0.0,
        tokens: 0,
        tokenizer: data.info.tokenizer.clone(),
        recipe: model.meta.recipe.clone(),
        probe: None,
        loss_scale: Default::default(),
        last_eval: None,
        spikes: Default::default(),
        lr_scale: 1.0,
        zclip: Default::default(),
        rollbacks: Vec::new(),
    }
}

/// The model a new run starts from: drawn from `train.seed`, then (for a recipe that asks for
/// it) Admin's profiling pass on the training split.
fn drawn_model(
    cfg: &CheckedConfig,
    data: &Dataset,
    device: &burn::tensor::Device,
    log: &dyn Fn(&str),
) -> anyhow::Result<Transformer> {
    let model = Transformer::with_recipe(&cfg.model, cfg.recipe(), ParamSource::Seeded(cfg.train.seed), device)?;
    Ok(profile_skip_gates(model, cfg, data, device, log))
}

/// The model the saved run's training started from (`normlab probe --init`): its data
/// prepared with its tokenizer (handed back), then the model drawn as [`start`] draws it.
pub fn initial_model(
    cfg: &CheckedConfig,
    tokenizer: Tokenizer,
    device: &burn::tensor::Device,
    log: &dyn Fn(&str),
) -> anyhow::Result<(Transformer, Tokenizer)> {
    let data = Dataset::prepare(&cfg.data, Some(tokenizer), log)?;
    let model = drawn_model(cfg, &data, device, log)?;
    Ok((model, data.tokenizer))
}

/// Admin's profiling pass on a freshly drawn model whose recipe asks for it, on evenly spaced
/// windows of the training split (one micro-batch; the same on every rank, so every rank sets
/// the same ω's).
fn profile_skip_gates(
    model: Transformer,
    cfg: &CheckedConfig,
    data: &Dataset,
    device: &burn::tensor::Device,
    log: &dyn Fn(&str),
) -> Transformer {
    if !cfg.recipe().sublayers.iter().any(|s| s.gate.is_some_and(|g| g.profile)) {
        return model;
    }
    use burn::tensor::{Int, Tensor, TensorData};
    let seq = cfg.train.seq_len;
    let starts = crate::data::windows::validation_starts(data.train.len(), seq, cfg.micro_batch_size());
    let b = crate::data::windows::windows(&data.train, &starts, seq);
    let tokens = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq]), device);
    let (model, omegas) = model.profile_skip_gates(tokens);
    let shown: Vec<String> = omegas.iter().map(|w| format!("{w:.3}")).collect();
    log(&format!("Admin's profiling pass on {} training windows: ω = {}", b.batch, shown.join(", ")));
    model
}

/// Writes a new run's first files (config, run.json, status, tokenizer) and publishes the
/// directory, locked, in one rename.
fn create_run_dir(
    dir: &Path,
    cfg: &CheckedConfig,
    data: &Dataset,
    params: ParamCounts,
    total_steps: usize,
) -> anyhow::Result<layout::RunLock> {
    let info = run_info(cfg, data, params, total_steps);
    let tokenizer = data.tokenizer.to_json()?;
    layout::create(dir, |tmp| {
        write_atomic(&layout::config(tmp), cfg.to_toml()?.as_bytes())?;
        json::write(&layout::info(tmp), &info)?;
        layout::write_status(tmp, &Status::Running { step: 0, total_steps })?;
        if let Some(t) = &tokenizer {
            write_atomic(&layout::tokenizer(tmp), t.as_bytes())?;
        }
        Ok(())
    })
}

/// How `--resume` treats a run whose data changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeOptions {
    /// Continue although the corpus no longer hashes to `run.json`'s `corpus_sha256`
    /// (`train --resume RUN --allow-corpus-change`); refused otherwise.
    pub allow_corpus_change: bool,
    /// Continue although `metrics.jsonl` lost records the checkpoint counted (the gap is
    /// recorded, and the report says so); refused otherwise.
    pub allow_lost_records: bool,
}

/// Continues the run in `dir` from its newest intact checkpoint (or from the start if it has
/// none), with the config, tokenizer, sampler and optimizer state it was saved with. Refuses a
/// run another process is training or whose corpus changed, and clears what an interrupted
/// writer left behind.
pub fn resume(dir: &Path, log: &dyn Fn(&str)) -> anyhow::Result<Resumed> {
    resume_with(dir, ResumeOptions::default(), log)
}

/// [`resume`] with options.
pub fn resume_with(dir: &Path, opts: ResumeOptions, log: &dyn Fn(&str)) -> anyhow::Result<Resumed> {
    let status = layout::read_status(dir)?.with_context(|| {
        format!("{} is not a normlab run directory (no status.json); give the run.dir of a run", dir.display())
    })?;
    match &status {
        Status::Finished { .. } => return Ok(Resumed::AlreadyFinished(status)),
        Status::Diverged { step, reason } => bail!(
            "the run in {} diverged at step {step} ({reason}); there is nothing to resume — start a new run with a \
                lower optim.lr",
            dir.display()
        ),
        Status::Running { .. } | Status::Stopped { .. } => {}
    }
    let lock = layout::lock(dir)?;
    layout::remove_temporaries(dir);
    let (cfg, tokenizer) = load_run(dir)?;
    let Some(ckpt) = checkpoint::latest(dir, log)? else {
        // The status names the step of the last checkpoint written (a run whose first
        // checkpoint was never written says step 0 and starts again).
        let step = match status {
            Status::Running { step, .. } | Status::Stopped { step, .. } => step,
            _ => 0,
        };
        if step > 0 {
            bail!(
                "{} has no checkpoint although its status.json records one at step {step} (was {} \
                    deleted?); nothing was changed — restore the checkpoints from a backup, or start a new run with \
                    `normlab train --config {} --force`",
                dir.display(),
                layout::checkpoints(dir).display(),
                layout::config(dir).display()
            );
        }
        log("no checkpoint yet: starting the run again from step 0");
        drop(lock);
        return Ok(Resumed::Trainer(Box::new(start(cfg.in_dir(dir.to_path_buf()).into_config(), true, log)?)));
    };
    let trainer = restore((cfg, tokenizer), dir, &ckpt, Some(lock), opts, log)?;
    Ok(Resumed::Trainer(Box::new(trainer)))
}

/// The run in `dir` as a rank that only computes, once rank 0 has resumed it: from the same
/// newest checkpoint (or from the start when there is none), writing nothing.
pub fn follow_resume(dir: &Path, opts: ResumeOptions, log: &dyn Fn(&str)) -> anyhow::Result<Trainer> {
    let (cfg, tokenizer) = load_run(dir)?;
    match checkpoint::latest(dir, log)? {
        Some(ckpt) => restore((cfg, tokenizer), dir, &ckpt, None, opts, log),
        None => follow_start(cfg.in_dir(dir.to_path_buf()).into_config(), log),
    }
}

/// The trainer of `dir` as checkpoint `ckpt` saved it.
fn restore(
    (mut cfg, tokenizer): (CheckedConfig, Tokenizer),
    dir: &Path,
    ckpt: &Path,
    lock: Option<layout::RunLock>,
    opts: ResumeOptions,
    log: &dyn Fn(&str),
) -> anyhow::Result<Trainer> {
    let device = cfg.open_device()?;
    let mut data = Dataset::prepare(&cfg.data, Some(tokenizer), log)?;
    check_corpus(dir, &data.info.corpus_sha256, opts, log)?;
    cfg.fit_vocab(data.tokenizer.vocab_size(), &data.info.tokenizer)?;
    data.fit_examples(cfg.train.seq_len, log)?;
    let tasks = super::trainer::load_tasks(&cfg, &data.tokenizer)?;
    let ad = autodiff_device(&device, cfg.train.checkpoint_activations);
    let state = checkpoint::load_state(ckpt)?;
    let lost = lost_records(dir, &state, opts)?;
    if state.tokenizer != data.info.tokenizer {
        bail!(
            "the checkpoint was trained with tokenizer `{}` but the run now has `{}`; restore the run's \
                tokenizer.json or start a new run",
            state.tokenizer,
            data.info.tokenizer
        );
    }
    let weights = layout::checkpoint_weights(ckpt);
    let model = checkpoint::load_weights(&weights, &cfg.model, cfg.recipe(), &state.tokenizer, &ad)?;
    let optim = checkpoint::load_optimizer(ckpt, optim::build(&optim::settings(&cfg.optim, &model), &model))?;
    log(&format!("resuming {} at step {}/{} from {}", dir.display(), state.step, state.total_steps, ckpt.display()));
    let writes = lock.is_some();
    let mut trainer = Trainer::assemble(cfg, dir.to_path_buf(), data, model, optim, state, device, ad, lock, tasks)?;
    if let (Some(l), true) = (lost, writes) {
        log(&format!(
            "warning: {} lost {} bytes of records before step {}; continuing, the gap recorded",
            layout::metrics(dir).display(),
            l.bytes,
            l.step
        ));
        trainer.record_lost(l)?;
    }
    Ok(trainer)
}

/// The records `metrics.jsonl` lost (shorter than the checkpoint recorded, or missing): refused
/// unless allowed, then returned to be recorded.
fn lost_records(dir: &Path, state: &TrainerState, opts: ResumeOptions) -> anyhow::Result<Option<LostRecord>> {
    let path = layout::metrics(dir);
    let have = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if have >= state.metrics_bytes {
        return Ok(None);
    }
    let lost = LostRecord { step: state.step, bytes: state.metrics_bytes - have };
    anyhow::ensure!(
        opts.allow_lost_records,
        "{} holds {have} of the {} bytes of records the checkpoint of step {} counted: records were lost (truncated \
         or deleted); restore the file, or pass --allow-lost-records to continue with the gap recorded",
        path.display(),
        state.metrics_bytes,
        state.step
    );
    Ok(Some(lost))
}

/// Refuses to continue a run on a corpus other than the one it started on (its batches would
/// come from other text, and the curve would not continue the one recorded), unless allowed.
fn check_corpus(dir: &Path, now: &str, opts: ResumeOptions, log: &dyn Fn(&str)) -> anyhow::Result<()> {
    let info: RunInfo = json::read(&layout::info(dir))?;
    let was = &info.data.corpus_sha256;
    if was == now {
        return Ok(());
    }
    if opts.allow_corpus_change {
        log(&format!("the corpus changed since the run started (sha256 {was:.12}… → {now:.12}…); continuing on it"));
        return Ok(());
    }
    bail!(
        "the corpus of {} ({}) changed since the run started (sha256 {was:.12}… then, {now:.12}… now); restore the \
            original text, or pass --allow-corpus-change to continue on the new text",
        dir.display(),
        info.data.corpus
    )
}

fn run_info(cfg: &CheckedConfig, data: &Dataset, counts: ParamCounts, total_steps: usize) -> RunInfo {
    let params = counts.all;
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let tokens_per_step = cfg.train.batch_size * cfg.train.seq_len;
    RunInfo {
        normlab_version: env!("CARGO_PKG_VERSION").into(),
        command: std::env::args().collect(),
        started_unix: started,
        machine: crate::device::machine(),
        device: cfg.run.device.to_string(),
        seed: cfg.train.seed,
        sampler_seed: cfg.train.sampler_seed,
        params,
        params_non_embedding: Some(counts.non_embedding),
        total_steps,
        tokens_per_step,
        tokens_per_param: (total_steps * tokens_per_step) as f64 / params as f64,
        recipe: cfg.model.recipe.spec().map(|s| s.name).unwrap_or_default(),
        data: data.info.clone(),
        unigram_loss: Some(data.unigram_loss(cfg.model.vocab_size)),
    }
}

/// Refuses a training step that cannot fit the CPU's available memory (other devices do not
/// report theirs through burn).
fn check_memory(cfg: &RunConfig, params: f64) -> anyhow::Result<()> {
    let est = super::memory::estimate(cfg, params);
    let on_cpu = cfg.run.device.is_cpu();
    super::memory::check(est, on_cpu.then(super::memory::available_cpu).flatten())
}

/// The training device: autodiff on `device`, with gradient checkpointing when asked
/// (`train.checkpoint_activations`).
pub fn autodiff_device(device: &burn::tensor::Device, checkpoint: bool) -> burn::tensor::Device {
    let ad = device.clone().autodiff();
    if checkpoint { ad.gradient_checkpointing() } else { ad }
}
