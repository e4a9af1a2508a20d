//! One row per run: its axes, how it ended, final and best validation loss and perplexity,
//! wall time, tokens/s, steps and time to a target loss, and summary probe values. Written as
//! `results.jsonl` and `results.csv`.

use super::config::PlannedRun;
use super::runner::run_dir_of;
use crate::train::metrics;
use crate::train::run_dir::{self, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub name: String,
    pub stage: String,
    /// Axis key → value (`model.recipe` → "peri", `optim.lr` → 0.003).
    pub axes: BTreeMap<String, serde_json::Value>,
    /// `finished`, `diverged`, `running` (interrupted) or `missing`.
    pub state: String,
    pub diverged: bool,
    pub diverged_step: Option<usize>,
    pub diverged_reason: Option<String>,
    pub final_val_loss: Option<f64>,
    pub best_val_loss: Option<f64>,
    pub final_val_ppl: Option<f64>,
    pub best_val_ppl: Option<f64>,
    pub steps: usize,
    pub wall_s: f64,
    pub tokens_per_s: Option<f64>,
    /// First validation at or below the target loss.
    pub steps_to_target: Option<usize>,
    pub time_to_target_s: Option<f64>,
    /// max |z| at the last sublayer, from the last probe.
    pub max_abs_last_layer: Option<f64>,
    pub grad_spikes: Option<usize>,
    /// Mean over sublayers of the whole-run gradient-norm CV.
    pub grad_cv: Option<f64>,
    /// Token alignment of the last hidden state, from the last probe.
    pub final_tau: Option<f64>,
}

pub fn collect(sweep_dir: &Path, runs: &[PlannedRun], target: Option<f64>) -> Vec<RunResult> {
    runs.iter().map(|r| collect_one(&run_dir_of(sweep_dir, &r.name), r, target)).collect()
}

fn collect_one(dir: &Path, r: &PlannedRun, target: Option<f64>) -> RunResult {
    let axes = r.axes.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default())).collect();
    let status = run_dir::read_status(dir).ok().flatten();
    let recs = metrics::read(&dir.join(run_dir::METRICS)).unwrap_or_default();
    let evals: Vec<&serde_json::Value> = recs.iter().filter(|x| x["type"] == "eval").collect();
    let train: Vec<&serde_json::Value> = recs.iter().filter(|x| x["type"] == "train").collect();
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64();
    let best = evals.iter().filter_map(|e| f(e, "val_loss")).filter(|v| v.is_finite()).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))));
    let hit = target.and_then(|t| evals.iter().find(|e| f(e, "val_loss").is_some_and(|v| v <= t)));
    let mut rates: Vec<f64> = train.iter().filter_map(|x| f(x, "tokens_per_s")).collect();
    rates.sort_by(f64::total_cmp);
    let last_probe = std::fs::read_to_string(dir.join(crate::probe::live::PROBES))
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()));
    let subs = last_probe.as_ref().and_then(|p| p["sublayers"].as_array().cloned()).unwrap_or_default();
    let cvs: Vec<f64> = subs.iter().filter_map(|s| s["grad_cv_run"].as_f64()).filter(|v| v.is_finite()).collect();
    let (state, diverged_step, diverged_reason) = match &status {
        Some(Status::Finished { .. }) => ("finished", None, None),
        Some(Status::Diverged { step, reason }) => ("diverged", Some(*step), Some(reason.clone())),
        Some(Status::Running { .. }) => ("running", None, None),
        None => ("missing", None, None),
    };
    let final_val = if state == "finished" { evals.last().and_then(|e| f(e, "val_loss")) } else { None };
    RunResult {
        name: r.name.clone(),
        stage: r.stage.clone(),
        axes,
        state: state.into(),
        diverged: state == "diverged",
        diverged_step,
        diverged_reason,
        final_val_loss: final_val,
        best_val_loss: best,
        final_val_ppl: final_val.map(f64::exp),
        best_val_ppl: best.map(f64::exp),
        steps: train.last().and_then(|x| x["step"].as_u64()).unwrap_or(0) as usize,
        wall_s: train.last().and_then(|x| f(x, "wall_s")).unwrap_or(0.0),
        tokens_per_s: (!rates.is_empty()).then(|| rates[rates.len() / 2]),
        steps_to_target: hit.and_then(|e| e["step"].as_u64()).map(|s| s as usize),
        time_to_target_s: hit.and_then(|e| f(e, "wall_s")),
        max_abs_last_layer: subs.last().and_then(|s| s["z"]["max_abs"].as_f64()),
        grad_spikes: last_probe.as_ref().and_then(|p| p["spikes_total"].as_u64()).map(|v| v as usize),
        grad_cv: (!cvs.is_empty()).then(|| cvs.iter().sum::<f64>() / cvs.len() as f64),
        final_tau: last_probe.as_ref().and_then(|p| p["final_tau"].as_f64()),
    }
}

/// Writes `results.jsonl` and `results.csv` atomically.
pub fn write(sweep_dir: &Path, rows: &[RunResult]) -> anyhow::Result<()> {
    let mut jsonl = String::new();
    for r in rows {
        jsonl += &serde_json::to_string(r)?;
        jsonl.push('\n');
    }
    crate::io::tensors::write_atomic(&sweep_dir.join("results.jsonl"), jsonl.as_bytes())?;
    let axis_keys: Vec<String> = rows.iter().flat_map(|r| r.axes.keys().cloned()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let cols = [
        "state", "diverged_step", "final_val_loss", "best_val_loss", "final_val_ppl", "best_val_ppl", "steps", "wall_s", "tokens_per_s",
        "steps_to_target", "time_to_target_s", "max_abs_last_layer", "grad_spikes", "grad_cv", "final_tau",
    ];
    let mut csv = format!("name,stage,{},{}\n", axis_keys.join(","), cols.join(","));
    for r in rows {
        let v = serde_json::to_value(r)?;
        let cell = |x: &serde_json::Value| match x {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(s) => s.replace(',', ";"),
            other => other.to_string(),
        };
        let axes: Vec<String> = axis_keys.iter().map(|k| cell(r.axes.get(k).unwrap_or(&serde_json::Value::Null))).collect();
        let rest: Vec<String> = cols.iter().map(|c| cell(&v[*c])).collect();
        csv += &format!("{},{},{},{}\n", r.name, r.stage, axes.join(","), rest.join(","));
    }
    crate::io::tensors::write_atomic(&sweep_dir.join("results.csv"), csv.as_bytes())
}

pub fn read(sweep_dir: &Path) -> anyhow::Result<Vec<RunResult>> {
    let p = sweep_dir.join("results.jsonl");
    let text = std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}; run the sweep first", p.display()))?;
    text.lines().map(|l| Ok(serde_json::from_str(l)?)).collect()
}
