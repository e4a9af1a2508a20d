//! The text-normalisation part of a report (the Normalization chapter's build), for runs with
//! `RUN/pairs_eval.json`: exact match and token F1 per test set and per category, the
//! gradient-norm coefficient of variation (CV = std / mean over a sliding window of steps) per
//! Transformer block and per sublayer over training, sample outputs side by side, and
//! findings that test the Normalization chapter's claims: Peri-LN keeps the CV below 1.2 while Pre-LN and
//! Post-LN fluctuate more, and Pre < Post < Peri.

use super::data::RunData;
use super::figures::Figure;
use super::plot::{Chart, Series, draw, draw_grid};
use crate::io::json;
use crate::probe::ProbeRecord;
use crate::recipe::Placement;
use crate::run::layout;
use crate::run::pairs_eval::{PairsEval, Prediction};
use std::path::Path;

/// The Normalization chapter's threshold on the gradient-norm CV.
pub const CV_THRESHOLD: f64 = 1.2;
/// Sample outputs shown per test set.
const SAMPLES: usize = 6;

/// A run with its scores.
pub struct Scored<'a> {
    pub run: &'a RunData,
    pub eval: PairsEval,
}

/// What the report adds: tables (heading, markdown), findings and figures.
pub struct Section {
    pub tables: Vec<(String, String)>,
    pub findings: Vec<String>,
    pub figures: Vec<Figure>,
}

/// The section for `runs` (each recipe's best run), or `None` when none has pair scores.
pub fn section(out: &Path, runs: &[RunData]) -> anyhow::Result<Option<Section>> {
    let scored: Vec<Scored> = runs
        .iter()
        .filter_map(|r| json::read::<PairsEval>(&layout::pairs_eval(&r.dir)).ok().map(|eval| Scored { run: r, eval }))
        .collect();
    if scored.is_empty() {
        return Ok(None);
    }
    let mut tables = vec![("Exact match and token F1".to_string(), score_table(&scored))];
    for set in set_names(&scored) {
        tables.push((format!("Per category: {set} (exact match / token F1)"), category_table(&scored, &set)));
        tables.push((format!("Sample outputs: {set}"), sample_table(&scored, &set)));
    }
    let figures = vec![cv_max_figure(out, &scored)?, cv_grid(out, &scored, false)?, cv_grid(out, &scored, true)?];
    Ok(Some(Section { tables, findings: findings(&scored), figures }))
}

fn set_names(scored: &[Scored]) -> Vec<String> {
    scored[0].eval.sets.iter().map(|s| s.name.clone()).collect()
}

/// Steps of warm-up of a run (its schedule), 0 when unknown.
fn warmup(r: &RunData) -> usize {
    match (&r.config, &r.info) {
        (Some(c), Some(i)) => c.schedule.warmup_steps(i.total_steps),
        _ => 0,
    }
}

/// `(step, max over blocks of the windowed CV)` at every probe step after warm-up.
pub fn max_block_cv(r: &RunData) -> Vec<(f64, f64)> {
    let w = warmup(r);
    r.probes
        .iter()
        .filter(|p| p.step > w)
        .filter_map(|p| {
            let m = p.blocks.iter().map(|b| b.cv_window).filter(|v| v.is_finite()).fold(f64::NAN, f64::max);
            m.is_finite().then_some((p.step as f64, m))
        })
        .collect()
}

/// The largest windowed block CV after warm-up, and the largest whole-run block CV at the end.
fn cv_summary(r: &RunData) -> (Option<f64>, Option<f64>) {
    let peak = max_block_cv(r).iter().map(|p| p.1).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    let run =
        r.last_probe().map(|p| p.blocks.iter().map(|b| b.cv_run).fold(f64::NAN, f64::max)).filter(|v| v.is_finite());
    (peak, run)
}

fn f3(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

fn score_table(scored: &[Scored]) -> String {
    let sets = set_names(scored);
    let mut t = String::from("| recipe | lr | val loss |");
    let mut rule = String::from("|---|---|---|");
    for s in &sets {
        t += &format!(" {s} EM | {s} F1 |");
        rule += "---|---|";
    }
    t += " max block CV (window, after warm-up) | max block CV (whole run) |\n";
    t += &format!("{rule}---|---|\n");
    for s in scored {
        let lr = s.run.config.as_ref().map(|c| format!("{:e}", c.optim.lr)).unwrap_or_default();
        let val = s.run.eval.last().map(|e| format!("{:.4}", e.val_loss)).unwrap_or_default();
        t += &format!("| {} | {lr} | {val} |", s.run.label);
        for name in &sets {
            let sc = s.eval.sets.iter().find(|x| &x.name == name).map(|x| &x.overall);
            t += &format!(" {} | {} |", f3(sc.map(|x| x.exact_match)), f3(sc.map(|x| x.token_f1)));
        }
        let (peak, run) = cv_summary(s.run);
        t += &format!(" {} | {} |\n", f3(peak), f3(run));
    }
    t
}

fn category_table(scored: &[Scored], set: &str) -> String {
    let mut cats: Vec<(String, usize)> = scored[0]
        .eval
        .sets
        .iter()
        .find(|s| s.name == set)
        .map(|s| s.categories.iter().map(|(c, sc)| (c.clone(), sc.n)).collect())
        .unwrap_or_default();
    cats.sort();
    let mut t = String::from("| category | n |");
    t += &scored.iter().map(|s| format!(" {} |", s.run.label)).collect::<String>();
    t += &format!("\n|---|---|{}\n", "---|".repeat(scored.len()));
    for (c, n) in &cats {
        t += &format!("| {c} | {n} |");
        for s in scored {
            let sc = s.eval.sets.iter().find(|x| x.name == set).and_then(|x| x.categories.iter().find(|(k, _)| k == c));
            t += &match sc {
                Some((_, sc)) => format!(" {:.2} / {:.2} |", sc.exact_match, sc.token_f1),
                None => " – |".into(),
            };
        }
        t += "\n";
    }
    t
}

/// A table cell: pipes escaped, control characters shown, long text shortened.
fn cell(s: &str) -> String {
    let s: String = s.chars().map(|c| if c.is_control() { '·' } else { c }).collect();
    let s = if s.chars().count() > 70 { format!("{}…", s.chars().take(70).collect::<String>()) } else { s };
    s.replace('|', "\\|")
}

/// The first pair of each category (then the next ones) of `set`, the same for every run.
fn sample_table(scored: &[Scored], set: &str) -> String {
    let first: Vec<&Prediction> = scored[0].eval.predictions.iter().filter(|p| p.set == set).collect();
    let mut picked: Vec<usize> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, p) in first.iter().enumerate() {
        if picked.len() < SAMPLES && seen.insert(p.category.as_str()) {
            picked.push(i);
        }
    }
    let mut t = String::from("| category | source | reference |");
    t += &scored.iter().map(|s| format!(" {} |", s.run.label)).collect::<String>();
    t += &format!("\n|---|---|---|{}\n", "---|".repeat(scored.len()));
    for &i in &picked {
        let p = first[i];
        t += &format!("| {} | {} | {} |", p.category, cell(&p.source), cell(&p.reference));
        for s in scored {
            let pred = s.eval.predictions.iter().filter(|q| q.set == set).nth(i).map(|q| q.prediction.as_str());
            let mark =
                pred.map(|x| if crate::data::pairs::metrics::exact_match(x, &p.reference) == 1.0 { " ✓" } else { "" });
            t += &format!(" {}{} |", cell(pred.unwrap_or("–")), mark.unwrap_or(""));
        }
        t += "\n";
    }
    t
}

fn threshold_line(x0: f64, x1: f64) -> Series {
    Series {
        name: format!("CV = {CV_THRESHOLD}"),
        points: vec![(x0, CV_THRESHOLD), (x1, CV_THRESHOLD)],
        color: 7,
        dashed: true,
        scatter: false,
    }
}

fn x_span(scored: &[Scored]) -> (f64, f64) {
    let steps = scored.iter().flat_map(|s| s.run.probes.iter().map(|p| p.step as f64));
    steps.fold((f64::INFINITY, 0.0), |(a, b), x| (a.min(x), b.max(x)))
}

fn cv_max_figure(out: &Path, scored: &[Scored]) -> anyhow::Result<Figure> {
    let mut series: Vec<Series> = scored
        .iter()
        .enumerate()
        .map(|(i, s)| Series {
            name: s.run.legend(),
            points: max_block_cv(s.run),
            color: i,
            dashed: false,
            scatter: false,
        })
        .collect();
    let (x0, x1) = x_span(scored);
    series.push(threshold_line(x0, x1));
    let chart =
        Chart::new("Largest block gradient-norm CV after warm-up", "step", "max over blocks of CV (window)", series);
    let stem = "grad_cv_max";
    let svg = draw(&chart, &out.join(stem))?;
    Ok(Figure {
        stem: stem.into(),
        caption: format!(
            "Gradient-norm coefficient of variation (std / mean over the probe window of recent steps), the largest over \
                the Transformer blocks, at every probe step after warm-up, per recipe; dashed: the Normalization chapter's threshold \
                {CV_THRESHOLD}."
        ),
        svg,
    })
}

/// Small multiples, one panel per recipe: the windowed CV of every block (or every sublayer).
fn cv_grid(out: &Path, scored: &[Scored], sublayers: bool) -> anyhow::Result<Figure> {
    let span = x_span(scored);
    let charts: Vec<Chart> = scored.iter().map(|s| cv_panel(s.run, sublayers, span)).collect();
    let (stem, what) = if sublayers {
        ("grad_cv_sublayers", "sublayer (solid: attention, dashed: FFN; the legend names each block's)")
    } else {
        ("grad_cv_blocks", "Transformer block (the legend names each)")
    };
    let svg = draw_grid(&charts, 2, &out.join(stem))?;
    Ok(Figure {
        stem: stem.into(),
        caption: format!(
            "Windowed gradient-norm CV of every {what} over training, one panel per recipe; grey dashed: {CV_THRESHOLD}. \
                The first probes' windows still hold warm-up steps."
        ),
        svg,
    })
}

/// One recipe's panel: the windowed CV of each block (or sublayer) at every probe step.
fn cv_panel(run: &RunData, sublayers: bool, (x0, x1): (f64, f64)) -> Chart {
    let n = run.probes.last().map(|p| if sublayers { p.forward.sublayers.len() } else { p.blocks.len() }).unwrap_or(0);
    let cv_at = |p: &ProbeRecord, k: usize| {
        if sublayers { p.forward.sublayers.get(k)?.grad_cv_window } else { p.blocks.get(k).map(|b| b.cv_window) }
    };
    let mut series: Vec<Series> = (0..n)
        .map(|k| {
            let points = run
                .probes
                .iter()
                .filter_map(|p| cv_at(p, k).filter(|v| v.is_finite()).map(|v| (p.step as f64, v)))
                .collect();
            let name = match sublayers {
                true => format!("block {} {}", k / 2 + 1, if k % 2 == 0 { "attn" } else { "FFN" }),
                false => format!("block {}", k + 1),
            };
            // The palette's grey (7) is the threshold's.
            let color = if k >= 7 { k + 1 } else { k };
            Series { name, points, color, dashed: sublayers && k % 2 == 1, scatter: false }
        })
        .collect();
    series.push(threshold_line(x0, x1));
    Chart::new(run.legend(), "step", "CV (window)", series)
}

fn by_placement<'a>(scored: &'a [Scored<'a>], p: Placement) -> Option<&'a Scored<'a>> {
    scored.iter().find(|s| s.run.placement == Some(p))
}

/// The Normalization chapter's claims, tested in words.
fn findings(scored: &[Scored]) -> Vec<String> {
    let mut f: Vec<String> = set_names(scored).into_iter().map(|set| ranking(scored, &set)).collect();
    let (pre, post, peri) = (
        by_placement(scored, Placement::Pre),
        by_placement(scored, Placement::Post),
        by_placement(scored, Placement::Peri),
    );
    if let Some(peri) = peri {
        f.extend(cv_claims(peri, [pre, post].into_iter().flatten()));
    }
    if let (Some(pre), Some(post), Some(peri)) = (pre, post, peri) {
        let em = |s: &Scored| s.eval.sets.first().map(|x| x.overall.exact_match).unwrap_or(f64::NAN);
        let holds = em(pre) < em(post) && em(post) < em(peri);
        f.push(format!(
            "The Normalization chapter's classroom claim \"Pre < Post < Peri\" (exact match on the {} pairs: pre {:.3}, post {:.3}, peri \
                {:.3}) — **{}** here.",
            pre.eval.sets.first().map(|s| s.name.as_str()).unwrap_or(""),
            em(pre),
            em(post),
            em(peri),
            verdict(holds)
        ));
    }
    f
}

fn verdict(holds: bool) -> &'static str {
    if holds { "holds" } else { "does not hold" }
}

/// The recipes ranked by exact match (then F1) on the pair set `set`.
fn ranking(scored: &[Scored], set: &str) -> String {
    let mut ranked: Vec<(&str, f64, f64)> = scored
        .iter()
        .filter_map(|s| {
            let sc = &s.eval.sets.iter().find(|x| x.name == set)?.overall;
            Some((s.run.label.as_str(), sc.exact_match, sc.token_f1))
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    let order: Vec<String> = ranked.iter().map(|(l, em, f1)| format!("{l} {em:.3} (F1 {f1:.3})")).collect();
    format!("On the **{set}** pairs, exact match ranks {}.", order.join(" > "))
}

/// The Normalization chapter's two gradient-norm CV claims: Peri-LN stays below the threshold, and each of
/// `others` fluctuates more.
fn cv_claims<'a>(peri: &Scored, others: impl Iterator<Item = &'a Scored<'a>>) -> Vec<String> {
    let (Some(v), _) = cv_summary(peri.run) else { return Vec::new() };
    let mut f = vec![format!(
        "The Normalization chapter: \"Peri-LN keeps gradient-norm CV below {CV_THRESHOLD}\" — **{}** here: {}'s largest windowed block \
            CV after warm-up is {v:.3}.",
        verdict(v < CV_THRESHOLD),
        peri.run.label
    )];
    for other in others {
        let (Some(o), _) = cv_summary(other.run) else { continue };
        let side = if o > CV_THRESHOLD { "above" } else { "below" };
        let also = if o > CV_THRESHOLD { "" } else { " as well" };
        f.push(format!(
            "The Normalization chapter: \"{} fluctuates more\" — **{}**: its largest windowed block CV is {o:.3} against {}'s \
                {v:.3}, {side} {CV_THRESHOLD}{also}.",
            other.run.label,
            verdict(o > v),
            peri.run.label,
        ));
    }
    f
}
