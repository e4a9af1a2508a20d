//! Sweeps: a grid over any config keys (recipe, learning rate, seed, depth, width, batch,
//! budget), an optional reseed stage at each method's best learning rate, execution as
//! separate processes with resumption, and the aggregated results.
//!
//! - [`config`]: the sweep file, the grid and the plan
//! - [`layout`]: the sweep directory
//! - [`plan`]: `plan.json` and the runs added after the grid (the reseed stage's)
//! - [`finetune`]: the fine-tuning stage: the best pretraining runs fine-tuned on conversations
//! - [`runner`]: processes, `jobs` at a time, skipping finished runs and resuming stopped ones
//! - [`slurm`]: the same runs as Slurm job arrays on a cluster
//! - [`results`]: one row per run (`results.jsonl`, `results.csv`)
//! - [`group`]: the keys a method is named by (`group_by`: one key or several)
//! - [`aggregate`]: LR*, best/worst over seeds, mean ± std, diverged counts, time to target
//! - [`significance`]: whether adjacent recipes differ beyond their seeds' noise (Welch's t)
//! - [`separate`]: seeds added to tied adjacent recipes until they separate or a budget is spent
//! - [`ladder`]: `normlab scaling`'s ladders over depth, width, budget and batch
//! - [`fit`]: the law `L = E + A·x^(−α)` and a bootstrap interval for α
//! - [`scaling`]: a scaling study's answer, `scaling.json`
//! - [`studies`]: the papers' experiments as named studies
//! - [`tracking`]: the sweep as a parent run on its runs' tracking server

pub mod aggregate;
pub mod config;
pub mod finetune;
pub mod fit;
pub mod group;
pub mod ladder;
pub mod layout;
pub mod plan;
pub mod results;
pub mod runner;
pub mod scaling;
pub mod separate;
pub mod significance;
pub mod slurm;
pub mod studies;
pub mod tracking;

#[cfg(test)]
mod tests;

pub use config::{Plan, PlannedRun, Stage, Sweep};
pub use layout::is_sweep;
pub use plan::{plan_reseed, reseed_runs};
pub use results::{unfinished, unfinished_with_causes};

use anyhow::Context;

/// Runs the grid, then the reseed stage, then the fine-tuning stage, on this machine, and writes the results; returns them.
/// The sweep directory is locked meanwhile: a second sweep on it is refused.
pub fn run(sweep: &Sweep, log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Vec<results::RunResult>> {
    let dir = &sweep.section.dir;
    let _lock = lock(dir)?;
    let grid = sweep.grid();
    prepare(sweep, &grid)?;
    tracking::open(sweep, log)?;
    log(&format!("sweep {}: {} runs in the grid, {} at a time", dir.display(), grid.len(), sweep.section.jobs));
    let mut failures = runner::execute(sweep, &grid, log)?;
    let mut all = grid.clone();
    if sweep.section.reseed.is_some() {
        let extra = plan_reseed(sweep, &grid)?;
        if !extra.is_empty() {
            log(&format!("reseed stage: {} runs at each method's best {}", extra.len(), sweep.section.tuned));
            failures.extend(runner::execute(sweep, &extra, log)?);
        }
        all.extend(extra);
        separate::add_seeds(sweep, &mut all, &mut failures, log)?;
    }
    if sweep.section.finetune.is_some() {
        let sft = finetune::plan(sweep, &all)?;
        all.extend(sft.iter().cloned());
        plan::write_plan(sweep, &all)?;
        runner::write_configs(sweep, &sft)?;
        log(&format!("fine-tuning stage: {} runs from the pretrained ones", sft.len()));
        failures.extend(runner::execute(sweep, &sft, log)?);
    }
    finish(sweep, &all, &failures, log)
}

/// Takes the sweep directory's lock (creating the directory), or says who holds it.
pub fn lock(dir: &std::path::Path) -> anyhow::Result<crate::io::lock::DirLock> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    match crate::io::lock::try_lock(dir)? {
        Ok(l) => Ok(l),
        Err(holder) => anyhow::bail!(
            "the sweep in {} is being run right now by another normlab process ({holder}); wait for it to finish or \
                stop it, or choose another sweep.dir (--set sweep.dir=...)",
            dir.display()
        ),
    }
}

/// Before any run: the sweep directory, the sweep file as run, the plan and every run's config.
pub fn prepare(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<()> {
    let dir = &sweep.section.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    crate::io::write_atomic(&layout::sweep_file(dir), sweep.to_toml()?.as_bytes())?;
    plan::write_plan(sweep, runs)?;
    runner::write_configs(sweep, runs)
}

/// Collects and writes the results of `runs` (the same for every executor), each run that
/// failed here with how it ended, and names the runs that did not finish.
pub fn finish(
    sweep: &Sweep,
    runs: &[PlannedRun],
    failures: &runner::Failures,
    log: &dyn Fn(&str),
) -> anyhow::Result<Vec<results::RunResult>> {
    let dir = &sweep.section.dir;
    let mut rows = results::collect(dir, runs, sweep.section.target_loss)?;
    for r in rows.iter_mut().filter(|r| !r.state.ended()) {
        r.failure = failures.get(&r.name).cloned();
    }
    if !unfinished(&rows).is_empty() {
        log(&format!(
            "{} runs did not finish (see {}): {}; run the sweep again to retry them",
            unfinished(&rows).len(),
            layout::logs(dir).display(),
            unfinished_with_causes(&rows)
        ));
    }
    plan::write_plan(sweep, runs)?;
    results::write(dir, &rows)?;
    Ok(rows)
}
