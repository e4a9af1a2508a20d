//! A report put together: what the directory holds (a sweep, a scaling study or one run)
//! decides which sections, figures and findings it has; then the files are written.

use super::data::RunData;
use super::figures::{self, Figure};
use super::page::Page;
use super::table::{setup_text, summary_table, table_notes};
use super::{findings, gates, paper, routing, scaling, separation, sources, spikes, tasks, textnorm};
use crate::io::json;
use crate::run::layout::{self as run_dir, RunInfo};
use crate::run::rollback::RollbackRecord;
use crate::sweep::aggregate::{MethodSummary, summarize};
use crate::sweep::group::GroupBy;
use crate::sweep::results::{self, RunResult};
use crate::sweep::{Plan, layout};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// What [`generate`] wrote.
pub struct Report {
    pub dir: PathBuf,
    pub html: PathBuf,
    pub markdown: PathBuf,
    pub figures: Vec<String>,
    pub table: String,
    /// The findings, in words (markdown emphasis with `**`).
    pub findings: Vec<String>,
}

/// Writes the report of a sweep (a directory with `results.jsonl`) or of one run.
pub fn generate(dir: &Path) -> anyhow::Result<Report> {
    if layout::is_sweep(dir) {
        sweep_report(dir)
    } else if run_dir::status(dir).is_file() {
        run_report(dir)
    } else if layout::plan(dir).is_file() {
        anyhow::bail!(
            "{} is a sweep whose results are not written yet (they are when it ends or is stopped); report it then, \
             or report one of its runs: normlab report {}",
            dir.display(),
            layout::run(dir, "NAME").display()
        )
    } else {
        anyhow::bail!(
            "{} is neither a sweep (no results.jsonl) nor a run (no status.json); give a sweep or run directory",
            dir.display()
        )
    }
}

fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

fn sweep_report(dir: &Path) -> anyhow::Result<Report> {
    let all_rows = results::read(dir)?;
    if crate::sweep::scaling::path(dir).is_file() {
        return scaling_report(dir, &all_rows);
    }
    let plan: Plan = json::read(&layout::plan(dir))?;
    let (group, tuned) = (&plan.group_by, &plan.tuned);
    let rows = crate::sweep::finetune::pretraining(&all_rows);
    let ms = summarize(&rows, group, tuned);
    let out = layout::report(dir);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let best_runs: Vec<RunData> = ms
        .iter()
        .filter_map(|m| best_run(&rows, m, group, tuned).map(|r| RunData::load(&layout::run(dir, &r.name), &m.method)))
        .collect::<anyhow::Result<_>>()?;
    let mut figs = sweep_figures(&out, &ms, &best_runs)?;
    let mut notes = sweep_findings(&ms, &best_runs, &rows);
    let mut sections = Vec::new();
    if let Some(t) = textnorm::section(&out, &best_runs)? {
        notes.splice(0..0, t.findings);
        sections = t.tables;
        figs.splice(0..0, t.figures);
    }
    if let Some((tables, finding)) = super::optimizers::section(&ms, group) {
        sections.extend(tables);
        notes.push(finding);
    }
    sections.extend(sources::section(&best_runs));
    sections.extend(spikes::section(&rows, group, tuned).into_iter().chain(routing::section(&ms, &rows, group, tuned)));
    sections.extend(spikes::rollbacks(&rollbacks_of(dir, &rows)?));
    if let Some((heading, t, finding)) = separation::section(dir)? {
        sections.push((heading, t));
        notes.push(finding);
    }
    if let Some((section, finding)) = finetune_section(&plan, &all_rows, &ms) {
        sections.insert(0, section);
        notes.push(finding);
    }
    if let Some((heading, t, finding)) = plan.paper.and_then(|p| paper::side_by_side(p, &ms)) {
        sections.insert(0, (heading, t));
        notes.insert(0, finding);
    }
    let page = Page {
        title: "Sweep report".into(),
        setup: setup_text(&best_runs, &ms, &rows, plan.target_loss),
        table: summary_table(&ms),
        table_notes: table_notes(&ms),
        sections,
        findings: notes,
    };
    write(dir, &out, &page, &figs, &all_rows)
}

/// The fine-tuning stage's table and finding, when the sweep has one.
fn finetune_section(plan: &Plan, rows: &[RunResult], ms: &[MethodSummary]) -> Option<((String, String), String)> {
    let sft_tuned = plan.finetune_tuned.as_deref().unwrap_or("optim.lr");
    let sft = crate::sweep::finetune::summarize(rows, &plan.group_by, sft_tuned);
    let sft_rows = super::finetune::SftRows { rows, group_by: &plan.group_by, tuned: sft_tuned };
    super::finetune::sweep_section(ms, &sft, &sft_rows, plan.finetune_paper.as_deref())
}

/// A sweep's figures: loss (and downstream tasks) against the learning rate, then the best
/// runs' curves, depth profiles and probes over training.
fn sweep_figures(out: &Path, ms: &[MethodSummary], best_runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    let mut figs = Vec::new();
    if ms.iter().any(|m| m.curve.len() > 1) {
        figs.push(figures::lr_curves(out, ms)?);
        figs.extend(tasks::tasks_vs_lr(out, ms)?);
    }
    figs.extend(figures::curves(out, best_runs)?);
    figs.extend(tasks::over_training(out, best_runs)?);
    figs.extend(figures::depth_profiles(out, best_runs)?);
    figs.extend(super::signals::figures(out, best_runs, "", "")?);
    figs.extend(figures::final_attention(out, best_runs)?);
    figs.extend(gates::figures(out, best_runs)?);
    for r in best_runs {
        figs.extend(figures::over_training(out, r, &slug(&r.label))?);
    }
    if let Some(f) = best_runs.iter().find_map(|r| figures::bhyt_scatter(out, r).transpose()) {
        figs.push(f?);
    }
    Ok(figs)
}

/// A sweep's findings in words: the loss ranking's, the downstream tasks', the best runs' gaps
/// and the runs that did not finish.
fn sweep_findings(ms: &[MethodSummary], best_runs: &[RunData], rows: &[RunResult]) -> Vec<String> {
    let mut notes = findings::findings(ms, best_runs);
    notes.extend(tasks::findings(ms));
    notes.extend(best_runs.iter().flat_map(RunData::gaps));
    if !crate::sweep::unfinished(rows).is_empty() {
        notes.push(format!("Runs that did not finish: {}.", crate::sweep::unfinished_with_causes(rows)));
    }
    notes
}

/// The rollbacks of the sweep's runs that made any.
fn rollbacks_of(dir: &Path, rows: &[RunResult]) -> anyhow::Result<Vec<(String, Vec<RollbackRecord>)>> {
    rows.iter()
        .filter(|r| r.rollbacks > 0)
        .map(|r| {
            let m = crate::run::metrics::Metrics::read(&run_dir::metrics(&layout::run(dir, &r.name)))?;
            Ok((r.name.clone(), m.rollbacks))
        })
        .collect()
}

fn best_run<'a>(rows: &'a [RunResult], m: &MethodSummary, group: &GroupBy, tuned: &str) -> Option<&'a RunResult> {
    rows.iter()
        .filter(|r| group.label(&r.axes) == m.method && !r.state.is_diverged())
        .filter(|r| m.lr_star.is_none() || r.axes.get(tuned).and_then(|v| v.as_f64()) == m.lr_star)
        .filter_map(|r| Some((r.final_val_loss?, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, r)| r)
}

/// A scaling study's report, from its `scaling.json`.
fn scaling_report(dir: &Path, rows: &[RunResult]) -> anyhow::Result<Report> {
    let s: crate::sweep::scaling::Scaling = json::read(&crate::sweep::scaling::path(dir))?;
    let out = layout::report(dir);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let (page, figs) = scaling::page(dir, &out, &s)?;
    write(dir, &out, &page, &figs, rows)
}

fn run_report(dir: &Path) -> anyhow::Result<Report> {
    let label = json::read::<RunInfo>(&run_dir::info(dir)).map(|i| i.recipe).unwrap_or_else(|_| "run".into());
    let r = RunData::load(dir, &label)?;
    let out = run_dir::report(dir);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    // A fine-tuning run is drawn beside its parent: both stages' curves and probes.
    let mut both: Vec<RunData> = super::finetune::parent_of(&r).into_iter().collect();
    let mut r = r;
    if !both.is_empty() {
        r.label = format!("{label} (fine-tuned)");
    }
    both.push(r);
    let runs = &both[both.len() - 1..];
    let mut figs = figures::curves(&out, runs)?;
    figs.extend(tasks::over_training(&out, runs)?);
    figs.extend(figures::depth_profiles(&out, &both)?);
    figs.extend(super::signals::figures(&out, &both, "", "")?);
    figs.extend(gates::figures(&out, runs)?);
    figs.extend(figures::over_training(&out, &runs[0], &slug(&label))?);
    if let Some(f) = figures::bhyt_scatter(&out, &runs[0])? {
        figs.push(f);
    }
    let status = runs[0].status.as_ref().map(run_dir::describe).unwrap_or_else(|| "no status".into());
    let score = runs[0].train.last().and_then(|t| t.spike_score).map_or("–".into(), |s| format!("{s:.4}"));
    let table = format!("| run | status | SpikeScore |\n|---|---|---|\n| {label} | {status} | {score} |\n");
    let mut sections: Vec<(String, String)> = match both.len() {
        2 => vec![super::finetune::run_section(&both[1], &both[0])],
        _ => Vec::new(),
    };
    sections.extend(tasks::last_evaluation(&runs[0]));
    sections.extend(spikes::rollbacks(&[(label.clone(), runs[0].rollbacks.clone())]));
    sections.extend(sources::section(runs));
    let mut notes = runs[0].gaps();
    if let Some(t) = textnorm::section(&out, runs)? {
        sections.extend(t.tables);
        notes.extend(t.findings);
        figs.extend(t.figures);
    }
    let page = Page {
        title: format!("Run report: {label}"),
        setup: None,
        table,
        table_notes: Vec::new(),
        sections,
        findings: notes,
    };
    write(dir, &out, &page, &figs, &[])
}

/// Writes report.md and report.html: the page's text, then the figures.
fn write(dir: &Path, out: &Path, page: &Page, figs: &[Figure], rows: &[RunResult]) -> anyhow::Result<Report> {
    let html_path = out.join("report.html");
    let md_path = out.join("report.md");
    crate::io::write_atomic(&html_path, page.html(dir, figs, rows.len()).as_bytes())?;
    crate::io::write_atomic(&md_path, page.markdown(dir, figs).as_bytes())?;
    Ok(Report {
        dir: out.to_path_buf(),
        html: html_path,
        markdown: md_path,
        figures: figs.iter().map(|f| f.stem.clone()).collect(),
        table: page.table.clone(),
        findings: page.findings.clone(),
    })
}
