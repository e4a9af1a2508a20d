//! Figures for the schemes that learn their residual scales or bound their logits: the learned
//! gates (ReZero, SkipInit, LayerScale) and x0-mixing λ's against depth, the largest
//! attention logit over training (soft-capping, QK-norm, QK-clip), the attention mass on the
//! first token over training (the attention sink that gated attention and learned sinks remove)
//! gated attention's mean gate, the residual streams' composite mixing gain, and what Attention
//! Residuals' reads weigh over depth. Each appears only when some run has what it plots.

use super::data::RunData;
use super::figures::{Figure, fig, line, over_probes};
use super::plot::{Chart, Series};
use crate::probe::ProbeRecord;
use crate::probe::snapshot::SublayerProbe;
use std::path::Path;

/// Both figures, those that apply.
pub fn figures(dir: &Path, runs: &[RunData]) -> anyhow::Result<Vec<Figure>> {
    let mut figs = Vec::new();
    figs.extend(gate_profile(dir, runs)?);
    figs.extend(max_logit_over_training(dir, runs)?);
    figs.extend(first_key_mass_over_training(dir, runs)?);
    figs.extend(attention_gate_over_training(dir, runs)?);
    figs.extend(stream_gain_over_training(dir, runs)?);
    figs.extend(depth_attention_profile(dir, runs)?);
    Ok(figs)
}

/// `(l, mean g)` of every gate at a probe: a sublayer's gate at its sublayer `l`
/// (`layers.K.attn.gate` is `2K + 1`, `ffn` `2K + 2`), a layer's shared gate at both.
pub fn gates_by_sublayer(p: &ProbeRecord) -> Vec<(f64, f64)> {
    let mut v = Vec::new();
    for (name, s) in &p.forward.scales {
        let Some(rest) = name.strip_prefix("layers.").and_then(|r| r.strip_suffix(".gate")) else { continue };
        let (k, branch) = rest.split_once('.').unwrap_or((rest, "both"));
        let Ok(k) = k.parse::<usize>() else { continue };
        let ls: &[usize] = match branch {
            "attn" => &[1],
            "ffn" => &[2],
            _ => &[1, 2],
        };
        v.extend(ls.iter().map(|o| ((2 * k + o) as f64, s.mean)));
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// `(k, λ₀)` of every layer's x0-mixing weight at a probe (1-based layer `k`).
fn x0_by_layer(p: &ProbeRecord) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = p
        .forward
        .scales
        .iter()
        .filter_map(|(name, s)| {
            let k = name.strip_prefix("layers.")?.strip_suffix(".x0_lambda")?.parse::<usize>().ok()?;
            Some(((k + 1) as f64, s.mean))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// The learned gates against depth (solid) at each best run's last probe, and the x0-mixing
/// λ₀ against layer (dashed).
fn gate_profile(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let mut series: Vec<Series> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let Some(p) = r.last_probe() else { continue };
        let (gates, x0) = (gates_by_sublayer(p), x0_by_layer(p));
        if !gates.is_empty() {
            series.push(line(r.legend(), gates, i, false));
        }
        if !x0.is_empty() {
            series.push(line(format!("{} λ₀ (by layer k)", r.legend()), x0, i, true));
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let caption =
        "Learned residual gates g (mean over a LayerScale λ ∈ ℝ^d) against sublayer l, and x0-mixing weights \
        λ₀ against layer k (dashed), at the last probe of each recipe's best run. ReZero and SkipInit start every gate \
        at 0, LayerScale at CaiT's λ₀, x0 mixing at λ₀ = 0."
            .to_string();
    let chart =
        Chart::new("Learned residual gates vs depth", "sublayer l (gates) / layer k (λ₀)", "mean g, λ₀", series);
    fig(dir, "residual_gates", caption, chart).map(Some)
}

/// The largest attention logit over all heads and layers at each probe, one line per run.
fn max_logit_over_training(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let series = over_probes(runs, |p| {
        let m = p.forward.sublayers.iter().filter_map(|s| s.attn_max_logit).fold(f64::NAN, f64::max);
        m.is_finite().then_some(m)
    });
    if series.is_empty() {
        return Ok(None);
    }
    let caption = "Largest attention logit q·k/√h over every head and layer at each probe, one line per run: \
        the growth that soft-capping bounds at its cap, QK-clip pulls back to τ after each step and QK-norm \
        removes."
        .to_string();
    let chart = Chart::new("Largest attention logit over training", "step", "max q·k/√h", series);
    fig(dir, "max_attention_logit", caption, chart).map(Some)
}

/// The mean over a probe's attention sublayers of `pick`, when some sublayer has it.
fn mean_over_attention(p: &ProbeRecord, pick: fn(&SublayerProbe) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = p.forward.sublayers.iter().filter_map(pick).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The attention probability on the first token, mean over layers, heads and query rows 2…T,
/// at each probe, one line per run.
fn first_key_mass_over_training(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let series = over_probes(runs, |p| mean_over_attention(p, |s| s.attn_first_key_mass));
    if series.is_empty() {
        return Ok(None);
    }
    let caption = "Attention probability on the first token (mean over layers, heads and query positions 2…T) at         each probe, one line per run: the attention sink, which the Peri-LN paper ties to massive activations and         which gated attention and learned sinks (gpt-oss) give the heads another way out of. Uniform attention over         T keys would put about ln(T)/T there."
        .to_string();
    let chart = Chart::new("Attention on the first token over training", "step", "mean p(first key)", series);
    fig(dir, "first_token_attention", caption, chart).map(Some)
}

/// Gated attention's mean gate σ(X W_θ) over its layers at each probe, one line per gated run.
fn attention_gate_over_training(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let series = over_probes(runs, |p| mean_over_attention(p, |s| s.attn_gate_mean));
    if series.is_empty() {
        return Ok(None);
    }
    let caption = "Mean attention output gate σ(X W_θ) over layers at each probe, one line per gated run (0.5 at         initialisation; the gated attention paper reports sparse gates, mean ≈ 0.1, after training)."
        .to_string();
    let chart = Chart::new("Attention output gate over training", "step", "mean σ(X W_θ)", series);
    fig(dir, "attention_gate", caption, chart).map(Some)
}

/// The residual streams' composite backward gain at each probe, one line per stream run.
fn stream_gain_over_training(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let series = over_probes(runs, |p| p.forward.stream_gain.map(|g| g.backward));
    if series.is_empty() {
        return Ok(None);
    }
    let caption = "Backward gain of the composite residual mixing Π_l R_lᵀ over all sublayers (its largest \
        absolute column sum, of the token-mean mixings) at each probe, one line per run with residual streams: \
        mHC's \"Amax gain magnitude\". Doubly stochastic mixing (mHC, mHC-lite) holds it at 1; unconstrained \
        Hyper-Connections may drift from it (the mHC paper reports ~3000 at 27B)."
        .to_string();
    let chart = Chart::new("Residual-stream mixing gain over training", "step", "composite backward gain", series);
    fig(dir, "stream_gain", caption, chart).map(Some)
}

/// `(l, α)` points over the sublayers.
type Profile = Vec<(f64, f64)>;

/// `(l, α on X_1)` and `(l, α on the most recent source)` of every sublayer's read at a probe.
fn depth_weights_by_sublayer(p: &ProbeRecord) -> (Profile, Profile) {
    let reads =
        p.forward.sublayers.iter().enumerate().filter_map(|(i, s)| Some(((i + 1) as f64, s.depth_weights.as_ref()?)));
    let (mut first, mut latest) = (Vec::new(), Vec::new());
    for (l, w) in reads {
        first.extend(w.first().map(|a| (l, *a)));
        latest.extend(w.last().filter(|_| w.len() > 1).map(|a| (l, *a)));
    }
    (first, latest)
}

/// Attention Residuals: the weight each sublayer's read puts on the embedding (solid) and on the
/// most recent source (dashed), at the last probe of each recipe's best run.
fn depth_attention_profile(dir: &Path, runs: &[RunData]) -> anyhow::Result<Option<Figure>> {
    let mut series: Vec<Series> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let Some(p) = r.last_probe() else { continue };
        let (first, latest) = depth_weights_by_sublayer(p);
        if !first.is_empty() {
            series.push(line(format!("on X_1: {}", r.legend()), first, i, false));
            series.push(line(format!("on the latest: {}", r.legend()), latest, i, true));
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let caption = "Attention Residuals: the softmax weight α that sublayer l's read over depth puts on the \
        embedding X_1 (solid) and on the most recent source (dashed: the previous sublayer's output, or the open \
        block's sum), mean over tokens, at the last probe of each recipe's best run. At initialisation every read is \
        uniform (1/S over its S sources); a plain residual sum weighs every source equally."
        .to_string();
    let chart = Chart::new("Attention over depth", "sublayer l", "α (mean over tokens)", series);
    fig(dir, "depth_attention", caption, chart).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared gate (ReZero) sits at both of its layer's sublayers; per-sublayer gates at
    /// their own: layer 0's attention is l = 1, its FFN l = 2, layer 1's l = 3 and 4.
    #[test]
    fn gates_land_on_their_sublayers() {
        let json = r#"{"step": 1, "grad_norm": 1.0, "spikes_total": 0, "blocks": [], "warnings": [],
            "sublayers": [], "final_tau": 0.5, "scales": {}, "variance_fit": null}"#;
        let mut p: ProbeRecord = serde_json::from_str(json).unwrap();
        let s = |mean| crate::probe::snapshot::ScaleStats { mean, min: mean, max: mean };
        p.forward.scales.insert("layers.1.gate".into(), s(0.5));
        p.forward.scales.insert("layers.0.ffn.gate".into(), s(0.25));
        p.forward.scales.insert("layers.0.ffn.output_norm.gain".into(), s(9.0));
        assert_eq!(gates_by_sublayer(&p), vec![(2.0, 0.25), (3.0, 0.5), (4.0, 0.5)]);
    }
}
