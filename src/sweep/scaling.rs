//! `DIR/scaling.json`: a scaling study's answer. Per recipe and ladder point: the sizes, the
//! training tokens, LR* over the grid (and whether it sits at an edge), the final validation
//! loss over seeds at LR*, the divergences; per recipe the law `L = E + A·x^(−α)` fitted to
//! the mean losses (x: non-embedding parameters for depth and width, training tokens for the
//! budget, sequences per step for the batch), with a bootstrap interval for α from two seeds
//! on; and every point's gap to the best recipe at that point.

use super::aggregate::{LrEdge, MethodSummary, summarize};
use super::fit::{PowerLaw, alpha_interval, fit};
use super::group::axis_label;
use super::ladder::Axis;
use super::results::RunResult;
use super::{Plan, layout};
use crate::io::json;
use crate::run::layout::{self as run_dir, RunInfo};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file's schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    pub axis: Axis,
    /// What `x` is in the fits: `non-embedding parameters`, `training tokens` or `sequences per
    /// step`.
    pub x: String,
    pub points: Vec<ScalingPoint>,
    pub fits: Vec<RecipeFit>,
}

/// One recipe at one point of the ladder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingPoint {
    pub recipe: String,
    /// The ladder's value here: layers, d, tokens per parameter or sequences per step.
    pub axis_value: f64,
    /// The fits' `x` at this point.
    pub x: f64,
    pub params: usize,
    pub params_non_embedding: usize,
    pub tokens: u64,
    pub lr_star: Option<f64>,
    /// LR* is the lowest or highest rate tried: the point's loss is an upper bound on what the
    /// recipe can reach here.
    pub lr_edge: Option<LrEdge>,
    pub mean: Option<f64>,
    pub best: Option<f64>,
    pub worst: Option<f64>,
    /// Every finished seed's final validation loss at LR*.
    pub seed_losses: Vec<f64>,
    pub diverged: usize,
    pub runs: usize,
    /// `mean` minus the lowest mean of any recipe at this point (0 for the leader).
    pub gap_to_best: Option<f64>,
    /// The run with the lowest final loss at LR* (its probes give the depth profiles).
    pub best_run: Option<String>,
    /// Each downstream task's headline over the seeds at LR* (`[eval]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::tasks::TaskScore>,
}

/// A recipe's law over the ladder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecipeFit {
    pub recipe: String,
    pub law: Option<PowerLaw>,
    /// 95 % bootstrap interval for α over the seeds.
    pub alpha_interval: Option<(f64, f64)>,
    pub points: usize,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join("scaling.json")
}

/// Builds the study's answer from a finished sweep directory and writes `scaling.json`.
pub fn write(dir: &Path, axis: Axis) -> anyhow::Result<Scaling> {
    let rows = super::results::read(dir)?;
    let plan: Plan = json::read(&layout::plan(dir))?;
    let s = build(dir, axis, &rows, &plan)?;
    json::write(&path(dir), &s)?;
    Ok(s)
}

fn build(dir: &Path, axis: Axis, rows: &[RunResult], plan: &Plan) -> anyhow::Result<Scaling> {
    let summaries = summarize(rows, &plan.group_by, &plan.tuned);
    let mut points = Vec::new();
    for m in &summaries {
        points.push(point(dir, axis, rows, plan, m)?);
    }
    points.sort_by(|a, b| a.recipe.cmp(&b.recipe).then(a.x.total_cmp(&b.x)));
    for i in 0..points.len() {
        let lead =
            points.iter().filter(|q| q.axis_value == points[i].axis_value).filter_map(|q| q.mean).reduce(f64::min);
        points[i].gap_to_best = points[i].mean.zip(lead).map(|(m, l)| m - l);
    }
    let fits = recipes(&points).into_iter().map(|r| recipe_fit(&r, &points)).collect();
    Ok(Scaling { axis, x: x_name(axis).into(), points, fits })
}

fn x_name(axis: Axis) -> &'static str {
    match axis {
        Axis::Depth | Axis::Width => "non-embedding parameters",
        Axis::Budget => "training tokens",
        Axis::Batch => "sequences per step",
    }
}

/// One summary (a recipe at a ladder point) as a point, its sizes from its runs' `run.json`.
fn point(dir: &Path, axis: Axis, rows: &[RunResult], plan: &Plan, m: &MethodSummary) -> anyhow::Result<ScalingPoint> {
    let recipe = axis_label(m.group.first().and_then(|v| v.as_ref()));
    let value = m.group.get(1).and_then(|v| v.as_ref());
    let axis_value = match value {
        Some(serde_json::Value::Object(o)) => o.get("d_model").and_then(|v| v.as_f64()),
        Some(v) => v.as_f64(),
        None => None,
    }
    .ok_or_else(|| anyhow::anyhow!("{}: the runs of `{}` have no ladder value", dir.display(), m.method))?;
    let mine: Vec<&RunResult> = rows.iter().filter(|r| plan.group_by.label(&r.axes) == m.method).collect();
    let at_star: Vec<&&RunResult> = mine
        .iter()
        .filter(|r| !r.state.is_diverged() && r.axes.get(&plan.tuned).and_then(|v| v.as_f64()) == m.lr_star)
        .filter(|r| r.final_val_loss.is_some())
        .collect();
    let best_run = at_star
        .iter()
        .min_by(|a, b| a.final_val_loss.partial_cmp(&b.final_val_loss).unwrap_or(std::cmp::Ordering::Equal));
    let info: RunInfo = mine
        .iter()
        .find_map(|r| json::read(&run_dir::info(&layout::run(dir, &r.name))).ok())
        .ok_or_else(|| anyhow::anyhow!("{}: no run of `{}` has a run.json", dir.display(), m.method))?;
    let non_embedding = info.params_non_embedding.unwrap_or(info.params);
    let tokens = (info.total_steps * info.tokens_per_step) as u64;
    let x = match axis {
        Axis::Depth | Axis::Width => non_embedding as f64,
        Axis::Budget => tokens as f64,
        Axis::Batch => axis_value,
    };
    Ok(ScalingPoint {
        recipe,
        axis_value,
        x,
        params: info.params,
        params_non_embedding: non_embedding,
        tokens,
        lr_star: m.lr_star,
        lr_edge: m.lr_edge,
        mean: m.mean,
        best: m.best,
        worst: m.worst,
        seed_losses: at_star.iter().filter_map(|r| r.final_val_loss).collect(),
        diverged: m.diverged,
        runs: m.runs,
        gap_to_best: None,
        best_run: best_run.map(|r| r.name.clone()),
        tasks: m.tasks.clone(),
    })
}

/// The recipes in the order of their first point.
fn recipes(points: &[ScalingPoint]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in points {
        if !out.contains(&p.recipe) {
            out.push(p.recipe.clone());
        }
    }
    out
}

fn recipe_fit(recipe: &str, points: &[ScalingPoint]) -> RecipeFit {
    let mine: Vec<&ScalingPoint> = points.iter().filter(|p| p.recipe == recipe).collect();
    let means: Vec<(f64, f64)> = mine.iter().filter_map(|p| Some((p.x, p.mean?))).collect();
    let seeds: Vec<(f64, Vec<f64>)> = mine.iter().map(|p| (p.x, p.seed_losses.clone())).collect();
    RecipeFit {
        recipe: recipe.into(),
        law: fit(&means),
        alpha_interval: alpha_interval(&seeds, 1000, crate::rng::fnv1a(recipe)),
        points: means.len(),
    }
}
