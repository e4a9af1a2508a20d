//! `normlab report DIR`: a self-contained HTML page (figures inlined as SVG), the figures as
//! PNG and SVG files, and a markdown summary, for a sweep directory or a single run.
//!
//! - [`plot`]: charts with plotters (pure-Rust fonts)
//! - [`data`]: what is read from run directories
//! - [`figures`]: the figures, in the papers' styles
//! - [`findings`]: which scheme wins here and why, in words
//! - [`page`]: the report's text as markdown and HTML
//! - [`scaling`]: a scaling study's laws, gaps and findings
//! - [`tasks`]: downstream tasks against the learning rate, and whether they rank as the loss does
//! - [`textnorm`]: exact match, F1 and gradient-norm CV of pairs runs (the Normalization chapter's build)

pub mod data;
pub mod figures;
pub mod findings;
pub mod gates;
pub mod page;
pub mod paper;
pub mod paper_tasks;
pub mod plot;
pub mod scaling;
pub mod sources;
pub mod spikes;
pub mod tasks;
pub mod textnorm;

use crate::io::json;
use crate::sweep::aggregate::{MethodSummary, summarize};
use crate::sweep::group::GroupBy;
use crate::sweep::results::{self, RunResult};
use crate::sweep::{Plan, layout};
use crate::train::run_dir::{self, RunInfo};
use anyhow::Context;
use data::RunData;
use figures::Figure;
use page::Page;
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
    let rows = results::read(dir)?;
    if crate::sweep::scaling::path(dir).is_file() {
        return scaling_report(dir, &rows);
    }
    let plan: Plan = json::read(&layout::plan(dir))?;
    let (group, tuned) = (&plan.group_by, &plan.tuned);
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
    sections.extend(sources::section(&best_runs));
    sections.extend(spikes::section(&rows, group, tuned));
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
    write(dir, &out, &page, &figs, &rows)
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
    let runs = vec![r];
    let mut figs = figures::curves(&out, &runs)?;
    figs.extend(tasks::over_training(&out, &runs)?);
    figs.extend(figures::depth_profiles(&out, &runs)?);
    figs.extend(gates::figures(&out, &runs)?);
    figs.extend(figures::over_training(&out, &runs[0], &slug(&label))?);
    if let Some(f) = figures::bhyt_scatter(&out, &runs[0])? {
        figs.push(f);
    }
    let status = runs[0].status.as_ref().map(run_dir::describe).unwrap_or_else(|| "no status".into());
    let table = format!("| run | status |\n|---|---|\n| {label} | {status} |\n");
    let mut sections: Vec<(String, String)> = tasks::last_evaluation(&runs[0]).into_iter().collect();
    sections.extend(sources::section(&runs));
    let mut notes = runs[0].gaps();
    if let Some(t) = textnorm::section(&out, &runs)? {
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

/// The per-method results table in markdown, ranked by the mean over seeds at LR*; a column
/// per downstream task where the runs were evaluated.
pub fn summary_table(ms: &[MethodSummary]) -> String {
    let o = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "–".into());
    let tasks = task_keys(ms);
    let mut t = String::from(
        "| rank | recipe | LR* | mean | sd | n | best | worst | best ppl | diverged / runs | steps to target |",
    );
    tasks.iter().for_each(|(task, metric)| t += &format!(" {task} {metric} |"));
    t += &format!("\n|---|---|---|---|---|---|---|---|---|---|---|{}\n", "---|".repeat(tasks.len()));
    for (i, m) in ms.iter().enumerate() {
        let edge = if m.lr_edge.is_some() { " †" } else { "" };
        t += &format!(
            "| {} | {} | {}{edge} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            i + 1,
            m.method,
            m.lr_star.map(|l| format!("{l:e}")).unwrap_or_else(|| "–".into()),
            o(m.mean),
            o(m.std),
            m.seeds_at_lr_star,
            o(m.best),
            o(m.worst),
            m.best.map(|b| format!("{:.2}", b.exp())).unwrap_or_else(|| "–".into()),
            m.diverged,
            m.runs,
            m.steps_to_target.map(|s| s.to_string()).unwrap_or_else(|| "–".into()),
        );
        for (task, metric) in &tasks {
            let s = crate::tasks::evaluate::find_score(&m.tasks, task, metric);
            t += &format!(" {} |", s.map(score_cell).unwrap_or_else(|| "–".into()));
        }
        t += "\n";
    }
    t
}

/// `0.463 ± 0.029`.
pub fn score_cell(s: &crate::tasks::TaskScore) -> String {
    match s.stderr {
        Some(se) => format!("{:.3} ± {se:.3}", s.value),
        None => format!("{:.3}", s.value),
    }
}

/// Every (task, metric) of the summaries, in order of first appearance.
pub fn task_keys(ms: &[MethodSummary]) -> Vec<(String, String)> {
    crate::tasks::evaluate::score_keys(ms.iter().flat_map(|m| &m.tasks))
}

/// What the table's columns mean, and its marks.
pub fn table_notes(ms: &[MethodSummary]) -> Vec<String> {
    let mut n = vec![
        "Ranked by the mean final validation loss over the n seeds at LR* (the grid's best rate); sd is the sample \
            standard deviation (n − 1), – with one seed; best and worst are the extreme seeds. Diverged runs are \
            excluded from every value and counted."
            .to_string(),
    ];
    if ms.iter().any(|m| m.seeds_at_lr_star == 2) {
        n.push("With n = 2, sd = |a − b| / √2: read it as the spread of two runs, not as an error bar.".into());
    }
    if ms.iter().any(|m| m.lr_edge.is_some()) {
        n.push("† LR* is the lowest or highest rate tried: the recipe's optimum may lie outside the grid.".into());
    }
    if !task_keys(ms).is_empty() {
        n.push(
            "Downstream tasks (after the loss columns): each task's headline at the end of training, averaged over the \
                seeds at LR*, ± its standard error over the task's items (docs/evaluation.md)."
                .into(),
        );
    }
    n
}

/// ` (d = 64, 16 layers = 32 sublayers, 4 heads, SiLU-GLU FFN); batch 16 × 64 tokens`.
fn shape_text(c: &crate::train::RunConfig) -> String {
    let m = &c.model;
    let ffn = match m.ffn {
        crate::model::FfnKind::Glu => "SiLU-GLU",
        crate::model::FfnKind::Mlp => "GELU-MLP",
    };
    let layers = m.n_layers;
    let heads = m.n_heads;
    let batch = c.train.batch_size;
    let seq = c.train.seq_len;
    format!(
        " (d = {}, {layers} layers = {} sublayers, {heads} heads, {ffn} FFN); batch {batch} × {seq} tokens",
        m.d_model,
        2 * layers
    )
}

/// The study's setup in one paragraph: model, budget, data, grid, seeds, target and the
/// unigram loss, read from a best run's config and `run.json`.
pub fn setup_text(
    best_runs: &[RunData],
    ms: &[MethodSummary],
    rows: &[RunResult],
    target: Option<f64>,
) -> Option<String> {
    let r = best_runs.iter().find(|r| r.info.is_some())?;
    let info = r.info.as_ref()?;
    let tokens = info.total_steps * info.tokens_per_step;
    let mut lrs: Vec<f64> = ms.iter().flat_map(|m| m.curve.iter().map(|p| p.lr)).collect();
    lrs.sort_by(f64::total_cmp);
    lrs.dedup();
    let lrs: Vec<String> = lrs.iter().map(|l| format!("{l:e}")).collect();
    let mut seeds: Vec<u64> = best_runs.iter().filter_map(|r| r.info.as_ref().map(|i| i.seed)).collect();
    seeds.extend(rows.iter().filter_map(|r| r.axes.get("train.seed").and_then(|v| v.as_u64())));
    seeds.sort();
    seeds.dedup();
    let seeds: Vec<String> = seeds.iter().map(|s| s.to_string()).collect();
    // The model's shape and the batch come from the config, when the run kept one.
    let shape = r.config.as_ref().map(shape_text);
    let mut s = format!(
        "Setup: {} parameters{}; {} steps × {} tokens = {tokens} training tokens ({:.1} per parameter); corpus {} \
            ({} tokenizer, {} training / {} validation tokens); learning rates {}; seeds {}",
        info.params,
        shape.unwrap_or_default(),
        info.total_steps,
        info.tokens_per_step,
        info.tokens_per_param,
        info.data.corpus,
        info.data.tokenizer,
        info.data.train_tokens,
        info.data.val_tokens,
        lrs.join(", "),
        seeds.join(", "),
    );
    if let Some(t) = target {
        s += &format!("; target loss {t} (steps to target in the table)");
    }
    if let Some(u) = info.unigram_loss {
        s += &format!("; the unigram loss (token frequencies alone) is {u:.3}");
    }
    Some(s + ".")
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
