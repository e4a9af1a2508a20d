//! The report of a scaling study (`DIR/scaling.json`, see [`crate::sweep::scaling`]): loss
//! against scale on log-log axes with each recipe's fitted law (KiteNorm Fig. 4's form), LR*
//! against scale, each recipe's gap to the best one, the probes' depth profiles at the
//! smallest and the largest point, and the findings in words.

use super::data::RunData;
use super::figures::{Figure, depth_profiles_tagged};
use super::page::Page;
use super::plot::{Chart, Series, draw};
use crate::sweep::aggregate::LrEdge;
use crate::sweep::layout;
use crate::sweep::scaling::{Scaling, ScalingPoint};
use crate::sweep::significance::{ALPHA, p_is};
use std::path::Path;

/// The page's text and its figures.
pub fn page(dir: &Path, out: &Path, s: &Scaling) -> anyhow::Result<(Page, Vec<Figure>)> {
    let mut figs = vec![loss_figure(out, s)?, lr_figure(out, s)?, gap_figure(out, s)?];
    figs.extend(tasks_figure(out, s)?);
    for (tag, value) in ends(s) {
        let runs = best_runs_at(dir, s, value)?;
        let at = format!(", at {} = {}", s.axis.name(), fmt_value(value));
        figs.extend(depth_profiles_tagged(out, &runs, &format!("_{tag}"), &at)?);
    }
    let page = Page {
        title: format!("Scaling report: {}", s.axis.name()),
        setup: Some(setup(s)),
        table: table(s),
        table_notes: vec![
            "gap: the mean final validation loss minus the best recipe's at the same point. † LR* at an edge of the \
                grid: the point's loss is an upper bound."
                .into(),
        ],
        sections: Vec::new(),
        findings: findings(s).into_iter().chain(task_leaders(s)).collect(),
    };
    Ok((page, figs))
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v}") } else { format!("{v:.4}") }
}

/// The smallest and the largest ladder value.
fn ends(s: &Scaling) -> Vec<(&'static str, f64)> {
    let vals: Vec<f64> = s.points.iter().map(|p| p.axis_value).collect();
    let (lo, hi) = (vals.iter().copied().fold(f64::INFINITY, f64::min), vals.iter().copied().fold(0.0, f64::max));
    if vals.is_empty() {
        Vec::new()
    } else if lo == hi {
        vec![("smallest", lo)]
    } else {
        vec![("smallest", lo), ("largest", hi)]
    }
}

/// Each recipe's best run at ladder value `v`, with its probes.
fn best_runs_at(dir: &Path, s: &Scaling, v: f64) -> anyhow::Result<Vec<RunData>> {
    s.points
        .iter()
        .filter(|p| p.axis_value == v)
        .filter_map(|p| p.best_run.as_ref().map(|name| RunData::load(&layout::run(dir, name), &p.recipe)))
        .collect()
}

fn recipes(s: &Scaling) -> Vec<&str> {
    s.fits.iter().map(|f| f.recipe.as_str()).collect()
}

fn of<'a>(s: &'a Scaling, recipe: &str) -> Vec<&'a ScalingPoint> {
    s.points.iter().filter(|p| p.recipe == recipe).collect()
}

fn loss_figure(out: &Path, s: &Scaling) -> anyhow::Result<Figure> {
    let mut series = Vec::new();
    for (i, f) in s.fits.iter().enumerate() {
        let pts: Vec<(f64, f64)> = of(s, &f.recipe).iter().filter_map(|p| Some((p.x, p.mean?))).collect();
        if let (Some(law), Some(lo), Some(hi)) = (f.law, pts.first(), pts.last()) {
            let curve = (0..=40).map(|k| lo.0 * (hi.0 / lo.0).powf(k as f64 / 40.0)).map(|x| (x, law.at(x))).collect();
            series.push(Series { name: String::new(), points: curve, color: i, dashed: true, scatter: false });
        }
        series.push(Series { name: f.recipe.clone(), points: pts, color: i, dashed: false, scatter: false });
    }
    let chart = Chart::new("Final validation loss vs scale", &format!("{} (log)", s.x), "loss (log)", series);
    let svg = draw(&chart.log(true, true), &out.join("scaling_loss"))?;
    Ok(Figure {
        stem: "scaling_loss".into(),
        caption: format!(
            "Mean final validation loss over seeds at each recipe's LR*, against {}; dashed: the fitted L = E + A·x^(−α) \
                (KiteNorm Fig. 4's form).",
            s.x
        ),
        svg,
    })
}

/// One line per recipe of `value` against the ladder.
fn along_ladder(s: &Scaling, value: fn(&ScalingPoint) -> Option<f64>) -> Vec<Series> {
    recipes(s)
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let pts = of(s, r).iter().filter_map(|p| Some((p.axis_value, value(p)?))).collect();
            Series { name: r.to_string(), points: pts, color: i, dashed: false, scatter: false }
        })
        .collect()
}

fn lr_figure(out: &Path, s: &Scaling) -> anyhow::Result<Figure> {
    let series = along_ladder(s, |p| p.lr_star);
    let chart = Chart::new("Best learning rate vs scale", &format!("{} (log)", s.axis.name()), "LR* (log)", series);
    let svg = draw(&chart.log(true, true), &out.join("scaling_lr"))?;
    let caption = "LR*, the best rate of the grid, at each point of the ladder: does the best rate move with scale?";
    Ok(Figure { stem: "scaling_lr".into(), caption: caption.into(), svg })
}

/// Every (task, metric) headline of the points, in order of first appearance.
fn task_keys(s: &Scaling) -> Vec<(String, String)> {
    crate::tasks::evaluate::score_keys(s.points.iter().flat_map(|p| &p.tasks))
}

fn task_value(p: &ScalingPoint, task: &str, metric: &str) -> Option<f64> {
    crate::tasks::evaluate::find_score(&p.tasks, task, metric).map(|t| t.value)
}

/// One panel per downstream task: its headline at each recipe's LR* against the ladder;
/// `None` when the runs were not evaluated.
fn tasks_figure(out: &Path, s: &Scaling) -> anyhow::Result<Option<Figure>> {
    let keys = task_keys(s);
    if keys.is_empty() {
        return Ok(None);
    }
    let charts: Vec<Chart> = keys
        .iter()
        .map(|(task, metric)| {
            let series = recipes(s)
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let pts =
                        of(s, r).iter().filter_map(|p| Some((p.axis_value, task_value(p, task, metric)?))).collect();
                    Series { name: r.to_string(), points: pts, color: i, dashed: false, scatter: false }
                })
                .collect();
            Chart::new(task.as_str(), &format!("{} (log)", s.axis.name()), metric, series).log(true, false)
        })
        .collect();
    let svg = super::plot::draw_grid(&charts, 2, &out.join("scaling_tasks"))?;
    let caption = "Each downstream task's headline (mean over seeds at LR*) against the ladder, per recipe: does what \
        the models can do follow their loss as they scale?";
    Ok(Some(Figure { stem: "scaling_tasks".into(), caption: caption.into(), svg }))
}

/// At the largest point, each task whose leader is not the loss's leader, in words.
fn task_leaders(s: &Scaling) -> Vec<String> {
    let Some(&(_, top)) = ends(s).last() else { return Vec::new() };
    let at: Vec<&ScalingPoint> = s.points.iter().filter(|p| p.axis_value == top).collect();
    let Some((_, by_loss)) = at.iter().filter_map(|p| Some((p.mean?, p))).min_by(|a, b| a.0.total_cmp(&b.0)) else {
        return Vec::new();
    };
    task_keys(s)
        .into_iter()
        .filter_map(|(task, metric)| {
            let higher = metric.starts_with("acc");
            let best =
                at.iter().filter_map(|p| Some((task_value(p, &task, &metric)?, p))).max_by(|a, b| match higher {
                    true => a.0.total_cmp(&b.0),
                    false => b.0.total_cmp(&a.0),
                })?;
            (best.1.recipe != by_loss.recipe).then(|| {
                format!(
                    "At {} = {}, {} leads by {task} {metric} ({:.3}) where {} leads by loss.",
                    s.axis.name(),
                    fmt_value(top),
                    best.1.recipe,
                    best.0,
                    by_loss.recipe
                )
            })
        })
        .collect()
}

fn gap_figure(out: &Path, s: &Scaling) -> anyhow::Result<Figure> {
    let series = along_ladder(s, |p| p.gap_to_best);
    let chart = Chart::new("Gap to the best recipe vs scale", &format!("{} (log)", s.axis.name()), "Δ loss", series);
    let svg = draw(&chart.log(true, false), &out.join("scaling_gap"))?;
    let caption = "Each recipe's mean final loss minus the best recipe's at the same point (0: it leads there).";
    Ok(Figure { stem: "scaling_gap".into(), caption: caption.into(), svg })
}

fn table(s: &Scaling) -> String {
    let mut t = format!(
        "| recipe | {} | params (non-emb.) | tokens | LR* | mean | best | worst | seeds | diverged / runs | gap |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        s.axis.name()
    );
    let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4}"));
    for p in &s.points {
        let edge = if p.lr_edge.is_some() { " †" } else { "" };
        let lr = p.lr_star.map_or("–".into(), |l| format!("{l:e}{edge}"));
        t += &format!(
            "| {} | {} | {} ({}) | {} | {lr} | {} | {} | {} | {} | {} / {} | {} |\n",
            p.recipe,
            fmt_value(p.axis_value),
            p.params,
            p.params_non_embedding,
            p.tokens,
            f(p.mean),
            f(p.best),
            f(p.worst),
            p.seed_losses.len(),
            p.diverged,
            p.runs,
            f(p.gap_to_best)
        );
    }
    t
}

fn setup(s: &Scaling) -> String {
    let vals: Vec<String> = ends_all(s).iter().map(|v| fmt_value(*v)).collect();
    let tokens = || s.points.iter().map(|p| p.tokens);
    format!(
        "Setup: the {} ladder {} for {}; every point tuned over its own learning-rate grid; x in the fits is {}; \
            training tokens per run from {} to {}.",
        s.axis.name(),
        vals.join(", "),
        recipes(s).join(", "),
        s.x,
        tokens().min().unwrap_or(0),
        tokens().max().unwrap_or(0),
    )
}

/// Every ladder value, ascending.
fn ends_all(s: &Scaling) -> Vec<f64> {
    let mut v: Vec<f64> = s.points.iter().map(|p| p.axis_value).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// Who leads where, whether the lead grows, the exponents, LR* at the edges and what a
/// miniature cannot say.
fn findings(s: &Scaling) -> Vec<String> {
    let mut out = vec![leaders(s)];
    out.extend(trend(s));
    out.extend(exponents(s));
    out.extend(exponent_pairs(s));
    out.extend(lr_moves(s));
    let edges: Vec<String> = s
        .points
        .iter()
        .filter_map(|p| {
            let side = match p.lr_edge? {
                LrEdge::Lowest => "lowest",
                LrEdge::Highest => "highest",
            };
            Some(format!("{} at {} = {} ({side} rate)", p.recipe, s.axis.name(), fmt_value(p.axis_value)))
        })
        .collect();
    if !edges.is_empty() {
        out.push(format!(
            "LR* at an edge of the grid, so these losses are upper bounds (the recipe may do better beyond the grid): {}.",
            edges.join("; ")
        ));
    }
    out.push(limits(s));
    out
}

fn leaders(s: &Scaling) -> String {
    let lead: Vec<String> = ends_all(s)
        .iter()
        .filter_map(|&v| {
            let mut here: Vec<&ScalingPoint> =
                s.points.iter().filter(|p| p.axis_value == v && p.mean.is_some()).collect();
            here.sort_by(|a, b| a.mean.unwrap_or(f64::INFINITY).total_cmp(&b.mean.unwrap_or(f64::INFINITY)));
            let best = here.first()?;
            let verdict = here.get(1).map(|second| lead_verdict(best, second)).unwrap_or_default();
            Some(format!("{} = {}: **{}** ({:.4}{verdict})", s.axis.name(), fmt_value(v), best.recipe, best.mean?))
        })
        .collect();
    format!("Who leads at each point: {}.", lead.join("; "))
}

/// The leader of a point against its runner-up, by Welch's t over their seeds.
fn lead_verdict(best: &ScalingPoint, second: &ScalingPoint) -> String {
    match crate::stats::welch(&best.seed_losses, &second.seed_losses) {
        Some(w) if w.p < ALPHA => format!("; beyond noise over {}, Welch {}", second.recipe, p_is(w.p)),
        Some(w) => format!("; within noise of {}, Welch {}", second.recipe, p_is(w.p)),
        None => format!("; untested against {} (fewer than 2 seeds)", second.recipe),
    }
}

/// Recipes ranked by their fitted α (largest first), each adjacent pair called apart only when
/// their 95 % bootstrap intervals do not overlap (a conservative test: two intervals that
/// just touch, of equal width and normal, already differ at p ≈ 0.006).
fn exponent_pairs(s: &Scaling) -> Option<String> {
    let mut fits: Vec<(&str, f64, (f64, f64))> =
        s.fits.iter().filter_map(|f| Some((f.recipe.as_str(), f.law?.alpha, f.alpha_interval?))).collect();
    if fits.len() < 2 {
        return None;
    }
    fits.sort_by(|a, b| b.1.total_cmp(&a.1));
    let pairs: Vec<String> = fits
        .windows(2)
        .map(|w| {
            let ((a, aa, (alo, _)), (b, ba, (_, bhi))) = (w[0], w[1]);
            let verdict = if alo > bhi { "apart beyond noise" } else { "within noise: the intervals overlap" };
            format!("{a} (α {aa:.3}) over {b} (α {ba:.3}): {verdict}")
        })
        .collect();
    Some(format!("Exponents, adjacent by α with their bootstrap intervals: {}.", pairs.join("; ")))
}

/// For each recipe that trails somewhere: its gap at the smallest and the largest point.
fn trend(s: &Scaling) -> Vec<String> {
    let vals = ends_all(s);
    let (Some(&lo), Some(&hi)) = (vals.first(), vals.last()) else { return Vec::new() };
    if lo == hi {
        return Vec::new();
    }
    recipes(s)
        .into_iter()
        .filter_map(|r| {
            let gap = |v: f64| s.points.iter().find(|p| p.recipe == r && p.axis_value == v)?.gap_to_best;
            let (a, b) = (gap(lo)?, gap(hi)?);
            if a == 0.0 && b == 0.0 {
                return None;
            }
            let way = if b > a {
                "grows"
            } else if b < a {
                "shrinks"
            } else {
                "holds"
            };
            Some(format!(
                "{r}'s gap to the best recipe {way} with scale: {a:+.4} at {} = {}, {b:+.4} at {}.",
                s.axis.name(),
                fmt_value(lo),
                fmt_value(hi)
            ))
        })
        .collect()
}

fn exponents(s: &Scaling) -> Vec<String> {
    s.fits
        .iter()
        .map(|f| match f.law {
            Some(l) => {
                let ci = f.alpha_interval.map_or(" (one seed: no interval)".into(), |(a, b)| {
                    format!(", 95 % bootstrap interval over seeds [{a:.3}, {b:.3}]")
                });
                format!(
                    "{}: L = {:.3} + {:.3}·x^(−{:.3}){ci}; R² = {:.3} over {} points{}.",
                    f.recipe,
                    l.e,
                    l.a,
                    l.alpha,
                    l.r2,
                    f.points,
                    if f.points <= 3 { " (three points fit three parameters exactly: R² says nothing)" } else { "" }
                )
            }
            None => format!("{}: no law fitted ({} points with a loss; three are needed).", f.recipe, f.points),
        })
        .collect()
}

fn lr_moves(s: &Scaling) -> Vec<String> {
    recipes(s)
        .into_iter()
        .filter_map(|r| {
            let lrs: Vec<String> = of(s, r).iter().filter_map(|p| p.lr_star).map(|l| format!("{l:e}")).collect();
            let mut distinct = lrs.clone();
            distinct.dedup();
            (distinct.len() > 1).then(|| format!("{r}'s LR* moves along the ladder: {}.", lrs.join(" → ")))
        })
        .collect()
}

fn limits(s: &Scaling) -> String {
    let per_param: Vec<f64> = s.points.iter().map(|p| p.tokens as f64 / p.params.max(1) as f64).collect();
    let max = per_param.iter().copied().fold(0.0, f64::max);
    format!(
        "What this cannot say: at most {max:.2} training tokens per parameter here (Chinchilla's rule is 20), {} sizes \
            from {} to {} non-embedding parameters, and one corpus; a law fitted over so short a ladder and budget \
            describes this miniature, not the papers' scale (`normlab scaling --full` runs their ladders).",
        ends_all(s).len(),
        s.points.iter().map(|p| p.params_non_embedding).min().unwrap_or(0),
        s.points.iter().map(|p| p.params_non_embedding).max().unwrap_or(0),
    )
}
