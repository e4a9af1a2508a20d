//! The report's figures, in the papers' styles. Every cross-recipe figure names each run's
//! learning rate and seed in its legend; every per-recipe figure names the recipe in its title.

use super::data::RunData;
use super::plot::{Chart, Series, draw, draw_grid};
use crate::probe::snapshot::SublayerProbe;
use crate::sweep::aggregate::MethodSummary;
use std::path::Path;

/// A drawn figure: file stem (PNG and SVG beside it), caption and the SVG text.
pub struct Figure {
    pub stem: String,
    pub caption: String,
    pub svg: String,
}

pub(super) fn fig(dir: &Path, stem: &str, caption: String, chart: Chart) -> anyhow::Result<Figure> {
    let svg = draw(&chart, &dir.join(stem))?;
    Ok(Figure { stem: stem.to_string(), caption, svg })
}

pub(super) fn line(name: impl Into<String>, points: Vec<(f64, f64)>, color: usize, dashed: bool) -> Series {
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
    let mut lrs: Vec<f64> = methods.iter().flat_map(|m| m.curve.iter().map(|p| p.lr)).collect();
    lrs.sort_by(f64::total_cmp);
    lrs.dedup();
    let mut chart = Chart::new(
        "Final validation loss vs learning rate",
        "peak learning rate",
        "final validation loss (nats/token)",
        series,
    )
    .log(true, false);
    chart.top_marks = marks;
    chart.x_ticks = lrs;
    chart.clip_outliers = true;
    fig(
        dir,
        "lr_curves",
        "Final validation loss against peak learning rate for each recipe (grid runs, one seed per rate); × at the top \
            marks a diverged run; ▲ on the top edge a value above the plotted range, printed beside it (KiteNorm Fig. \
            1a style)."
            .into(),
        chart,
    )
}

/// Training loss, validation loss and gradient norm over steps (Peri-LN Fig. 3 style).
pub fn curves(dir: &Path, runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    let mk = |title: &str, y: &str, log_y: bool, f: &dyn Fn(&RunData) -> Vec<(f64, f64)>| {
        let series = runs.iter().enumerate().map(|(i, r)| line(r.legend(), f(r), i, false)).collect();
        let mut c = Chart::new(title, "step", y, series).log(false, log_y);
        // × at the top: steps the skip-step rule skipped.
        c.top_marks = runs
            .iter()
            .enumerate()
            .flat_map(|(i, r)| r.skipped_steps().into_iter().map(move |s| (s as f64, i)))
            .collect();
        c
    };
    let which = "each recipe's best run (its learning rate and seed in the legend)";
    let skipped = runs.iter().any(|r| !r.skipped_steps().is_empty());
    let skips = if skipped { "; × at the top marks a step whose update skip-step refused" } else { "" };
    let mut figs = vec![
        fig(
            dir,
            "train_loss",
            format!("Training loss (CE + λ·R) per step of {which}{skips}."),
            mk("Training loss", "loss", false, &|r| r.train_series(|t| t.loss)),
        )?,
        fig(
            dir,
            "val_loss",
            format!("Validation loss over training, {which}."),
            mk("Validation loss", "validation loss", false, &|r| r.eval_series()),
        )?,
        fig(
            dir,
            "grad_norm",
            format!(
                "Global gradient norm before clipping per step, {which}; spikes stand out on the log scale{skips}."
            ),
            mk("Gradient norm", "gradient norm (log)", true, &|r| r.train_series(|t| t.grad_norm)),
        )?,
    ];
    if runs.iter().any(|r| !r.train_series_some(|t| t.update_ratio).is_empty()) {
        figs.push(fig(
            dir,
            "update_ratio",
            format!(
                "Size of the applied update relative to the weights, ‖ΔW‖/‖W‖ over all parameters, per step, {which} \
                 (Marin's early sign of loss spikes; per layer and parameter kind in probes.jsonl)."
            ),
            mk("Update/weight ratio", "|ΔW| / |W| (log)", true, &|r| r.train_series_some(|t| t.update_ratio)),
        )?);
    }
    figs.extend(clip_figures(dir, runs, which)?);
    Ok(figs)
}

/// Under ZClip: each run's gradient norm and the threshold it was clipped to; under AGC: the
/// fraction of units clipped per step (`optim.clip`).
fn clip_figures(dir: &Path, runs: &[RunData], which: &str) -> anyhow::Result<Vec<Figure>> {
    use crate::run::metrics::{ClipStepRecord, TrainRecord};
    let threshold = |t: &TrainRecord| match t.clip.as_deref() {
        Some(ClipStepRecord::Zclip { threshold, .. }) => *threshold,
        _ => None,
    };
    let fraction = |t: &TrainRecord| match t.clip.as_deref() {
        Some(ClipStepRecord::Agc { clipped, units }) => Some(*clipped as f64 / (*units).max(1) as f64),
        _ => None,
    };
    let mut figs = Vec::new();
    if runs.iter().any(|r| !r.train_series_some(threshold).is_empty()) {
        let series = runs.iter().enumerate().flat_map(|(i, r)| {
            let norm = line(r.legend(), r.train_series(|t| t.grad_norm), i, false);
            [norm, line(format!("{}: threshold", r.legend()), r.train_series_some(threshold), i, true)]
        });
        let chart = Chart::new("Gradient norm and ZClip's threshold", "step", "norm (log)", series.collect());
        figs.push(fig(
            dir,
            "clip_threshold",
            format!(
                "Global gradient norm before clipping (solid) and the threshold it was clipped to (dashed: ZClip's, \
                 capped by optim.grad_clip; absent where nothing clipped), per step, {which}."
            ),
            chart.log(false, true),
        )?);
    }
    if runs.iter().any(|r| !r.train_series_some(fraction).is_empty()) {
        let series = runs.iter().enumerate().map(|(i, r)| line(r.legend(), r.train_series_some(fraction), i, false));
        let chart = Chart::new("Units AGC clipped", "step", "fraction of units clipped", series.collect());
        figs.push(fig(
            dir,
            "agc_clipped",
            format!("Fraction of units (output neurons, embedding rows, vectors) AGC clipped per step, {which}."),
            chart,
        )?);
    }
    Ok(figs)
}

/// Hidden-state variance and mean |x| against depth at the end of each best run (Peri-LN Fig.
/// 1/5, BHyT Fig. 3), and each recipe's sublayer gradient norms at the start and the end as
/// small multiples (Peri-LN Fig. 6).
pub fn depth_profiles(dir: &Path, runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    depth_profiles_tagged(dir, runs, "", "")
}

/// [`depth_profiles`] with `tag` appended to each figure's file name and `at` (where on a
/// scaling ladder) to each caption.
pub fn depth_profiles_tagged(dir: &Path, runs: &[RunData], tag: &str, at: &str) -> anyhow::Result<Vec<Figure>> {
    let mut figs = hidden_state_profiles(dir, runs, tag, at)?;
    figs.extend(massive_profile(dir, runs, tag, at)?);
    figs.extend(output_gain_profile(dir, runs, tag, at)?);
    figs.extend(gradient_panels(dir, runs, tag, at)?);
    Ok(figs)
}

/// Each best run's value of one sublayer statistic against depth, at its last probe.
fn at_last_probe(runs: &[RunData], value: fn(&SublayerProbe) -> Option<f64>) -> Vec<Series> {
    runs.iter()
        .enumerate()
        .filter_map(|(i, r)| Some(line(r.legend(), RunData::per_layer(r.last_probe()?, value), i, false)))
        .collect()
}

/// Variance, mean |x| and angular distance of the hidden state against depth.
fn hidden_state_profiles(dir: &Path, runs: &[RunData], tag: &str, at: &str) -> anyhow::Result<Vec<Figure>> {
    let at_end = format!("at the last probe of each recipe's best run{at}");
    let variance = at_last_probe(runs, |s| Some(s.x.var));
    let mean_abs = at_last_probe(runs, |s| Some(s.x.mean_abs));
    let angular = at_last_probe(runs, |s| Some(s.angular_distance));
    Ok(vec![
        fig(
            dir,
            &format!("hidden_var{tag}"),
            format!("Variance of the hidden state X_l entering each sublayer, {at_end}."),
            Chart::new("Hidden-state variance vs depth", "sublayer l", "Var(X_l) (log)", variance).log(false, true),
        )?,
        fig(
            dir,
            &format!("mean_abs{tag}"),
            format!("Mean |X_l| {at_end}."),
            Chart::new("Mean |x| vs depth", "sublayer l", "mean |X_l| (log)", mean_abs).log(false, true),
        )?,
        fig(
            dir,
            &format!("angular_distance{tag}"),
            format!(
                "Angular distance arccos(cos(X_l, X_{{l+1}}))/π between consecutive hidden states, mean over \
                    tokens, {at_end} (Peri-LN Fig. 7a): near 0, a sublayer barely changes the stream."
            ),
            Chart::new("Angular distance vs depth", "sublayer l", "angular distance", angular),
        )?,
    ])
}

/// Massive activations (Sun et al. 2024; the Peri-LN paper §3, Figs. 5–6): the largest |X_l| over
/// the median |X_l| against depth at each best run's last probe, and in the caption where each
/// run's largest entry sits. `None` when no probe has the median (files from before it).
fn massive_profile(dir: &Path, runs: &[RunData], tag: &str, at: &str) -> anyhow::Result<Option<Figure>> {
    let ratio = |s: &SublayerProbe| Some(s.x.massive_ratio()).filter(|r| r.is_finite());
    let series: Vec<Series> = at_last_probe(runs, ratio).into_iter().filter(|s| !s.points.is_empty()).collect();
    if series.is_empty() {
        return Ok(None);
    }
    let places: Vec<String> =
        runs.iter().filter_map(|r| Some(format!("{}: {}", r.legend(), largest_at(r.last_probe()?)?))).collect();
    let caption = format!(
        "Largest |X_l| over the median |X_l| entering each sublayer, at the last probe of each recipe's best run{at} \
            (Sun et al.'s massive activations reach thousands of times the median). Largest entries: {}.",
        places.join("; ")
    );
    let chart = Chart::new("Massive activations vs depth", "sublayer l", "max |X_l| / median |X_l| (log)", series);
    Ok(Some(fig(dir, &format!("massive_activations{tag}"), caption, chart.log(false, true))?))
}

/// Where the probe's largest |X_l| sits: its value over the median, sublayer, token and channel.
fn largest_at(p: &crate::probe::ProbeRecord) -> Option<String> {
    let s = p
        .forward
        .sublayers
        .iter()
        .filter(|s| s.x.massive_ratio().is_finite())
        .max_by(|a, b| a.x.max_abs.total_cmp(&b.x.max_abs))?;
    let [_, token, channel] = *s.x.top_at.first()?;
    Some(format!("{:.1}× the median in sublayer {} at token {token}, channel {channel}", s.x.massive_ratio(), s.l))
}

/// The learned gains of the output norms against depth, where recipes have them.
fn output_gain_profile(dir: &Path, runs: &[RunData], tag: &str, at: &str) -> anyhow::Result<Option<Figure>> {
    let gains: Vec<Series> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some(line(r.legend(), output_gains(r.last_probe()?), i, false)))
        .filter(|s| !s.points.is_empty())
        .collect();
    if gains.is_empty() {
        return Ok(None);
    }
    let caption = format!(
        "Mean learned gain γ of each sublayer's output norm, at the last probe of each recipe's best run{at} (Peri-LN Fig. 7b)."
    );
    let chart = Chart::new("Output-norm scale vs depth", "sublayer l", "mean γ of N_out", gains);
    fig(dir, &format!("output_gain{tag}"), caption, chart).map(Some)
}

/// Each recipe's sublayer gradient norms at the first and the last probe, one panel each.
fn gradient_panels(dir: &Path, runs: &[RunData], tag: &str, at: &str) -> anyhow::Result<Option<Figure>> {
    let panels: Vec<Chart> = runs.iter().enumerate().filter_map(|(i, r)| grad_panel(r, i)).collect();
    if panels.is_empty() {
        return Ok(None);
    }
    let stem = format!("grad_layers{tag}");
    let svg = draw_grid(&panels, 2, &dir.join(&stem))?;
    let caption = format!(
        "Gradient norm of each sublayer's parameters, one panel per recipe: at the first probe (step 1, dashed) \
            and at the last (solid) (Peri-LN Fig. 6 style){at}."
    );
    Ok(Some(Figure { stem, caption, svg }))
}

/// `(l, mean γ)` of every sublayer's output norm with a learned gain (`layers.K.attn.output_norm.
/// gain` is sublayer 2K + 1, its FFN 2K + 2).
fn output_gains(p: &crate::probe::ProbeRecord) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = p
        .forward
        .scales
        .iter()
        .filter_map(|(name, s)| {
            let rest = name.strip_prefix("layers.")?.strip_suffix(".output_norm.gain")?;
            let (k, branch) = rest.split_once('.')?;
            let k: usize = k.parse().ok()?;
            let l = 2 * k + if branch == "attn" { 1 } else { 2 };
            Some((l as f64, s.mean))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Statistics of `z_l` after the residual addition in the final attention sublayer over
/// training, one line per run (KiteNorm Fig. 3's three panels: variance, largest |z| and token
/// alignment), each its own chart with the runs' legend; none without probes.
pub fn final_attention(dir: &Path, runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    let over = |value: fn(&SublayerProbe) -> f64| -> Vec<Series> {
        over_probes(runs, |p| {
            let n = p.forward.sublayers.len();
            Some(value(p.forward.sublayers.get(n.checked_sub(2)?)?))
        })
    };
    let var = over(|s| s.z.var);
    if var.is_empty() {
        return Ok(Vec::new());
    }
    let what = "after the residual addition in the final attention sublayer over training, one line per run \
        (KiteNorm Fig. 3)";
    Ok(vec![
        fig(
            dir,
            "final_attention_var",
            format!("Var(z) over the hidden dimension {what}."),
            Chart::new("Var(z), final attention sublayer", "step", "Var(z) (log)", var).log(false, true),
        )?,
        fig(
            dir,
            "final_attention_max",
            format!("Largest |z| {what}."),
            Chart::new("max |z|, final attention sublayer", "step", "max |z| (log)", over(|s| s.z.max_abs))
                .log(false, true),
        )?,
        fig(
            dir,
            "final_attention_tau",
            format!("Token alignment τ(z) {what}; τ → 1 is rank collapse."),
            Chart::new("token alignment τ(z), final attention sublayer", "step", "τ(z)", over(|s| s.tau_sum)),
        )?,
    ])
}

/// One line per run of `value` at each of its probes (probes without a value skipped), runs
/// without any point left out.
pub(super) fn over_probes(runs: &[RunData], value: impl Fn(&crate::probe::ProbeRecord) -> Option<f64>) -> Vec<Series> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| {
            let pts = r.probes.iter().filter_map(|p| Some((p.step as f64, value(p)?))).collect();
            line(r.legend(), pts, i, false)
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Run `i`'s sublayer gradient norms at its first probe (dashed) and its last (solid); `None`
/// without probes.
fn grad_panel(r: &RunData, i: usize) -> Option<Chart> {
    let last = r.last_probe()?;
    let mut s = Vec::new();
    if let Some(p) = r.first_probe() {
        s.push(line("", RunData::per_layer(p, |s| s.grad_norm), i, true));
    }
    let end = RunData::per_layer(last, |s| s.grad_norm);
    // A log scale cannot show zeros: say so in the title.
    let zero = !end.is_empty() && end.iter().all(|p| p.1 <= 0.0);
    s.push(line("", end, i, false));
    let title = if zero {
        format!("{}: all exactly 0 at step {}", r.legend(), last.step)
    } else {
        format!("{} (end: step {})", r.legend(), last.step)
    };
    Some(Chart::new(title, "sublayer l", "grad norm (log)", s).log(false, true))
}

/// For one run: Var(X_l) against depth at several steps, and τ(z_l) of the attention sublayers
/// over training (KiteNorm Fig. 9).
pub fn over_training(dir: &Path, r: &RunData, slug: &str) -> anyhow::Result<Vec<Figure>> {
    let steps = r.probe_steps(5);
    let var = steps
        .iter()
        .enumerate()
        .map(|(i, p)| line(format!("step {}", p.step), RunData::per_layer(p, |s| Some(s.x.var)), i, false))
        .collect();
    let tau = attention_tau_lines(r);
    let who = r.legend();
    Ok(vec![
        fig(
            dir,
            &format!("hidden_var_steps_{slug}"),
            format!("{who}: Var(X_l) against depth at several steps."),
            Chart::new(format!("{who}: hidden-state variance over training"), "sublayer l", "Var(X_l) (log)", var)
                .log(false, true),
        )?,
        fig(
            dir,
            &format!("tau_{slug}"),
            format!(
                "{who}: token alignment τ(z_l) of the hidden state after the residual addition in attention \
                    sublayers, over training (KiteNorm Fig. 9); τ → 1 is rank collapse."
            ),
            Chart::new(format!("{who}: τ(z_l) in attention sublayers over training"), "step", "τ(z_l)", tau),
        )?,
    ])
}

/// One line per attention sublayer (every one up to 8 layers, 8 evenly spaced beyond): τ(z_l)
/// at every probe step, labelled by its Transformer layer as Fig. 9 is.
fn attention_tau_lines(r: &RunData) -> Vec<Series> {
    let n_layers = r.last_probe().map(|p| p.forward.sublayers.len() / 2).unwrap_or(0);
    let pick: Vec<usize> =
        if n_layers <= 8 { (0..n_layers).collect() } else { (0..8).map(|i| i * (n_layers - 1) / 7).collect() };
    let over_steps = |l: usize| -> Vec<(f64, f64)> {
        r.probes.iter().filter_map(|p| Some((p.step as f64, p.forward.sublayers.get(l)?.tau_sum))).collect()
    };
    pick.iter().enumerate().map(|(c, &k)| line(format!("layer {}", k + 1), over_steps(2 * k), c, false)).collect()
}

/// R² of `approx` against `exact` on the log values, about the identity line:
/// `1 − Σ(ln a − ln e)² / Σ(ln a − mean ln a)²`.
pub fn log_r2(pairs: &[[f64; 2]]) -> f64 {
    let logs: Vec<(f64, f64)> =
        pairs.iter().filter(|p| p[0] > 0.0 && p[1] > 0.0).map(|p| (p[0].ln(), p[1].ln())).collect();
    let mean = logs.iter().map(|p| p.0).sum::<f64>() / logs.len() as f64;
    let ss_res: f64 = logs.iter().map(|(a, e)| (a - e).powi(2)).sum();
    let ss_tot: f64 = logs.iter().map(|(a, _)| (a - mean).powi(2)).sum();
    1.0 - ss_res / ss_tot
}

/// Layers (1-based) with a pair more than 100× off in either direction, with their count.
pub fn off_by_100(pairs: &[[f64; 2]], layers: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (p, &l) in pairs.iter().zip(layers) {
        if p[0] > 0.0 && p[1] > 0.0 && (p[0] / p[1]).log10().abs() > 2.0 {
            match out.iter_mut().find(|(layer, _)| *layer == l) {
                Some(e) => e.1 += 1,
                None => out.push((l, 1)),
            }
        }
    }
    out
}

/// BHyT: approximated against exact FFN-input statistic (BHyT Fig. 2).
pub fn bhyt_scatter(dir: &Path, r: &RunData) -> anyhow::Result<Option<Figure>> {
    let Some(p) = r.probes.iter().rev().find(|p| !p.forward.variance_sample.is_empty()) else { return Ok(None) };
    let sample = &p.forward.variance_sample;
    let pts: Vec<(f64, f64)> = sample.iter().map(|v| (v[1], v[0])).collect();
    let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let series = vec![
        Series { name: "tokens".into(), points: pts, color: 0, dashed: false, scatter: true },
        line("y = x", vec![(lo, lo), (hi, hi)], 3, true),
    ];
    let off = off_by_100(sample, &p.forward.variance_sample_layer);
    let off_text = if off.is_empty() {
        "no token is off by more than 100×".to_string()
    } else {
        let l: Vec<String> = off.iter().map(|(layer, n)| format!("layer {layer} ({n} tokens)")).collect();
        format!("off by more than 100×: {}", l.join(", "))
    };
    let caption = format!(
        "{} at step {}: BHyT's approximated FFN-input statistic ŝ² against the exact one; R² of the log values about \
            y = x: {:.4}; {off_text} (BHyT Fig. 2).",
        r.legend(),
        p.step,
        log_r2(sample)
    );
    let title = format!("{}: BHyT variance approximation", r.label);
    Ok(Some(fig(dir, "bhyt_scatter", caption, Chart::new(title, "exact", "approximated ŝ²", series).log(true, true))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_r2_and_outliers_by_hand() {
        // Exact on the identity: R² = 1.
        assert_eq!(log_r2(&[[1.0, 1.0], [10.0, 10.0], [100.0, 100.0]]), 1.0);
        // ln a = 0, ln 10, ln 100; ln e off by ln 10 on the last: ss_res = ln²10,
        // ss_tot = 2 ln²10 (deviations −ln10, 0, ln10): R² = 1 − 1/2.
        let r2 = log_r2(&[[1.0, 1.0], [10.0, 10.0], [100.0, 10.0]]);
        assert!((r2 - 0.5).abs() < 1e-12, "{r2}");
        let pairs = [[1.0, 1.0], [500.0, 2.0], [1.0, 300.0], [3.0, 2.0]];
        assert_eq!(off_by_100(&pairs, &[1, 4, 4, 2]), [(4, 2)]);
    }
}
