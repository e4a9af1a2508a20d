//! The plan (`plan.json`: every run of the sweep and how its results are grouped) and the runs
//! added to it after the grid: the reseed stage's at each method's LR*, and the rounds of
//! [`super::separate`].

use super::config::{self, Plan, PlannedRun, Sweep};
use super::{aggregate, layout, results, runner};

/// Writes `plan.json` with `runs`.
pub fn write_plan(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<()> {
    let s = &sweep.section;
    let plan = Plan {
        group_by: s.group_by.clone(),
        tuned: s.tuned.clone(),
        target_loss: s.target_loss,
        paper: s.paper,
        finetune_tuned: s.finetune.as_ref().map(|f| f.tuned.clone()),
        finetune_paper: s.finetune.as_ref().and_then(|f| f.paper.clone()),
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

/// The reseed runs: for each method's LR* (from the grid), one run per extra seed.
pub fn reseed_runs(sweep: &Sweep, grid_rows: &[results::RunResult], seeds: &[u64]) -> Vec<PlannedRun> {
    runs_at_lr_star(sweep, grid_rows, seeds, config::Stage::Reseed, |_| true)
}

/// For each `wanted` method's LR* (from the grid), one run per seed of `stage`, named
/// `STAGE-` and the run's axes.
pub(super) fn runs_at_lr_star(
    sweep: &Sweep,
    grid_rows: &[results::RunResult],
    seeds: &[u64],
    stage: config::Stage,
    wanted: impl Fn(&str) -> bool,
) -> Vec<PlannedRun> {
    let s = &sweep.section;
    let summaries = aggregate::summarize(grid_rows, &s.group_by, &s.tuned);
    let mut out = Vec::new();
    for m in summaries.into_iter().filter(|m| wanted(&m.method)) {
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
            let name = format!("{stage}-{}", config::run_name(&axes));
            out.push(PlannedRun { name, stage, axes });
        }
    }
    out
}
