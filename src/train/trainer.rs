//! The training loop: sample, forward, backward (accumulating micro-batches), clip the global
//! gradient norm, check for divergence and outliers (skip-step), step AdamW with the scheduled
//! learning rate; validate and checkpoint on their intervals.

use super::clip::Clipper;
use super::engine;
use super::eval::Evaluated;
use super::pairs_eval;
use super::progress::Progress;
use super::step;
use super::step::{Share, StepGradients};
use super::update;
use crate::data::sampler::Batch;
use crate::data::windows::validation_starts;
use crate::data::{Dataset, Sampler};
use crate::dist::Ranks;
use crate::io::jsonl::JsonlWriter;
use crate::kernels::Precision;
use crate::model::Transformer;
use crate::model::attention::qk_clip::ClipEvent;
use crate::model::base::terms::StepReadings;
use crate::model::hooks::StepSeen;
use crate::model::regularizer::REGULARIZER;
use crate::model::transformer::{Objective, Z_LOSS};
use crate::probe::{LiveProbe, ProbePaths};
use crate::run::CheckedConfig;
use crate::run::checkpoint::{self, TrainerState};
use crate::run::config::RunConfig;
use crate::run::layout::{self, Status};
use crate::run::loss_scale::ScaleDecision;
use crate::run::metrics::{DivergedRecord, EvalRecord, MetricsRecord, TrainRecord};
use crate::run::skip::SkipDecision;
use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Int, Tensor, TensorData};
use std::path::PathBuf;
use std::time::Instant;

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Finished {
        val_loss: f64,
        val_ppl: f64,
    },
    Diverged {
        step: usize,
        reason: String,
    },
    /// `stop_after` was reached: the run stops as if killed (nothing final is written) and can
    /// be resumed from its last checkpoint.
    Stopped {
        step: usize,
    },
    /// A stop signal (SIGINT, SIGTERM) arrived: the run stopped at a step's end with a
    /// checkpoint of that step and `status: stopped`, and resumes from there.
    Interrupted {
        step: usize,
        signal: crate::stop::Signal,
    },
}

pub struct Trainer {
    pub cfg: CheckedConfig,
    pub dir: PathBuf,
    pub data: Dataset,
    pub model: Transformer,
    pub optim: ModuleOptimizer,
    pub sampler: Sampler,
    pub state: TrainerState,
    pub params: usize,
    /// The processes training this run together (a lone one by default).
    pub(super) ranks: Ranks,
    /// What the run writes; `None` on the ranks other than 0 of a job, which only compute.
    pub(super) out: Option<Outputs>,
    /// The plain (no autodiff) device: inputs for evaluation.
    pub(super) device: Device,
    /// The autodiff device the model trains on.
    pub(super) ad: Device,
    pub(super) val_starts: Vec<usize>,
    /// Stop (as if interrupted) once this many steps are done.
    pub stop_after: Option<usize>,
    /// Sees (and may change) each step's micro-batches before they are used, with the 1-based
    /// step: the tests inject faults through it (a batch of random tokens whose loss spikes).
    pub batch_hook: Option<BatchHook>,
    /// Stops a rollback after this phase with an error, leaving its files as a kill there
    /// would: the tests resume from each.
    pub rollback_fault: Option<crate::run::rollback::RollbackPhase>,
    /// The first spike of the last rollback that found no checkpoint before it (warned once).
    pub(super) rollback_unmet: Option<usize>,
    /// The `[eval]` tasks, loaded once by the rank that writes (empty on the others).
    pub(super) tasks: Vec<crate::tasks::Task>,
    /// The tracking server's sender (`run.track`), on the rank that writes.
    pub(super) tracker: Option<crate::track::Tracker>,
}

/// The run's outputs, held by the one process that writes them.
pub(super) struct Outputs {
    pub(super) metrics: JsonlWriter,
    pub(super) probe: LiveProbe,
    /// Held for the trainer's life: no second process (or job) writes this run.
    _lock: layout::RunLock,
}

/// See [`Trainer::batch_hook`].
pub type BatchHook = Box<dyn FnMut(usize, &mut [Batch])>;

/// One optimizer step's measurements, or the divergence that stopped it.
enum StepResult {
    /// The step's record and the probes' warnings.
    Done(Box<TrainRecord>, Vec<String>),
    Diverged(String),
}

impl Trainer {
    /// The trainer around a built model and optimizer: with the run's `lock`, opens the metrics
    /// and probe outputs (truncated to what `state` recorded; empty for a new run); without it
    /// (a rank that only computes) writes nothing. Fixes the validation windows; the sampler
    /// continues from `state` (a new run's state is its seed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assemble(
        cfg: CheckedConfig,
        dir: PathBuf,
        data: Dataset,
        mut model: Transformer,
        optim: ModuleOptimizer,
        state: TrainerState,
        device: Device,
        ad: Device,
        lock: Option<layout::RunLock>,
        tasks: Vec<crate::tasks::Task>,
    ) -> anyhow::Result<Self> {
        model.set_precision(cfg.train.precision);
        let out = match lock {
            Some(lock) => Some(Outputs::open(&cfg, &dir, &state, lock)?),
            None => None,
        };
        let val_starts = validation_starts(data.val.len(), cfg.train.seq_len, cfg.run.eval_windows);
        // Only the rank that writes evaluates and tracks.
        let tasks = if out.is_some() { tasks } else { Vec::new() };
        let tracker = out.as_ref().and_then(|_| Self::open_tracker(&cfg, &dir, &state));
        Ok(Trainer {
            tasks,
            sampler: Sampler::from_state(state.sampler_state),
            params: crate::model::base::params::count(&model),
            cfg,
            dir,
            data,
            model,
            optim,
            state,
            ranks: Ranks::single(),
            out,
            device,
            ad,
            val_starts,
            stop_after: None,
            batch_hook: None,
            rollback_fault: None,
            rollback_unmet: None,
            tracker,
        })
    }

    /// Trains as one of `ranks`, each computing its share of every step's micro-batches:
    /// refused unless they divide evenly.
    pub fn set_ranks(&mut self, ranks: Ranks) -> anyhow::Result<()> {
        self.cfg.check_ranks(ranks.size())?;
        self.ranks = ranks;
        self.ranks.set_resume_hint(self.resume_hint());
        Ok(())
    }

    /// Where the run can be resumed, for the error line of a rank that finds a peer gone.
    fn resume_hint(&self) -> String {
        let (dir, n) = (self.dir.display(), self.ranks.size());
        format!(
            "{dir} keeps its last checkpoint ({}): resume with `mpirun -np {n} normlab train --resume {dir}` (any rank \
             count that divides the step's micro-batches)",
            match self.state.step {
                0 => "none yet: the run starts again".to_string(),
                s => format!("step {s}"),
            }
        )
    }

    /// Two lines describing the run: recipe, size, budget and data; which optimizer trains
    /// which parameters.
    pub fn summary(&self) -> String {
        let groups =
            super::optim::describe_groups(&super::optim::settings(&self.cfg.optim, &self.model), &self.model, true);
        format!("{}\noptimizer {}: {}", self.run_line(), self.cfg.optim.name, groups.join("; "))
    }

    fn run_line(&self) -> String {
        let t = &self.state;
        let s = &self.cfg.train;
        let info = &self.data.info;
        format!(
            "{}: recipe {}, {} parameters, {} steps × {} sequences × {} tokens ({:.1} tokens/parameter), {} ({} train \
                / {} val tokens)",
            self.dir.display(),
            t.recipe,
            self.params,
            t.total_steps,
            s.batch_size,
            s.seq_len,
            (t.total_steps * s.batch_size * s.seq_len) as f64 / self.params as f64,
            info.tokenizer,
            info.train_tokens,
            info.val_tokens,
        )
    }

    /// Trains to the step budget. Divergence is an outcome, not an error.
    pub fn run(&mut self, progress: &mut Progress) -> anyhow::Result<Outcome> {
        let clock = Clock { wall0: self.state.wall_s, started: Instant::now() };
        let total = self.state.total_steps;
        let mut last_eval = self.state.last_eval.clone().filter(|e| e.step == self.state.step);
        while self.state.step < total {
            if self.stop_after.is_some_and(|s| self.state.step >= s) {
                progress.finish();
                return Ok(Outcome::Stopped { step: self.state.step });
            }
            if let Some(signal) = self.stop_requested() {
                return self.interrupted(signal, clock.now(), progress);
            }
            let record = match engine::guarded(self.state.step + 1, || self.train_step(clock))? {
                StepResult::Done(r, warnings) => {
                    for w in &warnings {
                        progress.warn(&format!("step {}: {w}", r.step));
                    }
                    *r
                }
                StepResult::Diverged(reason) => return self.diverged(reason, progress),
            };
            self.record(&MetricsRecord::Train(record.clone()))?;
            progress.step(&record);
            self.tracking_warnings(progress);
            if let Some(spikes) = self.rollback_due()
                && self.roll_back(spikes, clock.now(), progress)?
            {
                last_eval = self.state.last_eval.clone().filter(|e| e.step == self.state.step);
                continue;
            }
            let step = self.state.step;
            let every = self.cfg.run.eval_every;
            if (every > 0 && step.is_multiple_of(every)) || step == total {
                let e = engine::guarded(step, || self.validate(clock.now()))?;
                progress.eval(&e);
                last_eval = Some(e);
            }
            let task_every = self.cfg.eval.every;
            if task_every > 0 && step.is_multiple_of(task_every) && step < total {
                engine::guarded(step, || self.evaluate_tasks(progress))?;
            }
            if self.cfg.run.checkpoint_every > 0 && step.is_multiple_of(self.cfg.run.checkpoint_every) && step < total {
                self.checkpoint(clock.now())?;
            }
        }
        self.finish(last_eval, clock, progress)
    }

    /// The end of a finished run: a final validation unless this step has one, the last
    /// checkpoint, the pairs' scores, the final weights and the finished status.
    fn finish(
        &mut self,
        last_eval: Option<EvalRecord>,
        clock: Clock,
        progress: &mut Progress,
    ) -> anyhow::Result<Outcome> {
        let e = match last_eval {
            Some(e) => e,
            None => self.validate(clock.now())?,
        };
        // Before the last checkpoint, which then counts its record: a resume never repeats it.
        self.evaluate_tasks(progress)?;
        let wall = clock.now();
        self.checkpoint(wall)?;
        if self.out.is_some() {
            self.score_pairs(progress)?;
            let (step, tokenizer) = (self.state.step, &self.state.tokenizer);
            let weights = layout::final_weights(&self.dir);
            checkpoint::save_weights(&weights, &self.model, step, tokenizer)?;
            let weights_sha256 = Some(checkpoint::file_sha256(&weights)?);
            let status =
                Status::Finished { step, val_loss: e.val_loss, val_ppl: e.val_ppl, wall_s: wall, weights_sha256 };
            layout::write_status(&self.dir, &status)?;
        }
        self.end_tracking("FINISHED", progress);
        progress.finish();
        Ok(Outcome::Finished { val_loss: e.val_loss, val_ppl: e.val_ppl })
    }

    /// Stops at this step's end on a signal: a checkpoint of the step, then `status: stopped`.
    fn interrupted(
        &mut self,
        signal: crate::stop::Signal,
        wall_s: f64,
        progress: &Progress,
    ) -> anyhow::Result<Outcome> {
        let step = self.state.step;
        progress.println(&format!("{} received: writing a checkpoint at step {step} and stopping", signal.name()));
        self.checkpoint(wall_s)?;
        if self.out.is_some() {
            let status = Status::Stopped { step, total_steps: self.state.total_steps, signal: signal.name().into() };
            layout::write_status(&self.dir, &status)?;
        }
        self.end_tracking("KILLED", progress);
        progress.finish();
        Ok(Outcome::Interrupted { step, signal })
    }

    fn diverged(&mut self, reason: String, progress: &Progress) -> anyhow::Result<Outcome> {
        let step = self.state.step + 1;
        self.record(&MetricsRecord::Diverged(DivergedRecord { step, reason: reason.clone() }))?;
        if self.out.is_some() {
            layout::write_status(&self.dir, &Status::Diverged { step, reason: reason.clone() })?;
        }
        progress.println(&format!("diverged at step {step}: {reason}"));
        self.end_tracking("FAILED", progress);
        progress.finish();
        Ok(Outcome::Diverged { step, reason })
    }

    /// One optimizer step over `batch_size / micro_batch_size` accumulated micro-batches: the
    /// update is refused for a divergence (which ends the run) or an outlier under the
    /// skip-step rule (recorded; the run goes on).
    fn train_step(&mut self, clock: Clock) -> anyhow::Result<StepResult> {
        let t0 = Instant::now();
        let lr = self.cfg.schedule.lr(self.state.step, self.state.total_steps, self.cfg.optim.lr) * self.state.lr_scale;
        let batches = self.next_batches();
        let tokens = batches.iter().map(|b| b.batch * b.seq_len).sum::<usize>() as u64;
        let probing = self.out.is_some() && self.cfg.probe.is_probe_step(self.state.step + 1, self.state.total_steps);
        let probe_batch = probing.then(|| batches[0].clone());
        let share = Share { micro_batches: batches.len(), ranks: self.ranks };
        let mine = self.ranks.share(batches.len());
        let tensors = batches.into_iter().skip(mine.start).take(mine.len()).map(|b| to_tensors(b, &self.ad));
        let f16 = self.cfg.train.precision == Precision::F16;
        let loss_scale = if f16 { self.state.loss_scale.scale } else { 1.0 };
        let objective = Objective { masked: self.data.examples.is_some(), z_loss: self.cfg.train.z_loss };
        if self.cfg.model.lora.as_ref().is_some_and(|l| l.dropout > 0.0) {
            // LoRA's dropout masks: drawn from the run's seed and the step, so a resumed run
            // draws the ones it would have.
            self.ad.seed(self.cfg.train.seed ^ crate::rng::fnv1a(&format!("lora-dropout-{}", self.state.step)));
        }
        let clipper = Clipper::new(&self.cfg.optim, &mut self.state.zclip);
        let g = step::gradients(&self.model, tensors, share, clipper, objective, loss_scale)?;
        let mut warnings = Vec::new();
        let skipped = self.refuse_update(f16, g.loss, g.norms.total, &mut warnings);
        if skipped.is_none()
            && let Some(reason) = self.state.divergence.check(g.loss, g.norms.total)
        {
            return Ok(StepResult::Diverged(reason));
        }
        // The probe sees the weights and gradients of this step, before the update.
        let probe = match (probing && skipped.is_none(), probe_batch) {
            (true, Some(b)) => Some(self.probe_input(&g, b)),
            _ => None,
        };
        let mut facts = StepFacts::new(&g, lr, skipped, f16.then_some(loss_scale), tokens);
        if facts.skipped.is_none() {
            let seen = self.step_seen(&g.readings);
            self.apply_update(g.grads, seen, lr, &mut facts)?;
        }
        // The probe step's update by kind and layer (the probe only runs on an applied update).
        let probe =
            probe.map(|p| ProbeInput { updates: Some(update::breakdown(&facts.updates, self.model.n_layers())), ..p });
        let record = self.advance(facts, tokens as f64 / t0.elapsed().as_secs_f64(), clock);
        if record.loss_spike {
            // Gradient-norm spikes are the probes' to announce; a loss spike is said here.
            warnings.push(format!("loss spike: {:.4} is over 6σ above the mean of the previous 128 steps", record.ce));
        }
        let warnings = self.observe(&record, &g.norms, probe, warnings)?;
        Ok(StepResult::Done(Box::new(record), warnings))
    }

    /// What the after-step hooks read of the step being taken: the forward's records and where
    /// the step stands in the run.
    fn step_seen<'a>(&self, readings: &'a StepReadings) -> StepSeen<'a> {
        let total = self.state.total_steps;
        let warmup = self.cfg.schedule.warmup_steps(total);
        StepSeen { readings, done: self.state.step + 1, total, warmup }
    }

    /// The optimizer's update of `grads` at rate `lr` (clipped under `optim.update_clip`), then
    /// the recipe's after-step hooks on `seen`; what they did goes into `facts`.
    fn apply_update(
        &mut self,
        grads: GradientsParams,
        seen: StepSeen<'_>,
        lr: f64,
        facts: &mut StepFacts,
    ) -> anyhow::Result<()> {
        let before = self.model.clone();
        let mut stepped = self.optim.step(lr, self.model.clone(), grads);
        if self.cfg.optim.update_clip > 0.0 {
            stepped = update::clip(&before, stepped, self.cfg.optim.update_clip * lr);
        }
        let (model, events) = stepped.after_step(seen);
        facts.updates = update::measure(&before, &model)?;
        self.model = model;
        facts.clip_event = events.qk_clip;
        facts.taper_gate = events.taper_gate;
        Ok(())
    }

    /// What an activation probe of this step needs: the weights before the update, the first
    /// micro-batch and (for TensorBoard) the gradients' histograms.
    fn probe_input(&self, g: &StepGradients, batch: Batch) -> ProbeInput {
        let histograms = match self.cfg.probe.histograms && self.cfg.probe.tensorboard {
            true => crate::probe::grads::histograms(&self.model, &g.grads),
            false => Vec::new(),
        };
        ProbeInput { model: self.model.valid(), batch, histograms, updates: None }
    }

    /// The probes' view of a finished step (on the writing rank): its scalars, the gradient
    /// statistics of an applied update, the activation probe on its probe steps.
    fn observe(
        &mut self,
        record: &TrainRecord,
        norms: &crate::probe::grads::GradNorms,
        probe: Option<ProbeInput>,
        mut warnings: Vec<String>,
    ) -> anyhow::Result<Vec<String>> {
        let Some(out) = &mut self.out else { return Ok(warnings) };
        if let Some(why) = &record.skipped {
            warnings.push(format!("update skipped: {why}"));
            out.probe.scalars(record.step, &tensorboard_scalars(record))?;
            return Ok(warnings);
        }
        warnings.extend(out.probe.observe_step(record.step, norms, &tensorboard_scalars(record))?);
        if let Some(p) = probe {
            let (x, _) = to_tensors(p.batch, &self.device);
            warnings = out.probe.probe(record.step, &p.model, x, warnings, p.histograms, p.updates)?;
        }
        Ok(warnings)
    }

    /// Counts the step done (its tokens, the sampler's position) and returns its record.
    fn advance(&mut self, f: StepFacts, tokens_per_s: f64, clock: Clock) -> TrainRecord {
        self.state.step += 1;
        self.state.sampler_state = self.sampler.state();
        self.state.tokens += f.tokens;
        let spike = match f.ce.is_finite() && f.grad_norm.is_finite() {
            true => self.state.spikes.observe(self.state.step, f.ce, f.grad_norm),
            false => None,
        };
        let applied = (!f.updates.is_empty()).then(|| update::UpdateSize::of(&f.updates));
        TrainRecord {
            step: self.state.step,
            loss: f.loss,
            ce: f.ce,
            reg: f.reg,
            lr: f.lr,
            grad_norm: f.grad_norm,
            clipped: f.clip < 1.0,
            skipped: f.skipped,
            loss_scale: f.loss_scale,
            tokens: self.state.tokens,
            tokens_per_s,
            wall_s: clock.now(),
            max_logit: f.clip_event.map(|e| e.max_logit),
            qk_clipped: f.clip_event.map(|e| e.heads_clipped),
            taper_gate: f.taper_gate,
            spike_score: self.state.spikes.score(),
            loss_spike: spike.as_ref().is_some_and(|s| s.loss_spike),
            grad_spike: spike.as_ref().is_some_and(|s| s.grad_spike),
            z: f.z,
            update_rms: applied.map(|u| u.rms()),
            update_ratio: applied.map(|u| u.ratio()),
            moe: f.moe,
            clip: f.clip_record,
        }
    }

    /// This step's `batch_size / micro_batch_size` micro-batches (prompt–answer pairs when the
    /// data has them), after the [`Trainer::batch_hook`].
    fn next_batches(&mut self) -> Vec<Batch> {
        let batch = self.cfg.train.batch_size;
        let micro = self.cfg.micro_batch_size();
        let seq = self.cfg.train.seq_len;
        let mut batches: Vec<Batch> = match &self.data.examples {
            Some(p) => self.sampler.next_pairs(&p.train, batch, micro, p.pad),
            None => (0..batch / micro)
                .map(|_| match &self.data.mixture {
                    Some(m) => self.sampler.next_mixed(&self.data.train, m, micro, seq),
                    None => self.sampler.next_batch(&self.data.train, micro, seq),
                })
                .collect(),
        };
        if let Some(hook) = &mut self.batch_hook {
            hook(self.state.step + 1, &mut batches);
        }
        batches
    }

    /// Why this step's update is refused, if it is: f16 gradients that overflowed at the
    /// current loss scale (the scale then halves), or an outlier under the skip-step rule. A
    /// non-finite step that is neither is left to the divergence check.
    fn refuse_update(&mut self, f16: bool, loss: f64, grad_norm: f64, warnings: &mut Vec<String>) -> Option<String> {
        if f16
            && loss.is_finite()
            && let ScaleDecision::Skip(why) = self.state.loss_scale.update(grad_norm)
        {
            return Some(why);
        }
        if !(loss.is_finite() && grad_norm.is_finite()) {
            return None;
        }
        match self.state.skip.decide(&self.cfg.skip_rule(), loss, grad_norm) {
            SkipDecision::Apply => None,
            SkipDecision::Skip(why) => Some(why),
            SkipDecision::ApplyAfterSkips(why) => {
                warnings.push(why);
                None
            }
        }
    }

    /// Validation loss and perplexity on the fixed windows; written to the metrics.
    pub fn validate(&mut self, wall_s: f64) -> anyhow::Result<EvalRecord> {
        let plain = self.model.valid();
        let micro = self.cfg.micro_batch_size();
        let on = Evaluated { model: &plain, device: &self.device, ranks: self.ranks };
        let (v, sources) = match (&self.data.examples, &self.data.mixture) {
            (Some(p), _) => (on.pairs(&p.val, p.pad, micro), Vec::new()),
            (None, Some(m)) => on.mixture(&self.data.val, m, self.cfg.run.eval_windows, self.cfg.train.seq_len, micro),
            (None, None) => (on.windows(&self.data.val, &self.val_starts, self.cfg.train.seq_len, micro), Vec::new()),
        };
        let r = EvalRecord {
            step: self.state.step,
            val_loss: v.loss,
            val_ppl: v.perplexity,
            val_tokens: v.tokens,
            wall_s,
            sources,
        };
        self.record(&MetricsRecord::Eval(r.clone()))?;
        self.state.last_eval = Some(r.clone());
        if let Some(out) = &mut self.out {
            let mut scalars = vec![("val/loss".to_string(), r.val_loss as f32), ("val/ppl".into(), r.val_ppl as f32)];
            for s in &r.sources {
                scalars.push((format!("val/loss/{}", s.name), s.val_loss as f32));
                scalars.extend(s.val_bpb.map(|b| (format!("val/bpb/{}", s.name), b as f32)));
            }
            let scalars: Vec<(&str, f32)> = scalars.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            out.probe.scalars(r.step, &scalars)?;
        }
        Ok(r)
    }

    /// Pairs: decodes and scores the test sets (before the run is marked finished, so an
    /// interruption here leaves it resumable).
    /// The `[eval]` tasks on the model as it is now: a `tasks` record, TensorBoard scalars
    /// (`tasks/NAME/METRIC`) and a line of output.
    fn evaluate_tasks(&mut self, progress: &Progress) -> anyhow::Result<()> {
        if self.tasks.is_empty() || self.out.is_none() {
            return Ok(());
        }
        let t0 = Instant::now();
        let plain = self.model.valid();
        let d = crate::decode::Decoder {
            model: &plain,
            device: &self.device,
            context: self.cfg.train.seq_len,
            cache: true,
        };
        let tok = &self.data.tokenizer;
        let prefix = crate::data::boundary::boundary(tok, self.cfg.data.task)?.id;
        let mut results = Vec::with_capacity(self.tasks.len());
        for task in &self.tasks {
            let mut r = crate::tasks::evaluate(&d, tok, prefix, task)?;
            r.items.clear();
            results.push(r);
        }
        let step = self.state.step;
        progress.println(&format!("step {step:>6}  {}", crate::tasks::evaluate::summary(&results)));
        if let Some(out) = &mut self.out {
            let scalars: Vec<(String, f32)> = results
                .iter()
                .flat_map(|r| r.metrics.iter().map(move |(m, v)| (format!("tasks/{}/{m}", r.task), v.value as f32)))
                .collect();
            let named: Vec<(&str, f32)> = scalars.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            out.probe.scalars(step, &named)?;
        }
        let record = crate::run::metrics::TasksRecord { step, results, seconds: t0.elapsed().as_secs_f64() };
        self.record(&MetricsRecord::Tasks(record))
    }

    fn score_pairs(&mut self, progress: &Progress) -> anyhow::Result<()> {
        let Some(p) = self.data.examples.as_ref().filter(|p| !p.tests.is_empty()) else { return Ok(()) };
        progress.println(&format!("decoding {} test sets for exact match and F1", p.tests.len()));
        let plain = self.model.valid();
        let tok = &self.data.tokenizer;
        let e = pairs_eval::score_sets(&plain, tok, &p.tests, self.cfg.train.seq_len, self.state.step, &self.device)?;
        progress.println(&crate::run::pairs_eval::summary(&e));
        crate::io::json::write(&layout::pairs_eval(&self.dir), &e)
    }

    /// Writes a checkpoint now (an imported run's step 0, so that `perplexity`, `generate`, `probe`
    /// and `train --resume` find its weights).
    pub fn save_checkpoint(&mut self) -> anyhow::Result<()> {
        self.checkpoint(self.state.wall_s)
    }

    /// A checkpoint of this step, written by the rank that writes the run.
    pub(super) fn checkpoint(&mut self, wall_s: f64) -> anyhow::Result<()> {
        self.state.wall_s = wall_s;
        if let Some(out) = &mut self.out {
            self.state.metrics_bytes = out.metrics.durable_len()?;
            self.state.probe = Some(out.probe.checkpoint_state()?);
            checkpoint::save(&self.dir, &self.model, &self.optim, &self.state, self.cfg.run.keep_checkpoints)?;
            let status = Status::Running { step: self.state.step, total_steps: self.state.total_steps };
            layout::write_status(&self.dir, &status)?;
        }
        if self.ranks.size() > 1 {
            self.ranks.set_resume_hint(self.resume_hint());
        }
        Ok(())
    }

    /// Appends a record to `metrics.jsonl` (on the writing rank).
    /// Records that `metrics.jsonl` lost records before this resume.
    pub fn record_lost(&mut self, l: crate::run::metrics::LostRecord) -> anyhow::Result<()> {
        self.record(&MetricsRecord::Lost(l))
    }

    pub(super) fn record(&mut self, r: &MetricsRecord) -> anyhow::Result<()> {
        let Some(out) = &mut self.out else { return Ok(()) };
        out.metrics.write(r)?;
        if let Some(t) = &self.tracker {
            t.record(r, out.metrics.position()?);
        }
        Ok(())
    }

    /// Reopens the outputs truncated to what `self.state` recorded (after a rollback).
    pub(super) fn reopen_outputs(&mut self) -> anyhow::Result<()> {
        if let Some(Outputs { metrics, probe, _lock }) = self.out.take() {
            // The old writers are closed before the files are cut back.
            drop((metrics, probe));
            self.out = Some(Outputs::open(&self.cfg, &self.dir, &self.state, _lock)?);
            if let Some(t) = &self.tracker {
                t.truncated(self.state.metrics_bytes);
            }
        }
        Ok(())
    }

    /// A stop signal, agreed by every rank (any rank's signal stops them all at this step).
    fn stop_requested(&self) -> Option<crate::stop::Signal> {
        let mine = crate::stop::requested().map_or(0, |s| i64::from(s.raw()));
        crate::stop::Signal::from_raw(self.ranks.max(mine) as i32)
    }
}

impl Outputs {
    /// Opens the metrics and probe outputs, truncated to what `state` recorded.
    fn open(
        cfg: &RunConfig,
        dir: &std::path::Path,
        state: &TrainerState,
        lock: layout::RunLock,
    ) -> anyhow::Result<Self> {
        let metrics = JsonlWriter::open(&layout::metrics(dir), state.metrics_bytes)?;
        let records = layout::probes(dir);
        let alerts = layout::alerts(dir);
        let tb = layout::tensorboard(dir);
        let paths = ProbePaths { records: &records, alerts: &alerts, tensorboard: &tb };
        let warmup = cfg.schedule.warmup_steps(state.total_steps);
        let probe = LiveProbe::open(&paths, &cfg.probe, 2 * cfg.model.n_layers, warmup, state.probe.clone())?;
        Ok(Self { metrics, probe, _lock: lock })
    }
}

fn to_tensors(b: Batch, device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let shape = [b.batch, b.seq_len];
    (
        Tensor::from_data(TensorData::new(b.inputs, shape), device),
        Tensor::from_data(TensorData::new(b.targets, shape), device),
    )
}

/// See [`Trainer::probe_input`].
struct ProbeInput {
    model: Transformer,
    batch: Batch,
    histograms: Vec<(String, crate::io::tensorboard::Histogram)>,
    /// The applied update by kind and layer, filled in after the step.
    updates: Option<crate::probe::updates::UpdateBreakdown>,
}

/// What a step's record holds.
struct StepFacts {
    lr: f64,
    /// Mean loss, cross-entropy and regulariser over the micro-batches.
    loss: f64,
    ce: f64,
    /// KiteNorm's regulariser R before λ, when the recipe has it.
    reg: Option<f64>,
    /// The global gradient norm before clipping, and the clipping factor (1: not clipped).
    grad_norm: f64,
    clip: f64,
    /// Why the update was refused, if it was.
    skipped: Option<String>,
    /// The f16 loss scale the step ran at.
    loss_scale: Option<f64>,
    tokens: u64,
    /// What QK-clip did after the update (QK-clip recipes).
    clip_event: Option<ClipEvent>,
    /// TaperNorm's gate after the update (TaperNorm recipes).
    taper_gate: Option<f64>,
    /// Mean log²Z with a z-loss.
    z: Option<f64>,
    /// A MoE model's routing.
    moe: Option<Box<crate::run::metrics::MoeStepRecord>>,
    /// What ZClip or AGC did.
    clip_record: Option<Box<crate::run::metrics::ClipStepRecord>>,
    /// Every parameter's applied update (empty on a skipped step).
    updates: Vec<update::ParamUpdate>,
}

impl StepFacts {
    fn new(g: &StepGradients, lr: f64, skipped: Option<String>, loss_scale: Option<f64>, tokens: u64) -> Self {
        let loss = g.loss;
        let ce = g.ce;
        let reg = g.readings.scalar(REGULARIZER);
        let grad_norm = g.norms.total;
        let clip = g.scale;
        let z = g.readings.scalar(Z_LOSS).filter(|&z| z != 0.0);
        let moe = crate::run::metrics::MoeStepRecord::from_readings(&g.readings).map(Box::new);
        Self {
            lr,
            loss,
            ce,
            reg,
            grad_norm,
            clip,
            skipped,
            loss_scale,
            tokens,
            clip_event: None,
            taper_gate: None,
            z,
            moe,
            clip_record: g.clip.clone().map(Box::new),
            updates: Vec::new(),
        }
    }
}

/// The run's wall clock: the seconds its earlier processes trained (from the checkpoint) plus this process's own.
#[derive(Clone, Copy)]
struct Clock {
    wall0: f64,
    started: Instant,
}

impl Clock {
    fn now(self) -> f64 {
        self.wall0 + self.started.elapsed().as_secs_f64()
    }
}

/// A step's training scalars as TensorBoard tags.
fn tensorboard_scalars(r: &TrainRecord) -> Vec<(&'static str, f32)> {
    let mut v = vec![
        ("train/loss", r.loss as f32),
        ("train/ce", r.ce as f32),
        ("train/lr", r.lr as f32),
        ("train/grad_norm", r.grad_norm as f32),
    ];
    v.extend(r.reg.map(|reg| ("train/reg", reg as f32)));
    v.push(("train/skipped", if r.skipped.is_some() { 1.0 } else { 0.0 }));
    // OLMo-core's tag, so that its runs and these chart side by side.
    v.extend(r.spike_score.map(|s| ("spike/SpikeScore (total)", s as f32)));
    v.extend(r.z.map(|z| ("train/z", z as f32)));
    v.extend(r.taper_gate.map(|g| ("train/taper_gate", g as f32)));
    v.extend(r.update_rms.map(|u| ("train/update_rms", u as f32)));
    v.extend(r.update_ratio.map(|u| ("train/update_ratio", u as f32)));
    if let Some(m) = &r.moe {
        let worst = m.load_cv.iter().copied().fold(0.0, f64::max);
        v.extend([("moe/balance", m.balance as f32), ("moe/router_z", m.router_z as f32)]);
        v.extend([("moe/load_cv_max", worst as f32), ("moe/dead_experts", m.dead.iter().sum::<usize>() as f32)]);
    }
    v.extend(r.clip.iter().flat_map(|c| c.scalars()).map(|(k, x)| (k, x as f32)));
    v
}

/// The `[eval]` tasks of `cfg`, loaded (built-in ones made from the corpus in its cache) and
/// each request checked to fit the run's context with `tok`: a task that cannot be scored is
/// refused before training, not after it.
pub(super) fn load_tasks(cfg: &CheckedConfig, tok: &crate::data::Tokenizer) -> anyhow::Result<Vec<crate::tasks::Task>> {
    let (cache, context) = (cfg.data.cache_dir(), cfg.train.seq_len);
    let prefix = crate::data::boundary::boundary(tok, cfg.data.task)?.id;
    let tasks: Vec<crate::tasks::Task> =
        cfg.tasks().iter().map(|s| crate::tasks::spec::load(s, &cache, context)).collect::<anyhow::Result<_>>()?;
    for t in &tasks {
        crate::tasks::encode::check_fits(t, tok, prefix, context)?;
    }
    Ok(tasks)
}
