//! The report's figures, in the papers' styles.

use super::data::RunData;
use super::plot::{Chart, Series, draw};
use crate::probe::snapshot::SublayerProbe;
use crate::sweep::aggregate::MethodSummary;
use std::path::Path;

/// A drawn figure: file stem (PNG and SVG beside it), caption and the SVG text.
pub struct Figure {
    pub stem: String,
    pub caption: String,
    pub svg: String,
}

fn fig(dir: &Path, stem: &str, caption: String, chart: Chart<'_>) -> anyhow::Result<Figure> {
    let svg = draw(&chart, &dir.join(stem))?;
    Ok(Figure { stem: stem.to_string(), caption, svg })
}

fn line(name: impl Into<String>, points: Vec<(f64, f64)>, color: usize, dashed: bool) -> Series {
    Series { name: name.into(), points, color, dashed, scatter: false }
}

/// Validation loss against learning rate per method; × marks diverged runs (KiteNorm Fig. 1a).
pub fn lr_curves(dir: &Path, methods: &[MethodSummary]) -> anyhow::Result<Figure> {
    let mut marks = Vec::new();
    let series = methods
        .iter()
        .enumerate()
        .map(|(i, m)| {
            marks.extend(m.curve.iter().filter(|p| p.diverged > 0).map(|p| (p.lr, i)));
            line(m.method.clone(), m.curve.iter().filter_map(|p| Some((p.lr, p.val_loss?))).collect(), i, false)
        })
        .collect();
    let chart = Chart {
        title: "Final validation loss vs learning rate",
        x_label: "peak learning rate",
        y_label: "final validation loss (nats/token)",
        log_x: true,
        log_y: false,
        series,
        top_marks: marks,
    };
    fig(
        dir,
        "lr_curves",
        "Final validation loss against peak learning rate for each recipe (best over the grid's \
        seeds); × at the top marks a diverged run (KiteNorm Fig. 1a style)."
            .into(),
        chart,
    )
}

/// Training loss, validation loss and gradient norm over steps (Peri-LN Fig. 3 style).
pub fn curves(dir: &Path, runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    let mk = |title: &'static str, y: &'static str, log_y: bool, f: &dyn Fn(&RunData) -> Vec<(f64, f64)>| Chart {
        title,
        x_label: "step",
        y_label: y,
        log_x: false,
        log_y,
        series: runs.iter().enumerate().map(|(i, r)| line(r.label.clone(), f(r), i, false)).collect(),
        top_marks: Vec::new(),
    };
    Ok(vec![
        fig(
            dir,
            "train_loss",
            "Training loss (CE + λ·R) per step of each recipe's best run.".into(),
            mk("Training loss", "loss", false, &|r| r.train_series(|t| t.loss)),
        )?,
        fig(
            dir,
            "val_loss",
            "Validation loss over training.".into(),
            mk("Validation loss", "validation loss", false, &|r| r.eval_series()),
        )?,
        fig(
            dir,
            "grad_norm",
            "Global gradient norm before clipping, per step (spikes stand out on the log scale).".into(),
            mk("Gradient norm", "gradient norm (log)", true, &|r| r.train_series(|t| t.grad_norm)),
        )?,
    ])
}

/// Hidden-state variance and mean |x| against depth at the first and last probe (Peri-LN Fig.
/// 1/5, BHyT Fig. 3).
pub fn depth_profiles(dir: &Path, runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    let both = |value: fn(&SublayerProbe) -> Option<f64>| -> Vec<Series> {
        runs.iter()
            .enumerate()
            .flat_map(|(i, r)| {
                let mut v = Vec::new();
                if let Some(p) = r.first_probe() {
                    v.push(line(String::new(), RunData::per_layer(p, value), i, true));
                }
                if let Some(p) = r.last_probe() {
                    v.push(line(r.label.clone(), RunData::per_layer(p, value), i, false));
                }
                v
            })
            .collect()
    };
    let chart = |title, y, series| Chart {
        title,
        x_label: "sublayer l",
        y_label: y,
        log_x: false,
        log_y: true,
        series,
        top_marks: Vec::new(),
    };
    Ok(vec![
        fig(
            dir,
            "hidden_var",
            "Variance of the hidden state X_l entering each sublayer, at the first probe (step 1, \
            dashed) and the last (solid)."
                .into(),
            chart("Hidden-state variance vs depth", "Var(X_l) (log)", both(|s| Some(s.x.var))),
        )?,
        fig(
            dir,
            "mean_abs",
            "Mean |X_l| at the first probe (dashed) and the last (solid).".into(),
            chart("Mean |x| vs depth", "mean |X_l| (log)", both(|s| Some(s.x.mean_abs))),
        )?,
        fig(
            dir,
            "grad_layers",
            "Gradient norm of each sublayer's parameters at step 1 (dashed) and at the end \
            (solid) (Peri-LN Fig. 6 style)."
                .into(),
            chart("Gradient norm vs depth", "gradient norm of sublayer l (log)", both(|s| s.grad_norm)),
        )?,
    ])
}

/// For one run: Var(X_l) against depth at several steps, and τ per layer over training
/// (KiteNorm Fig. 9 style).
pub fn over_training(dir: &Path, r: &RunData, slug: &str) -> anyhow::Result<Vec<Figure>> {
    let steps = r.probe_steps(5);
    let var = steps
        .iter()
        .enumerate()
        .map(|(i, p)| line(format!("step {}", p.step), RunData::per_layer(p, |s| Some(s.x.var)), i, false))
        .collect();
    let n_layers = r.last_probe().map(|p| p.forward.sublayers.len()).unwrap_or(0);
    let pick: Vec<usize> =
        if n_layers <= 8 { (0..n_layers).collect() } else { (0..8).map(|i| i * (n_layers - 1) / 7).collect() };
    let tau = pick
        .iter()
        .enumerate()
        .map(|(c, &l)| {
            line(
                format!("l = {}", l + 1),
                r.probes.iter().filter_map(|p| Some((p.step as f64, p.forward.sublayers.get(l)?.tau))).collect(),
                c,
                false,
            )
        })
        .collect();
    Ok(vec![
        fig(
            dir,
            &format!("hidden_var_steps_{slug}"),
            format!("{}: Var(X_l) against depth at several steps.", r.label),
            Chart {
                title: "Hidden-state variance over training",
                x_label: "sublayer l",
                y_label: "Var(X_l) (log)",
                log_x: false,
                log_y: true,
                series: var,
                top_marks: Vec::new(),
            },
        )?,
        fig(
            dir,
            &format!("tau_{slug}"),
            format!("{}: token alignment τ(X_l) of selected sublayers over training; τ → 1 is rank collapse.", r.label),
            Chart {
                title: "Token alignment over training",
                x_label: "step",
                y_label: "τ",
                log_x: false,
                log_y: false,
                series: tau,
                top_marks: Vec::new(),
            },
        )?,
    ])
}

/// BHyT: approximated against exact FFN-input statistic (BHyT Fig. 2).
pub fn bhyt_scatter(dir: &Path, r: &RunData) -> anyhow::Result<Option<Figure>> {
    let Some(p) = r.probes.iter().rev().find(|p| !p.forward.bhyt_sample.is_empty()) else { return Ok(None) };
    let pts: Vec<(f64, f64)> = p.forward.bhyt_sample.iter().map(|v| (v[1], v[0])).collect();
    let r2 = p.forward.bhyt_fit.as_ref().map(|f| f.r2).unwrap_or(f64::NAN);
    let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let series = vec![
        Series { name: "tokens".into(), points: pts, color: 0, dashed: false, scatter: true },
        line("y = x", vec![(lo, lo), (hi, hi)], 3, true),
    ];
    let caption = format!(
        "{} at step {}: BHyT's approximated FFN-input statistic ŝ² against the exact one, R² = {r2:.4} (BHyT Fig. 2).",
        r.label, p.step
    );
    Ok(Some(fig(
        dir,
        "bhyt_scatter",
        caption,
        Chart {
            title: "BHyT variance approximation",
            x_label: "exact",
            y_label: "approximated ŝ²",
            log_x: true,
            log_y: true,
            series,
            top_marks: Vec::new(),
        },
    )?))
}
