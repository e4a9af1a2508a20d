//! `normlab sweep`, `report` and the built-in studies (`compare`, `textnorm`).

use super::log;
use crate::report;
use crate::sweep::config::Executor;
use crate::sweep::slurm::{self, SubmitOptions};
use crate::sweep::{self, Sweep, layout};
use std::path::Path;

/// Runs a sweep on this machine; a stop signal stops its runs at a step's end (resumable by
/// running the sweep again).
fn run_sweep(s: &mut Sweep, jobs: Option<usize>) -> anyhow::Result<Vec<sweep::results::RunResult>> {
    if let Some(j) = jobs {
        anyhow::ensure!(j > 0, "--jobs must be > 0");
        s.section.jobs = j;
    }
    crate::stop::install();
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
    if let Some(sig) = crate::stop::requested() {
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
    crate::stop::install();
    errln!("{}", slurm::run_one(dir, index)?);
    Ok(crate::stop::requested().map_or(0, |s| s.exit_code()))
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
    if crate::stop::requested().is_none() {
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
