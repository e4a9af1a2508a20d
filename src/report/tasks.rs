//! Downstream tasks in a sweep's report: each task's headline against the learning rate (as
//! KiteNorm Fig. 1a is for the loss), and whether ranking the recipes by what they can do
//! agrees with ranking them by their loss.

use super::data::RunData;
use super::figures::Figure;
use super::plot::{Chart, Series, draw_grid};
use super::{score_cell, task_keys};
use crate::sweep::aggregate::MethodSummary;
use crate::tasks::evaluate::{find_score, score_keys};
use crate::tasks::{TaskResult, TaskScore};
use std::path::Path;

/// How many combined standard errors apart two headlines must be to count as a difference
/// (≈ 95 % two-sided for independent errors; the recipes answer the same items, so it is
/// conservative).
pub const SEPARATED: f64 = 2.0;

/// One panel per task: its headline against the peak learning rate per recipe (grid runs, the
/// run of each rate that gave its loss), chance dashed; `None` when no run was evaluated.
pub fn tasks_vs_lr(dir: &Path, ms: &[MethodSummary]) -> anyhow::Result<Option<Figure>> {
    let keys = task_keys(ms);
    if keys.is_empty() {
        return Ok(None);
    }
    let mut lrs: Vec<f64> = ms.iter().flat_map(|m| m.curve.iter().map(|p| p.lr)).collect();
    lrs.sort_by(f64::total_cmp);
    lrs.dedup();
    let charts: Vec<Chart> = keys.iter().map(|(task, metric)| panel(ms, task, metric, &lrs)).collect();
    let stem = "tasks_vs_lr";
    let svg = draw_grid(&charts, 2, &dir.join(stem))?;
    let caption = "Each downstream task's headline at the end of training against the peak learning rate, per recipe \
        (grid runs: at each rate the run that gave its loss in the loss-vs-rate figure); the dashed line is chance."
        .to_string();
    Ok(Some(Figure { stem: stem.into(), caption, svg }))
}

fn panel(ms: &[MethodSummary], task: &str, metric: &str, lrs: &[f64]) -> Chart {
    let mut series: Vec<Series> = ms
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let points =
                m.curve.iter().filter_map(|p| Some((p.lr, find_score(&p.tasks, task, metric)?.value))).collect();
            Series { name: m.method.clone(), points, color: i, dashed: false, scatter: false }
        })
        .collect();
    let chance = ms.iter().flat_map(|m| &m.curve).find_map(|p| find_score(&p.tasks, task, metric)?.chance);
    if let (Some(c), Some(lo), Some(hi)) = (chance, lrs.first(), lrs.last()) {
        // Unnamed: kept out of the legend; grey is the palette's last colour.
        series.push(Series {
            name: String::new(),
            points: vec![(*lo, c), (*hi, c)],
            color: 7,
            dashed: true,
            scatter: false,
        });
    }
    let mut chart = Chart::new(task, "peak learning rate", metric, series).log(true, false);
    chart.x_ticks = lrs.to_vec();
    chart
}

/// One panel per task: its headline at each evaluation over training, a line per run, chance
/// dashed; `None` unless some run was evaluated during training (`[eval] every`), not only at
/// its end.
pub fn over_training(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let keys = run_keys(runs);
    if keys.is_empty() || runs.iter().all(|r| r.tasks.len() < 2) {
        return Ok(None);
    }
    let charts: Vec<Chart> = keys
        .iter()
        .map(|(task, metric)| {
            let mut series: Vec<Series> = runs
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let points = headlines(r)
                        .filter_map(|(step, h)| Some((step, find_score(&h, task, metric)?.value)))
                        .collect();
                    Series { name: r.legend(), points, color: i, dashed: false, scatter: false }
                })
                .collect();
            let chance = runs.iter().flat_map(headlines).find_map(|(_, h)| find_score(&h, task, metric)?.chance);
            let steps: Vec<f64> = runs.iter().flat_map(headlines).map(|(s, _)| s).collect();
            let (lo, hi) = steps.iter().fold((f64::MAX, f64::MIN), |(a, b), &s| (a.min(s), b.max(s)));
            if let Some(c) = chance.filter(|_| lo < hi) {
                series.push(Series {
                    name: String::new(),
                    points: vec![(lo, c), (hi, c)],
                    color: 7,
                    dashed: true,
                    scatter: false,
                });
            }
            Chart::new(task.as_str(), "step", metric, series)
        })
        .collect();
    let stem = "tasks_over_training";
    let svg = draw_grid(&charts, 2, &dir.join(stem))?;
    let caption = "Each downstream task's headline at every evaluation during training ([eval] every = N, and the \
        end), per run; the dashed line is chance."
        .to_string();
    Ok(Some(Figure { stem: stem.into(), caption, svg }))
}

/// Each evaluation's step and headlines.
fn headlines(r: &RunData) -> impl Iterator<Item = (f64, Vec<TaskScore>)> + '_ {
    r.tasks.iter().map(|t| (t.step as f64, t.results.iter().filter_map(TaskResult::headline).collect()))
}

/// Every (task, metric) headline of the runs' evaluations, in order of first appearance.
fn run_keys(runs: &[RunData]) -> Vec<(String, String)> {
    let all: Vec<TaskScore> = runs.iter().flat_map(headlines).flat_map(|(_, h)| h).collect();
    score_keys(&all)
}

/// A run's last task evaluation as a table section: every metric with its standard error,
/// the accuracy by chance, and the categories.
pub fn last_evaluation(r: &RunData) -> Option<(String, String)> {
    let last = r.tasks.last()?;
    let mut t = String::from("| task | n | metric | value | chance |\n|---|---|---|---|---|\n");
    for res in &last.results {
        for (m, v) in &res.metrics {
            let cell = score_cell(&TaskScore {
                task: String::new(),
                metric: m.clone(),
                value: v.value,
                stderr: v.stderr,
                chance: None,
            });
            let chance = res.chance.filter(|_| m.starts_with("acc")).map_or("–".into(), |c| format!("{c:.3}"));
            t += &format!("| {} | {} | {m} | {cell} | {chance} |\n", res.task, res.n);
        }
        for (c, v) in &res.categories {
            t += &format!("| {} / {c} | | acc | {:.3} | |\n", res.task, v.value);
        }
    }
    Some((format!("Downstream tasks at step {} ({:.1} s)", last.step, last.seconds), t))
}

/// Findings: how far above chance the best recipe's headline is, and each task by which the
/// recipes rank differently than by their loss beyond the standard errors (or that none does).
pub fn findings(ms: &[MethodSummary]) -> Vec<String> {
    let keys = task_keys(ms);
    if keys.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(m) = ms.first() {
        out.extend(keys.iter().filter_map(|(t, k)| above_chance(&m.method, find_score(&m.tasks, t, k)?)));
    }
    let mut agree = Vec::new();
    for (task, metric) in &keys {
        match inversions(ms, task, metric) {
            v if v.is_empty() => agree.push(format!("{task} {metric}")),
            v => out.push(format!(
                "**By {task} {metric} the recipes rank differently than by loss**: {} (each pair more than {SEPARATED} \
                    standard errors apart).",
                v.join("; ")
            )),
        }
    }
    if !agree.is_empty() {
        out.push(format!(
            "By {} no recipe with a higher loss beats one with a lower loss by more than {SEPARATED} standard errors: \
                the ranking by what the models can do agrees with the ranking by loss, as far as these tasks can tell.",
            agree.join(", ")
        ));
    }
    out
}

/// `kitenorm's sotu_words acc_norm is 0.463 ± 0.029, 7.3 standard errors above chance (0.25).`
fn above_chance(method: &str, s: &TaskScore) -> Option<String> {
    let (c, se) = (s.chance?, s.stderr.filter(|&x| x > 0.0)?);
    let z = (s.value - c) / se;
    let verdict = if z >= 3.0 { "above chance" } else { "not yet 3 standard errors above chance" };
    Some(format!(
        "The best recipe ({method})'s {} {} is {}, {z:.1} standard errors from chance ({c:.2}): {verdict}.",
        s.task,
        s.metric,
        score_cell(s)
    ))
}

/// Pairs (better loss, worse loss) whose headlines say the opposite beyond [`SEPARATED`]
/// combined standard errors, in words.
fn inversions(ms: &[MethodSummary], task: &str, metric: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in ms.iter().enumerate() {
        for b in &ms[i + 1..] {
            let (Some(la), Some(lb)) = (a.mean, b.mean) else { continue };
            let (Some(sa), Some(sb)) = (find_score(&a.tasks, task, metric), find_score(&b.tasks, task, metric)) else {
                continue;
            };
            let gap = if sa.higher_is_better() { sb.value - sa.value } else { sa.value - sb.value };
            let se = (sa.stderr.unwrap_or(0.0).powi(2) + sb.stderr.unwrap_or(0.0).powi(2)).sqrt();
            if la < lb && se > 0.0 && gap > SEPARATED * se {
                out.push(format!(
                    "{} ({}) beats {} ({}) though its loss is higher ({lb:.3} vs {la:.3})",
                    b.method,
                    score_cell(sb),
                    a.method,
                    score_cell(sa)
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::aggregate::MethodSummary;

    fn method(name: &str, loss: f64, acc: f64, se: f64) -> MethodSummary {
        let tasks = vec![TaskScore {
            task: "t".into(),
            metric: "acc".into(),
            value: acc,
            stderr: Some(se),
            chance: Some(0.25),
        }];
        MethodSummary::for_tests(name, loss, tasks)
    }

    /// b has the higher loss and the higher accuracy: 0.60 − 0.40 = 0.20 > 2·√(0.05² + 0.05²)
    /// = 0.141 is an inversion; with errors of 0.08 (2·0.113 = 0.226 > 0.20) it is not. The
    /// best recipe's 0.40 ± 0.05 is (0.40 − 0.25) / 0.05 = 3.0 errors above chance.
    #[test]
    fn rankings_that_disagree_beyond_the_errors_are_found() {
        let ms = vec![method("a", 2.0, 0.40, 0.05), method("b", 2.1, 0.60, 0.05)];
        let f = findings(&ms);
        assert!(f[0].contains("3.0 standard errors from chance (0.25): above chance"), "{f:?}");
        assert!(f[1].contains("b (0.600 ± 0.050) beats a (0.400 ± 0.050)"), "{f:?}");
        let ms = vec![method("a", 2.0, 0.40, 0.08), method("b", 2.1, 0.60, 0.08)];
        let f = findings(&ms);
        assert!(f.last().unwrap().contains("agrees with the ranking by loss"), "{f:?}");
    }
}
