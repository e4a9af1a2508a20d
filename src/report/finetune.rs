//! Fine-tuning in the reports: a sweep's fine-tuning stage ranked per method by its SFT
//! validation loss and by its task average, beside the same methods' pretraining; and a
//! fine-tuning run beside its parent (the loss before and after, each task before and after,
//! and both runs in the figures).

use super::data::RunData;
use super::paper_sft;
use super::table::score_cell;
use crate::sweep::aggregate::MethodSummary;
use crate::tasks::TaskScore;
use std::path::{Path, PathBuf};

/// The mean of the task headlines, with the standard error of that mean when every task has
/// one (independent tasks: √Σse² / k).
fn task_average(tasks: &[TaskScore]) -> Option<TaskScore> {
    let k = tasks.len() as f64;
    (!tasks.is_empty()).then(|| {
        let se: Option<Vec<f64>> = tasks.iter().map(|t| t.stderr).collect();
        TaskScore {
            task: "average".into(),
            metric: "headline".into(),
            value: tasks.iter().map(|t| t.value).sum::<f64>() / k,
            stderr: se.map(|v| v.iter().map(|s| s * s).sum::<f64>().sqrt() / k),
            chance: None,
        }
    })
}

fn cell(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.4}"))
}

/// The sweep's fine-tuning table (`sft` ranked by SFT loss, with its standard error over the
/// seeds, sd/√n, and the rank by task average beside it; `pt` the pretraining summary,
/// `paper` the published table beside it) and its finding; `None` without fine-tuning runs.
pub fn sweep_section(
    pt: &[MethodSummary],
    sft: &[MethodSummary],
    sft_rows: &SftRows,
    paper: Option<&str>,
) -> Option<((String, String), String)> {
    let first = sft.iter().find(|m| m.mean.is_some())?;
    let published = paper.map(paper_sft::rows).unwrap_or_default();
    let mut t = String::from(
        "| rank | method | PT val loss | SFT LR* | SFT train loss | SFT val loss | se | n | task average before | task average after | rank by tasks |",
    );
    if let Some(p) = paper {
        t += &format!(" {p}: SFT eval loss (rank) | {p}: average after SFT (rank) |");
    }
    t += "\n|---|---|---|---|---|---|---|---|---|---|---|";
    t += if paper.is_some() { "---|---|\n" } else { "\n" };
    let averages: Vec<f64> = sft.iter().filter_map(|m| Some(task_average(&m.tasks)?.value)).collect();
    for (i, m) in sft.iter().enumerate() {
        let before = pt.iter().find(|p| p.method == m.method);
        let se = m.std.map(|s| s / (m.seeds_at_lr_star as f64).sqrt());
        let by_tasks =
            task_average(&m.tasks).map_or("–".into(), |a| paper_sft::rank(a.value, &averages, false).to_string());
        let avg =
            |ts: Option<&Vec<TaskScore>>| ts.and_then(|t| task_average(t)).map_or("–".into(), |a| score_cell(&a));
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {by_tasks} |",
            i + 1,
            m.method,
            cell(before.and_then(|p| p.mean)),
            m.lr_star.map_or("–".into(), |l| format!("{l:.0e}")),
            cell(sft_rows.train_loss(m)),
            cell(m.mean),
            cell(se),
            m.seeds_at_lr_star,
            avg(before.map(|p| &p.tasks)),
            avg(Some(&m.tasks)),
        );
        if paper.is_some() {
            t += &published_cells(&m.method, &published);
        }
        t += "\n";
    }
    Some((("Fine-tuning: the methods after SFT".into(), t), finding(first, sft)))
}

/// A sweep's fine-tuning runs, by method label, with the key tuned per method.
pub struct SftRows<'a> {
    pub rows: &'a [crate::sweep::results::RunResult],
    pub group_by: &'a crate::sweep::group::GroupBy,
    pub tuned: &'a str,
}

impl SftRows<'_> {
    /// The mean SFT train loss of `m`'s finished runs at its best SFT value of the tuned key.
    fn train_loss(&self, m: &MethodSummary) -> Option<f64> {
        let at: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.stage == crate::sweep::Stage::Finetune && self.group_by.label(&r.axes) == m.method)
            .filter(|r| r.axes.get(self.tuned).and_then(|v| v.as_f64()) == m.lr_star)
            .filter_map(|r| r.final_train_loss)
            .collect();
        (!at.is_empty()).then(|| at.iter().sum::<f64>() / at.len() as f64)
    }
}

/// The paper's SFT eval loss and task average for `method` with their ranks in the paper.
fn published_cells(method: &str, rows: &[paper_sft::SftRow]) -> String {
    let Some(r) = rows.iter().find(|r| {
        let preset = super::paper_tasks::preset_of(r.name);
        method == preset || Some(method) == preset.strip_suffix("-rms")
    }) else {
        return " – | – |".into();
    };
    let evals: Vec<f64> = rows.iter().filter_map(|r| r.sft_eval).collect();
    let avgs: Vec<f64> = rows.iter().filter_map(|r| r.avg).collect();
    let eval = r.sft_eval.map_or("–".into(), |v| format!("{v:.3} ({})", paper_sft::rank(v, &evals, true)));
    let avg = r.avg.map_or("not given".into(), |v| format!("{v:.2} ({})", paper_sft::rank(v, &avgs, false)));
    format!(" {eval} | {avg} |")
}

fn finding(first: &MethodSummary, sft: &[MethodSummary]) -> String {
    let by_tasks = sft
        .iter()
        .filter_map(|m| Some((task_average(&m.tasks)?.value, &m.method)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(String::new(), |(v, name)| format!("; by task average after fine-tuning, **{name}** ({v:.3})"));
    format!(
        "After fine-tuning, **{}** has the lowest SFT validation loss ({}, mean over {} seed(s) at its best SFT rate){by_tasks}.",
        first.method,
        cell(first.mean),
        first.seeds_at_lr_star
    )
}

/// The run directory a `finetune.parent` names (a run, or one of its checkpoints).
fn parent_dir(parent: &Path) -> PathBuf {
    match parent.parent() {
        Some(c) if c.file_name().is_some_and(|n| n == "checkpoints") => c.parent().unwrap_or(c).to_path_buf(),
        _ => parent.to_path_buf(),
    }
}

/// A fine-tuning run's parent, loaded, when the run has one that can be read.
pub fn parent_of(r: &RunData) -> Option<RunData> {
    let f = r.config.as_ref()?.finetune.as_ref()?;
    RunData::load(&parent_dir(&f.parent), &format!("{} (parent)", r.label)).ok()
}

/// The PT → SFT table: each stage's last validation and training loss and task headlines.
pub fn run_section(sft: &RunData, parent: &RunData) -> (String, String) {
    let last_val = |r: &RunData| r.eval.last().map(|e| e.val_loss);
    let last_train = |r: &RunData| r.train.last().map(|t| t.loss);
    let tasks = |r: &RunData| -> Vec<TaskScore> {
        r.tasks.last().map_or(Vec::new(), |t| t.results.iter().filter_map(|x| x.headline()).collect())
    };
    let (before, after) = (tasks(parent), tasks(sft));
    let changed = parent_changed(sft);
    let mut t = String::from("| stage | run | data | val loss | last train loss |");
    before.iter().for_each(|s| t += &format!(" {} {} |", s.task, s.metric));
    t += "\n|---|---|---|---|---|";
    before.iter().for_each(|_| t += "---|");
    t += "\n";
    let pretraining = if changed.is_some() { "pretraining (its weights changed since)" } else { "pretraining" };
    for (stage, r, ts) in [(pretraining, parent, &before), ("fine-tuning", sft, &after)] {
        let corpus = r.info.as_ref().map_or("–".into(), |i| i.data.corpus.clone());
        t += &format!("| {stage} | {} | {corpus} | {} | {} |", r.dir.display(), cell(last_val(r)), cell(last_train(r)));
        for b in &before {
            let s = ts.iter().find(|s| s.task == b.task && s.metric == b.metric);
            t += &format!(" {} |", s.map_or("–".into(), score_cell));
        }
        t += "\n";
    }
    let sha = sft.config.as_ref().and_then(|c| c.finetune.as_ref()?.parent_sha256.clone()).unwrap_or_default();
    let short = |s: &str| s.chars().take(12).collect::<String>();
    let heading = format!("Fine-tuned from {} (weights SHA-256 {}…)", parent.dir.display(), short(&sha));
    if let Some(now) = changed {
        t += &format!(
            "\nThe parent's weights are not those this run was fine-tuned from: SHA-256 {}… when it started, {}… \
             now (the parent was retrained or replaced since), so the pretraining row describes another model.\n",
            short(&sha),
            short(&now)
        );
    }
    (heading, t)
}

/// The parent weights' digest now, when it is not the one the fine-tune recorded at its start
/// (`None` when they match or cannot be read).
fn parent_changed(sft: &RunData) -> Option<String> {
    let f = sft.config.as_ref()?.finetune.as_ref()?;
    let (weights, want) = (f.parent_weights.as_ref()?, f.parent_sha256.as_ref()?);
    let now = crate::run::checkpoint::file_sha256(weights).ok()?;
    (now != *want).then_some(now)
}
