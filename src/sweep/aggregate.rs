//! Per method (recipe): the best learning rate LR* (lowest final validation loss among the
//! grid's non-diverged runs), whether it lies at an end of the grid (then the true optimum may
//! lie beyond it), then over every seed at LR* the best and worst final value, the mean and
//! the sample standard deviation (KiteNorm Fig. 1b), the diverged count (diverged runs are
//! excluded from every value and counted here), and steps/time to the target loss at LR*
//! (BHyT D.1). Methods are ranked by the mean over seeds, not by their luckiest seed.
//!
//! Downstream tasks follow the same runs: at LR*, each task's headline averaged over the seeds,
//! with its standard error over items (averaged over the seeds: the seeds answer the same
//! items, so their errors are not independent and the average is the honest bar); per rate of
//! the grid, the headline of the run that gave the rate its loss.

use super::config::Stage;
use super::group::GroupBy;
use super::results::RunResult;
use crate::stats::sample_std;
use crate::tasks::TaskScore;
use serde::Serialize;

/// LR* at an end of the learning-rate grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LrEdge {
    Lowest,
    Highest,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LrPoint {
    pub lr: f64,
    /// Lowest final validation loss at this LR among the grid's non-diverged runs.
    pub val_loss: Option<f64>,
    pub runs: usize,
    pub diverged: usize,
    /// The downstream headlines of the run that gave `val_loss`.
    pub tasks: Vec<TaskScore>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MethodSummary {
    pub method: String,
    /// The value of each `group_by` key (in order), as the runs give it.
    pub group: Vec<Option<serde_json::Value>>,
    pub lr_star: Option<f64>,
    /// Set when LR* is the lowest or highest rate of a grid of several.
    pub lr_edge: Option<LrEdge>,
    pub best: Option<f64>,
    pub worst: Option<f64>,
    /// Mean over the seeds at LR*: the ranking key.
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1) over the seeds at LR*; `None` with one seed.
    pub std: Option<f64>,
    /// Non-diverged runs at LR* (all seeds).
    pub seeds_at_lr_star: usize,
    pub runs: usize,
    pub diverged: usize,
    pub diverged_runs: Vec<String>,
    pub curve: Vec<LrPoint>,
    pub steps_to_target: Option<usize>,
    pub time_to_target_s: Option<f64>,
    /// Each downstream task's headline over the seeds at LR* (see the module's note).
    pub tasks: Vec<TaskScore>,
    /// Every finished seed's final validation loss at LR* (what the mean is over).
    pub finals: Vec<f64>,
    /// Every finished seed's headline of each task at LR*, in the order of `tasks`.
    pub task_finals: Vec<Vec<f64>>,
    /// SpikeScore averaged over the seeds at LR* that report one (runs of 128 steps or more).
    pub spike_score: Option<f64>,
    /// Rollbacks over every run of the method.
    pub rollbacks: usize,
}

/// Summaries sorted by the mean over seeds at LR*, ties by `best` (methods without a finished
/// run last).
pub fn summarize(rows: &[RunResult], group_by: &GroupBy, tuned: &str) -> Vec<MethodSummary> {
    let mut methods: Vec<String> = Vec::new();
    for r in rows {
        let m = group_by.label(&r.axes);
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    let mut out: Vec<MethodSummary> =
        methods.into_iter().map(|m| summarize_method(rows, &m, group_by, tuned)).collect();
    out.sort_by(|a, b| match (a.mean, b.mean) {
        (Some(x), Some(y)) => x.total_cmp(&y).then(a.best.unwrap_or(x).total_cmp(&b.best.unwrap_or(y))),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.method.cmp(&b.method),
    });
    out
}

fn summarize_method(rows: &[RunResult], method: &str, group_by: &GroupBy, tuned: &str) -> MethodSummary {
    let mine: Vec<&RunResult> = rows.iter().filter(|r| group_by.label(&r.axes) == method).collect();
    let lr_of = |r: &RunResult| r.axes.get(tuned).and_then(|v| v.as_f64());
    let curve = lr_curve(&mine, lr_of);
    let lr_star =
        curve.iter().filter_map(|p| Some((p.val_loss?, p.lr))).min_by(|a, b| a.0.total_cmp(&b.0)).map(|p| p.1);
    // Every finished seed at LR* (all finished runs when no run has a rate).
    let at_star: Vec<(f64, &RunResult)> = mine
        .iter()
        .filter(|r| !r.state.is_diverged() && (lr_star.is_none() || lr_of(r) == lr_star))
        .filter_map(|r| Some((r.final_val_loss?, *r)))
        .collect();
    // A sweep without a rate axis summarises every finished run of the method at the one rate.
    let summarised = lr_star.is_some() || curve.is_empty();
    let vals: Vec<f64> = if summarised { at_star.iter().map(|(v, _)| *v).collect() } else { Vec::new() };
    let n = vals.len();
    let best_run = at_star.iter().filter(|_| summarised).min_by(|a, b| a.0.total_cmp(&b.0)).map(|p| p.1);
    let seeds: Vec<&RunResult> = if summarised { at_star.iter().map(|p| p.1).collect() } else { Vec::new() };
    let tasks = seed_mean(&seeds);
    let diverged: Vec<&&RunResult> = mine.iter().filter(|r| r.state.is_diverged()).collect();
    MethodSummary {
        method: method.to_string(),
        group: group_by.keys().iter().map(|k| mine.first().and_then(|r| r.axes.get(k).cloned())).collect(),
        lr_star,
        lr_edge: lr_edge(lr_star, &curve),
        best: vals.iter().copied().reduce(f64::min),
        worst: vals.iter().copied().reduce(f64::max),
        mean: (n > 0).then(|| vals.iter().sum::<f64>() / n as f64),
        std: (n > 1).then(|| sample_std(&vals)),
        seeds_at_lr_star: n,
        runs: mine.len(),
        diverged: diverged.len(),
        diverged_runs: diverged.iter().map(|r| format!("{} (step {})", r.name, r.diverged_step.unwrap_or(0))).collect(),
        curve,
        steps_to_target: best_run.and_then(|r| r.steps_to_target),
        time_to_target_s: best_run.and_then(|r| r.time_to_target_s),
        task_finals: seed_values(&seeds, &tasks),
        tasks,
        spike_score: crate::stats::mean_of(seeds.iter().filter_map(|r| r.spike_score)),
        rollbacks: mine.iter().map(|r| r.rollbacks).sum(),
        finals: vals,
    }
}

/// Each task of `tasks` (as [`seed_mean`] gives them): its headline in every run.
fn seed_values(runs: &[&RunResult], tasks: &[TaskScore]) -> Vec<Vec<f64>> {
    tasks
        .iter()
        .map(|t| {
            runs.iter()
                .filter_map(|r| r.tasks.iter().find(|s| s.task == t.task && s.metric == t.metric).map(|s| s.value))
                .collect()
        })
        .collect()
}

/// Each task's headline averaged over `runs`, its standard error the runs' average.
fn seed_mean(runs: &[&RunResult]) -> Vec<TaskScore> {
    let Some(first) = runs.first() else { return Vec::new() };
    first
        .tasks
        .iter()
        .filter_map(|t| {
            let all: Vec<&TaskScore> =
                runs.iter().filter_map(|r| r.tasks.iter().find(|s| s.task == t.task && s.metric == t.metric)).collect();
            (all.len() == runs.len()).then(|| {
                let n = all.len() as f64;
                let se: Option<Vec<f64>> = all.iter().map(|s| s.stderr).collect();
                TaskScore {
                    task: t.task.clone(),
                    metric: t.metric.clone(),
                    value: all.iter().map(|s| s.value).sum::<f64>() / n,
                    stderr: se.map(|v| v.iter().sum::<f64>() / n),
                    chance: t.chance,
                }
            })
        })
        .collect()
}

/// Per learning rate of the grid (ascending), the lowest final loss of its non-diverged grid
/// runs, and its run and divergence counts.
fn lr_curve(mine: &[&RunResult], lr_of: impl Fn(&RunResult) -> Option<f64>) -> Vec<LrPoint> {
    let mut lrs: Vec<f64> = mine.iter().filter_map(|r| lr_of(r)).collect();
    lrs.sort_by(f64::total_cmp);
    lrs.dedup();
    lrs.iter()
        .map(|&lr| {
            let at: Vec<&&RunResult> = mine.iter().filter(|r| r.stage == Stage::Grid && lr_of(r) == Some(lr)).collect();
            let best = at
                .iter()
                .filter(|r| !r.state.is_diverged())
                .filter_map(|r| Some((r.final_val_loss?, r)))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            LrPoint {
                lr,
                val_loss: best.map(|b| b.0),
                runs: at.len(),
                diverged: at.iter().filter(|r| r.state.is_diverged()).count(),
                tasks: best.map(|b| b.1.tasks.clone()).unwrap_or_default(),
            }
        })
        .collect()
}

/// Whether LR* is the lowest or highest rate of a grid of several.
fn lr_edge(lr_star: Option<f64>, curve: &[LrPoint]) -> Option<LrEdge> {
    match (lr_star, curve.first(), curve.last()) {
        (Some(star), Some(lo), Some(hi)) if lo.lr < hi.lr && star == lo.lr => Some(LrEdge::Lowest),
        (Some(star), Some(lo), Some(hi)) if lo.lr < hi.lr && star == hi.lr => Some(LrEdge::Highest),
        _ => None,
    }
}

#[cfg(test)]
impl MethodSummary {
    /// A method of one finished seed at LR* 1e-3 with final loss `loss` and downstream
    /// headlines `tasks` (for the reports' tests).
    pub fn for_tests(method: &str, loss: f64, tasks: Vec<TaskScore>) -> Self {
        MethodSummary {
            method: method.into(),
            group: Vec::new(),
            lr_star: Some(1e-3),
            lr_edge: None,
            best: Some(loss),
            worst: Some(loss),
            mean: Some(loss),
            std: None,
            seeds_at_lr_star: 1,
            runs: 1,
            diverged: 0,
            diverged_runs: Vec::new(),
            curve: Vec::new(),
            steps_to_target: None,
            time_to_target_s: None,
            tasks,
            finals: vec![loss],
            task_finals: Vec::new(),
            spike_score: None,
            rollbacks: 0,
        }
    }
}
