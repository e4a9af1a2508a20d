//! One row per run: its axes, how it ended, final and best validation loss and perplexity,
//! wall time, tokens/s, steps and time to a target loss, and summary probe values. Written as
//! `results.jsonl` and `results.csv`.

use super::config::{PlannedRun, Stage};
use super::layout;
use crate::io::jsonl;
use crate::probe::ProbeRecord;
use crate::run::layout::{self as run_dir, Status};
use crate::run::metrics::Metrics;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// How a run of a sweep stands: its [`Status`], or `missing` when it has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Finished,
    Diverged,
    /// Interrupted part-way (resumable).
    Running,
    /// Stopped by a signal with a checkpoint (resumable).
    Stopped,
    /// Never started, or its directory holds no run.
    Missing,
}

impl RunState {
    pub fn of(status: Option<&Status>) -> Self {
        match status {
            Some(Status::Finished { .. }) => Self::Finished,
            Some(Status::Diverged { .. }) => Self::Diverged,
            Some(Status::Running { .. }) => Self::Running,
            Some(Status::Stopped { .. }) => Self::Stopped,
            None => Self::Missing,
        }
    }

    /// Finished or diverged: a result either way.
    pub fn ended(self) -> bool {
        matches!(self, Self::Finished | Self::Diverged)
    }

    pub fn is_diverged(self) -> bool {
        self == Self::Diverged
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub name: String,
    pub stage: Stage,
    /// Axis key → value (`model.recipe` → "peri", `optim.lr` → 0.003).
    pub axes: BTreeMap<String, serde_json::Value>,
    pub state: RunState,
    pub diverged_step: Option<usize>,
    pub diverged_reason: Option<String>,
    pub final_val_loss: Option<f64>,
    /// Mean training loss over a finished run's last (up to) 10 steps: a fine-tuning run's
    /// "SFT train loss" (the BHyT paper's Table 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_train_loss: Option<f64>,
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
    /// SpikeScore at the run's last step (OLMo-core's; `crate::run::spike_score`).
    #[serde(default)]
    pub spike_score: Option<f64>,
    /// Rollbacks the run made (`[train.rollback]`).
    #[serde(default)]
    pub rollbacks: usize,
    /// Mean over sublayers of the whole-run gradient-norm CV.
    pub grad_cv: Option<f64>,
    /// Token alignment of the last hidden state, from the last probe.
    pub final_tau: Option<f64>,
    /// Why the run did not finish, as the sweep saw it end (its last `error:` line); only for
    /// runs that failed in this sweep's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Each downstream task's headline at the run's last evaluation (`[eval]`), for a
    /// finished run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::tasks::TaskScore>,
    /// A mixture-of-experts run's routing over its last steps (empty for a dense run).
    #[serde(flatten)]
    pub routing: Routing,
}

/// A MoE run's routing over its last (up to) [`ROUTING_STEPS`] steps, from `metrics.jsonl`'s
/// `moe` records: the load's coefficient of variation over the experts (mean over the MoE
/// layers and the steps), the experts no token reached (summed over the layers, mean over the
/// steps), the balancing loss before its coefficient (mean over the steps) and the pairs dropped
/// over capacity (summed over the layers, mean over the steps).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Routing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_load_cv: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_dead: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_balance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_dropped: Option<f64>,
}

/// The steps at a run's end its [`Routing`] averages over.
pub const ROUTING_STEPS: usize = 20;

impl Routing {
    /// The routing of `m`'s last steps that recorded one (none: a dense run).
    pub fn of(m: &Metrics) -> Self {
        let records: Vec<&crate::run::metrics::MoeStepRecord> =
            m.train.iter().filter_map(|t| t.moe.as_deref()).collect();
        let tail = &records[records.len().saturating_sub(ROUTING_STEPS)..];
        if tail.is_empty() {
            return Self::default();
        }
        let per_step = |f: &dyn Fn(&crate::run::metrics::MoeStepRecord) -> f64| {
            crate::stats::mean_of(tail.iter().map(|r| f(r)).filter(|v| v.is_finite()))
        };
        Routing {
            moe_load_cv: per_step(&|r| crate::stats::mean_of(r.load_cv.iter().copied()).unwrap_or(f64::NAN)),
            moe_dead: per_step(&|r| r.dead.iter().sum::<usize>() as f64),
            moe_balance: per_step(&|r| r.balance),
            moe_dropped: per_step(&|r| r.dropped.iter().sum::<usize>() as f64),
        }
    }
}

/// One row per run; a corrupt record in any run is an error naming its file and line.
pub fn collect(sweep_dir: &Path, runs: &[PlannedRun], target: Option<f64>) -> anyhow::Result<Vec<RunResult>> {
    runs.iter().map(|r| collect_one(&layout::run(sweep_dir, &r.name), r, target)).collect()
}

/// The last record of a run's `probes.jsonl`, if it has one.
fn last_probe(run: &Path) -> anyhow::Result<Option<ProbeRecord>> {
    Ok(jsonl::read_if_exists::<ProbeRecord>(&run_dir::probes(run))?.pop())
}

/// The mean training loss of the last (up to) 10 steps.
fn last_train_mean(m: &Metrics) -> Option<f64> {
    let tail = &m.train[m.train.len().saturating_sub(10)..];
    let losses: Vec<f64> = tail.iter().map(|t| t.loss).filter(|l| l.is_finite()).collect();
    (!losses.is_empty()).then(|| losses.iter().sum::<f64>() / losses.len() as f64)
}

/// A value that may be NaN (written as null) as an option.
fn finite_or_none(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

fn collect_one(dir: &Path, r: &PlannedRun, target: Option<f64>) -> anyhow::Result<RunResult> {
    let axes = r.axes.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default())).collect();
    let status = run_dir::read_status(dir).ok().flatten();
    let m = Metrics::read(&run_dir::metrics(dir))?;
    let best = best_val_loss(&m);
    let hit = target.and_then(|t| m.eval.iter().find(|e| e.val_loss <= t));
    let probe = last_probe(dir)?;
    let subs = probe.as_ref().map(|p| p.forward.sublayers.as_slice()).unwrap_or_default();
    let cvs: Vec<f64> = subs.iter().filter_map(|s| s.grad_cv_run).filter(|v| v.is_finite()).collect();
    let state = RunState::of(status.as_ref());
    let (diverged_step, diverged_reason) = match &status {
        Some(Status::Diverged { step, reason }) => (Some(*step), Some(reason.clone())),
        _ => (None, None),
    };
    let final_val = match state {
        RunState::Finished => m.eval.last().and_then(|e| finite_or_none(e.val_loss)),
        _ => None,
    };
    let last = m.train.last();
    Ok(RunResult {
        name: r.name.clone(),
        stage: r.stage,
        axes,
        state,
        diverged_step,
        diverged_reason,
        final_val_loss: final_val,
        final_train_loss: final_val.and(last_train_mean(&m)),
        best_val_loss: best,
        final_val_ppl: final_val.map(f64::exp),
        best_val_ppl: best.map(f64::exp),
        steps: last.map(|x| x.step).unwrap_or(0),
        wall_s: last.map(|x| x.wall_s).unwrap_or(0.0),
        tokens_per_s: median_tokens_per_s(&m),
        steps_to_target: hit.map(|e| e.step),
        time_to_target_s: hit.map(|e| e.wall_s),
        max_abs_last_layer: subs.last().and_then(|s| finite_or_none(s.z.max_abs)),
        grad_spikes: probe.as_ref().map(|p| p.spikes_total),
        spike_score: last.and_then(|x| x.spike_score),
        rollbacks: m.rollbacks.len(),
        failure: None,
        grad_cv: (!cvs.is_empty()).then(|| cvs.iter().sum::<f64>() / cvs.len() as f64),
        final_tau: probe.as_ref().and_then(|p| finite_or_none(p.forward.final_tau)),
        tasks: match state {
            RunState::Finished => final_tasks(&m),
            _ => Vec::new(),
        },
        routing: Routing::of(&m),
    })
}

/// The lowest finite validation loss of a run.
fn best_val_loss(m: &Metrics) -> Option<f64> {
    m.eval
        .iter()
        .map(|e| e.val_loss)
        .filter(|v| v.is_finite())
        .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.min(v))))
}

/// The median training throughput of a run (tokens/s).
fn median_tokens_per_s(m: &Metrics) -> Option<f64> {
    let mut rates: Vec<f64> = m.train.iter().map(|x| x.tokens_per_s).filter(|v| v.is_finite()).collect();
    rates.sort_by(f64::total_cmp);
    (!rates.is_empty()).then(|| rates[rates.len() / 2])
}

/// The headlines of a run's last task evaluation.
fn final_tasks(m: &Metrics) -> Vec<crate::tasks::TaskScore> {
    m.tasks.last().map(|t| t.results.iter().filter_map(|r| r.headline()).collect()).unwrap_or_default()
}

/// The columns of `results.csv` after `name`, `stage` and the axes.
const CSV_COLUMNS: [&str; 23] = [
    "state",
    "diverged_step",
    "final_val_loss",
    "final_train_loss",
    "best_val_loss",
    "final_val_ppl",
    "best_val_ppl",
    "steps",
    "wall_s",
    "tokens_per_s",
    "steps_to_target",
    "time_to_target_s",
    "max_abs_last_layer",
    "grad_spikes",
    "spike_score",
    "rollbacks",
    "grad_cv",
    "final_tau",
    "failure",
    "moe_load_cv",
    "moe_dead",
    "moe_balance",
    "moe_dropped",
];

/// Every (task, metric) the runs carry, in order of first appearance.
fn task_columns(rows: &[RunResult]) -> Vec<(String, String)> {
    crate::tasks::evaluate::score_keys(rows.iter().flat_map(|r| &r.tasks))
}

/// A JSON value as a CSV cell: empty for null, strings as they are, numbers as JSON writes them.
fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `results.csv`: a header, then one row per run (quoted as RFC 4180 requires: run names
/// contain commas).
pub fn to_csv(rows: &[RunResult]) -> anyhow::Result<Vec<u8>> {
    let axis_keys: Vec<String> = rows
        .iter()
        .flat_map(|r| r.axes.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let tasks = task_columns(rows);
    let mut w = csv::Writer::from_writer(Vec::new());
    let task_header = tasks.iter().flat_map(|(t, m)| [format!("{t}.{m}"), format!("{t}.{m}_se")]);
    let header: Vec<String> = ["name", "stage"]
        .into_iter()
        .chain(axis_keys.iter().map(String::as_str))
        .chain(CSV_COLUMNS)
        .map(String::from)
        .chain(task_header)
        .collect();
    w.write_record(&header)?;
    for r in rows {
        let v = serde_json::to_value(r)?;
        let axes = axis_keys.iter().map(|k| cell(r.axes.get(k).unwrap_or(&serde_json::Value::Null)));
        let rest = CSV_COLUMNS.iter().map(|c| cell(&v[*c]));
        let scores = tasks.iter().flat_map(|(t, m)| {
            let s = crate::tasks::evaluate::find_score(&r.tasks, t, m);
            let f = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
            [f(s.map(|s| s.value)), f(s.and_then(|s| s.stderr))]
        });
        let record: Vec<String> =
            [r.name.clone(), r.stage.to_string()].into_iter().chain(axes).chain(rest).chain(scores).collect();
        w.write_record(&record)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("cannot write CSV: {e}"))
}

/// Writes `results.jsonl` and `results.csv` atomically.
pub fn write(sweep_dir: &Path, rows: &[RunResult]) -> anyhow::Result<()> {
    jsonl::write_all(&layout::results_jsonl(sweep_dir), rows)?;
    crate::io::write_atomic(&layout::results_csv(sweep_dir), &to_csv(rows)?)
}

pub fn read(sweep_dir: &Path) -> anyhow::Result<Vec<RunResult>> {
    let p = layout::results_jsonl(sweep_dir);
    anyhow::ensure!(p.is_file(), "cannot read {}: run the sweep first", p.display());
    jsonl::read(&p)
}

/// The names of the `rows` that did not end (interrupted, stopped, failed or never started).
pub fn unfinished(rows: &[RunResult]) -> Vec<&str> {
    rows.iter().filter(|r| !r.state.ended()).map(|r| r.name.as_str()).collect()
}

/// The unfinished runs, each with how it failed where the sweep saw it.
pub fn unfinished_with_causes(rows: &[RunResult]) -> String {
    rows.iter()
        .filter(|r| !r.state.ended())
        .map(|r| match &r.failure {
            Some(f) => format!("{} ({f})", r.name),
            None => r.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MoE run's `metrics.jsonl` by hand: 25 steps over 2 MoE layers, only the last 20
    /// averaged. Steps 6–25 have load CVs (0.2, 0.4) → 0.3, dead (1, 2) → 3, balance 1.5,
    /// dropped (4, 0) → 4; the first 5 steps' values (CV 9, dead 9) must not count.
    #[test]
    fn a_moe_run_s_routing_is_its_last_steps_mean() {
        let line = |step: usize, cv: f64, dead: usize| {
            format!(
                "{{\"type\":\"train\",\"step\":{step},\"loss\":2.0,\"ce\":2.0,\"reg\":null,\"lr\":0.001,\"grad_norm\":1.0,\
                 \"clipped\":false,\"tokens\":64,\"tokens_per_s\":100.0,\"wall_s\":1.0,\"moe\":{{\"balance\":1.5,\
                 \"router_z\":0.1,\"load_cv\":[{cv},{}],\"entropy\":[1.0,1.0],\"logit_max\":[2.0,2.0],\
                 \"dead\":[{dead},{}],\"dropped\":[4,0]}}}}",
                cv + 0.2,
                dead + 1
            )
        };
        let records = (1..=25).map(|s| if s <= 5 { line(s, 9.0, 9) } else { line(s, 0.2, 1) });
        let records = records.map(|l| serde_json::from_str(&l).unwrap()).collect();
        let r = Routing::of(&Metrics::from_records(records));
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-12;
        assert!(close(r.moe_load_cv, 0.3) && close(r.moe_dead, 3.0), "{r:?}");
        assert!(close(r.moe_balance, 1.5) && close(r.moe_dropped, 4.0), "{r:?}");
        assert_eq!(Routing::of(&Metrics::default()), Routing::default());
    }
}
