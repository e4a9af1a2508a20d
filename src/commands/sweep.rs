//! `normlab sweep`, `report` and the built-in studies (`compare`, `textnorm`, `scaling`).

use super::log;
use crate::report;
use crate::sweep::config::Executor;
use crate::sweep::ladder::Axis;
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
    let how = if crate::stop::requested().is_some() { "stopped after" } else { "done in" };
    errln!(
        "sweep {how} {minutes:.1} min: {} runs; results in {}",
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
        "{} of {} runs did not finish: {}; their logs are in {}; run the same command again to retry them",
        failed.len(),
        rows.len(),
        sweep::unfinished_with_causes(rows),
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
    if let Some(f) = &s.section.finetune {
        f.check(s.section.executor)?;
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
    let pretrained = sweep::finetune::pretraining(&rows);
    let ms = sweep::aggregate::summarize(&pretrained, &s.section.group_by, &s.section.tuned);
    outln!("{}", report::summary_table(&ms));
    if let Some(f) = &s.section.finetune {
        let sft = sweep::finetune::summarize(&rows, &s.section.group_by, &f.tuned);
        let sft_rows = crate::report::finetune::SftRows { rows: &rows, group_by: &s.section.group_by, tuned: &f.tuned };
        if let Some(((heading, table), _)) =
            crate::report::finetune::sweep_section(&ms, &sft, &sft_rows, f.paper.as_deref())
        {
            outln!("{heading}\n{table}");
        }
    }
    if how.report {
        self::report(&s.section.dir)?;
    }
    sweep::tracking::finish(&s, &log)?;
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

/// `normlab report DIR`: the report, then, for a run or sweep already on a tracking server
/// (`DIR/tracking.json` names its run), the report's files sent there with anything the server
/// still lacks.
pub fn report_command(dir: &Path) -> anyhow::Result<i32> {
    report(dir)?;
    match crate::track::TrackState::read(dir)? {
        Some(state) if state.run_id.is_some() => super::track::track(dir, Some(&state.target)),
        _ => Ok(0),
    }
}

/// The flags every built-in study takes (`compare`, `textnorm`, `studies`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct StudyArgs {
    /// The GPU- or cluster-scale version of the study.
    #[arg(long)]
    pub full: bool,
    /// Edit the study, e.g. `--set sweep.dir=runs/cmp2 --set train.steps=300`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Runs at a time (overrides sweep.jobs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Retrain runs made from another config than the study now gives.
    #[arg(long)]
    pub rerun_changed: bool,
}

pub fn compare(recipes: &[String], a: &StudyArgs) -> anyhow::Result<i32> {
    let mut s = Sweep::compare(a.full, recipes, &a.sets)?;
    s.rerun_changed = a.rerun_changed;
    study(s, a.jobs)
}

pub fn textnorm(recipes: &[String], a: &StudyArgs) -> anyhow::Result<i32> {
    let mut s = Sweep::textnorm(a.full, recipes, &a.sets)?;
    s.rerun_changed = a.rerun_changed;
    let dir = s.section.dir.clone();
    let code = study(s, a.jobs)?;
    if let Some(best) = best_pairs_run(&dir) {
        outln!("best exact match on the generated test pairs: {}", best.display());
        outln!("serve it: normlab serve --checkpoint \"{}\"", best.display());
    }
    Ok(code)
}

/// The finished run of a pairs sweep with the highest exact match on its first test set.
fn best_pairs_run(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let runs = std::fs::read_dir(dir.join("runs")).ok()?;
    let em = |run: &std::path::Path| -> Option<f64> {
        let e: crate::run::pairs_eval::PairsEval = crate::io::json::read(&crate::run::layout::pairs_eval(run)).ok()?;
        Some(e.sets.first()?.overall.exact_match)
    };
    runs.flatten()
        .map(|e| e.path())
        .filter_map(|p| Some((em(&p)?, p)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p)| p)
}

/// `normlab studies`: every study with its claim, commands and the miniature's measured time;
/// with a name, that study (its miniature, or with `full` the paper-scale version) and its
/// report.
pub fn studies(name: Option<&str>, a: &StudyArgs) -> anyhow::Result<i32> {
    let Some(name) = name else {
        outln!("{}", studies_list());
        return Ok(0);
    };
    let mut s = Sweep::study(name, a.full, &a.sets)?;
    s.rerun_changed = a.rerun_changed;
    study(s, a.jobs)
}

fn studies_list() -> String {
    use crate::sweep::studies::{COMMANDS, STUDIES};
    let mut t = String::from("The papers' experiments (configs/studies/; docs/studies.md):\n");
    for s in STUDIES {
        let full = match s.full {
            Some(_) => format!("normlab studies {} --full", s.name),
            None => "normlab compare --full".into(),
        };
        let time = s.minutes.map_or("not timed".into(), |m| format!("{m:.1} min on 2 cores"));
        t += &format!(
            "\n{} — {}\n  claim: {}\n  miniature: normlab studies {} ({time})\n  paper scale: {full}\n",
            s.name, s.figure, s.claim, s.name
        );
    }
    for (figure, claim, mini, full) in COMMANDS {
        t += &format!("\n{figure}\n  claim: {claim}\n  miniature: {mini}\n  paper scale: {full}\n");
    }
    t
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
    sweep::tracking::finish(&s, &log)?;
    sweep_exit(&s, &rows)
}

/// How `normlab scaling` runs, from its flags.
#[derive(clap::Args, Debug)]
pub struct ScalingArgs {
    /// What the ladder varies: depth, width, budget (tokens per parameter) or batch.
    #[arg(long, value_enum, default_value = "depth")]
    pub axis: Axis,
    /// Recipes to compare (presets or names), e.g. `--recipes kitenorm,gpt2-pre`.
    #[arg(long, value_delimiter = ',')]
    pub recipes: Vec<String>,
    /// `--full`: the paper's ladders at Table 1's settings (configs/sweeps/scaling-full.toml),
    /// for GPUs or a Slurm cluster.
    #[command(flatten)]
    pub study: StudyArgs,
    /// Where the runs execute (default: this machine).
    #[arg(long, value_enum)]
    pub executor: Option<Executor>,
    /// With `--executor slurm`: submit and return; run the same command again once the jobs
    /// are done to write scaling.json and the report.
    #[arg(long)]
    pub detach: bool,
}

/// `normlab scaling`: the ladder with a learning-rate grid at every point, then
/// `DIR/scaling.json` and the report, its table and findings printed.
pub fn scaling(a: ScalingArgs) -> anyhow::Result<i32> {
    let mut s = Sweep::scaling(a.axis, a.study.full, &a.recipes, &a.study.sets)?;
    s.rerun_changed = a.study.rerun_changed;
    if let Some(e) = a.executor {
        s.section.executor = e;
    }
    let rows = match s.section.executor {
        Executor::Local => run_sweep(&mut s, a.study.jobs)?,
        Executor::Slurm => match slurm::submit(&mut s, SubmitOptions { detach: a.detach, dry_run: false }, &log)? {
            Some(rows) => rows,
            None => return Ok(0),
        },
    };
    if crate::stop::requested().is_none() {
        let dir = &s.section.dir;
        let sc = sweep::scaling::write(dir, a.axis)?;
        let r = report::generate(dir)?;
        outln!("{}", r.table);
        outln!("Findings:\n");
        for f in &r.findings {
            outln!("- {f}");
        }
        errln!("{} points; {}; report: {}", sc.points.len(), sweep::scaling::path(dir).display(), r.html.display());
    }
    sweep::tracking::finish(&s, &log)?;
    sweep_exit(&s, &rows)
}
