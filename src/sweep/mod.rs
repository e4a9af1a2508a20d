//! Sweeps: a grid over any config keys (recipe, learning rate, seed, depth, width, batch,
//! budget), an optional reseed stage at each method's best learning rate, execution as
//! separate processes with resumption, and the aggregated results.
//!
//! - [`config`]: the sweep file, the grid and the plan
//! - [`layout`]: the sweep directory
//! - [`runner`]: processes, `jobs` at a time, skipping finished runs and resuming stopped ones
//! - [`slurm`]: the same runs as Slurm job arrays on a cluster
//! - [`results`]: one row per run (`results.jsonl`, `results.csv`)
//! - [`group`]: the keys a method is named by (`group_by`: one key or several)
//! - [`aggregate`]: LR*, best/worst over seeds, mean ± std, diverged counts, time to target
//! - [`ladder`]: `normlab scaling`'s ladders over depth, width, budget and batch
//! - [`fit`]: the law `L = E + A·x^(−α)` and a bootstrap interval for α
//! - [`scaling`]: a scaling study's answer, `scaling.json`
//! - [`studies`]: the papers' experiments as named studies

pub mod aggregate;
pub mod config;
pub mod fit;
pub mod group;
pub mod ladder;
pub mod layout;
pub mod results;
pub mod runner;
pub mod scaling;
pub mod slurm;
pub mod studies;

#[cfg(test)]
mod tests;

pub use config::{Plan, PlannedRun, Stage, Sweep};
pub use layout::is_sweep;

use anyhow::Context;

/// Runs the grid, then the reseed stage, on this machine, and writes the results; returns them.
/// The sweep directory is locked meanwhile: a second sweep on it is refused.
pub fn run(sweep: &Sweep, log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Vec<results::RunResult>> {
    let dir = &sweep.section.dir;
    let _lock = lock(dir)?;
    let grid = sweep.grid();
    prepare(sweep, &grid)?;
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

/// Whether any of `rows` did not end (interrupted, stopped, failed or never started).
pub fn unfinished(rows: &[results::RunResult]) -> Vec<&str> {
    rows.iter().filter(|r| !r.state.ended()).map(|r| r.name.as_str()).collect()
}

/// Before any run: the sweep directory, the sweep file as run, the plan and every run's config.
pub fn prepare(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<()> {
    let dir = &sweep.section.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    crate::io::write_atomic(&layout::sweep_file(dir), sweep.to_toml()?.as_bytes())?;
    write_plan(sweep, runs)?;
    runner::write_configs(sweep, runs)
}

fn write_plan(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<()> {
    let s = &sweep.section;
    let plan = Plan {
        group_by: s.group_by.clone(),
        tuned: s.tuned.clone(),
        target_loss: s.target_loss,
        paper: s.paper,
        runs: runs.to_vec(),
    };
    crate::io::json::write(&layout::plan(&s.dir), &plan)
}

/// The reseed runs from the finished grid, added to the plan with their configs.
pub fn plan_reseed(sweep: &Sweep, grid: &[PlannedRun]) -> anyhow::Result<Vec<PlannedRun>> {
    let Some(re) = &sweep.section.reseed else { return Ok(Vec::new()) };
    let rows = results::collect(&sweep.section.dir, grid, sweep.section.target_loss)?;
    let extra = reseed_runs(sweep, &rows, &re.seeds);
    let all: Vec<PlannedRun> = grid.iter().chain(&extra).cloned().collect();
    write_plan(sweep, &all)?;
    runner::write_configs(sweep, &extra)?;
    Ok(extra)
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
    write_plan(sweep, runs)?;
    results::write(dir, &rows)?;
    Ok(rows)
}

/// The unfinished runs, each with how it failed where the sweep saw it.
pub fn unfinished_with_causes(rows: &[results::RunResult]) -> String {
    rows.iter()
        .filter(|r| !r.state.ended())
        .map(|r| match &r.failure {
            Some(f) => format!("{} ({f})", r.name),
            None => r.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reseed runs: for each method's LR* (from the grid), one run per extra seed.
pub fn reseed_runs(sweep: &Sweep, grid_rows: &[results::RunResult], seeds: &[u64]) -> Vec<PlannedRun> {
    let s = &sweep.section;
    let summaries = aggregate::summarize(grid_rows, &s.group_by, &s.tuned);
    let mut out = Vec::new();
    for m in summaries {
        let Some(lr) = m.lr_star else { continue };
        let Some(base) = grid_rows.iter().find(|r| {
            s.group_by.covers(&r.axes)
                && s.group_by.label(&r.axes) == m.method
                && r.axes.get(&s.tuned).and_then(|v| v.as_f64()) == Some(lr)
        }) else {
            continue;
        };
        let base_axes: Vec<(String, toml::Value)> =
            sweep.grid().into_iter().find(|p| p.name == base.name).map(|p| p.axes).unwrap_or_default();
        for &seed in seeds {
            let mut axes: Vec<(String, toml::Value)> =
                base_axes.iter().filter(|(k, _)| k != "train.seed" && k != "train.sampler_seed").cloned().collect();
            axes.push(("train.seed".into(), toml::Value::Integer(seed as i64)));
            axes.push(("train.sampler_seed".into(), toml::Value::Integer(seed as i64)));
            let name = format!("reseed-{}", config::run_name(&axes));
            out.push(PlannedRun { name, stage: config::Stage::Reseed, axes });
        }
    }
    out
}
