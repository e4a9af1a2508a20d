//! One probe of a model on one batch: per sublayer, the hidden-state statistics of `X_l` and
//! `z_l`, the LayerNorm-Jacobian bound where a norm sits on the residual path, token
//! alignment, angular distance to the next hidden state, attention max logit and entropy, and
//! for BHyT the approximated against the exact FFN-input statistic; plus every learned norm
//! scale. All device reductions are brought to the host in one transfer.

use super::fit::{Fit, fit};
use super::stats::{
    Fetched, Gather, HiddenSummary, Slot, Spread, angular_distance, cosines, hidden_summary, spread, token_alignment,
};
use crate::io::json::{nan, nan_pairs, nan_vec};
use crate::io::tensorboard::Histogram;
use crate::model::attention::self_attention::STATS;
use crate::model::base::names::{is_residual_scale, is_stream_norm};
use crate::model::base::params::named_tensors;
use crate::model::ffn::moe::balance::ROUTING;
use crate::model::{SublayerTrace, Traced, Transformer};
use crate::norm::Norm;
use crate::recipe::Branch;
use crate::stats::{mean, min_max};
use burn::module::Param;
use burn::tensor::{Int, Tensor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Statistics of one hidden-state tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HiddenStats {
    /// Variance over the hidden dimension, mean over batch and tokens.
    #[serde(deserialize_with = "nan")]
    pub var: f64,
    #[serde(deserialize_with = "nan")]
    pub mean_abs: f64,
    #[serde(deserialize_with = "nan")]
    pub max_abs: f64,
    /// The largest |x| values, decreasing.
    #[serde(deserialize_with = "nan_vec")]
    pub top_abs: Vec<f64>,
    /// Median |x| over every entry (the lower median, as PyTorch's; of an evenly strided
    /// sample of 65 536 entries in larger tensors): the scale massive activations are measured
    /// against (Sun et al. 2024; the Peri-LN paper §3). NaN in files written before it existed.
    #[serde(default = "crate::io::json::nan_default", deserialize_with = "nan")]
    pub median_abs: f64,
    /// `[row, token, channel]` of each `top_abs` entry: in the probe batch, the window, the
    /// token's position in it and the hidden channel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_at: Vec<[usize; 3]>,
}

impl HiddenStats {
    /// The largest |x| over the median |x|: "massive" when it reaches the thousands in Sun et
    /// al.'s LLMs (their threshold: above 100 and 1000 × the median).
    pub fn massive_ratio(&self) -> f64 {
        self.max_abs / self.median_abs
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SublayerProbe {
    /// 1-based sublayer index l (2L in all).
    pub l: usize,
    /// 1-based Transformer layer k.
    pub layer: usize,
    /// `attn` or `ffn`.
    pub branch: Branch,
    /// `X_l`, entering the sublayer.
    pub x: HiddenStats,
    /// `z_l`, after the residual addition and before any outer norm.
    pub z: HiddenStats,
    /// Mean over tokens of `‖γ‖∞ / σ(z_l)` (KiteNorm eq. 22) when an outer LayerNorm, scalar LN
    /// or RMSNorm follows the sum.
    pub jacobian_bound: Option<f64>,
    /// Token alignment τ(X_l) of the sublayer's input (KiteNorm eq. 6, over the batch).
    #[serde(deserialize_with = "nan")]
    pub tau: f64,
    /// Token alignment τ(z_l) of the hidden state after the residual addition, before any outer
    /// norm: where KiteNorm measures rank collapse (Figs. 3 and 9). Equal to τ(X_{l+1}) when
    /// no outer norm follows; an outer LayerNorm re-centres every token, which changes it.
    #[serde(default = "crate::io::json::nan_default", deserialize_with = "nan")]
    pub tau_sum: f64,
    /// Mean over all (batch, token) positions of arccos(cos(X_l, X_{l+1}))/π.
    #[serde(deserialize_with = "nan")]
    pub angular_distance: f64,
    pub attn_max_logit: Option<f64>,
    /// Attention sublayers: the largest logit `q·k/√h` of each head (what QK-clip watches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_head_max_logit: Option<Vec<f64>>,
    pub attn_entropy: Option<f64>,
    /// Attention sublayers: the mean attention probability on the first key over heads and
    /// query rows 2…T (the attention sink's mass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_first_key_mass: Option<f64>,
    /// Gated attention: the mean of the sigmoid gate `σ(X W_θ)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_gate_mean: Option<f64>,
    /// FFN sublayers whose input norm approximates (BHyT, RMSNorm-Approx): ŝ² (Theorem 3.5)
    /// against the exact mean square of the FFN input.
    #[serde(alias = "bhyt_fit")]
    pub variance_fit: Option<Fit>,
    /// Filled by the trainer or `normlab probe` when gradients are available.
    pub grad_norm: Option<f64>,
    pub grad_cv_window: Option<f64>,
    pub grad_cv_run: Option<f64>,
    /// Bounded (point-wise) input norms, DyT, BHyT and Derf: the fraction of the squashing
    /// function's arguments where its slope is below 2 % of its slope at 0 (`|u| > 2.65` for
    /// tanh, `|u| > √ln 50 ≈ 1.98` for erf): saturated entries pass almost no gradient.
    #[serde(default)]
    pub saturation: Option<f64>,
    /// With residual streams: each stream's variance and the residual mixing's statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<super::streams::StreamProbe>,
    /// With Attention Residuals: the weights `α` this sublayer's read puts on each source (the
    /// embedding first, the most recent last), mean over tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth_weights: Option<Vec<f64>>,
}

/// A learned norm scale: mean, min and max over its entries (one entry for scalars).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleStats {
    #[serde(deserialize_with = "nan")]
    pub mean: f64,
    #[serde(deserialize_with = "nan")]
    pub min: f64,
    #[serde(deserialize_with = "nan")]
    pub max: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardProbe {
    pub sublayers: Vec<SublayerProbe>,
    /// τ of the last hidden state `X_{2L+1}`.
    #[serde(deserialize_with = "nan")]
    pub final_tau: f64,
    /// A bounded final norm: the saturated fraction of its arguments (see
    /// [`SublayerProbe::saturation`]). When it nears 1, almost no gradient reaches the stream.
    #[serde(default)]
    pub final_saturation: Option<f64>,
    /// The output logits: what a z-loss controls.
    #[serde(default)]
    pub output_logits: Option<LogitStats>,
    /// Every learned norm parameter, by name (`layers.3.ffn.output_norm.gain`).
    pub scales: BTreeMap<String, ScaleStats>,
    /// Recipes whose FFN norms approximate (BHyT, RMSNorm-Approx): Theorem 3.5's fit pooled
    /// over all FFN sublayers.
    #[serde(alias = "bhyt_fit")]
    pub variance_fit: Option<Fit>,
    /// Up to 500 evenly spaced `[ŝ², exact]` pairs of that fit, for scatter plots.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "nan_pairs", alias = "bhyt_sample")]
    pub variance_sample: Vec<[f64; 2]>,
    /// The 1-based Transformer layer of each `variance_sample` pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "bhyt_sample_layer")]
    pub variance_sample_layer: Vec<usize>,
    /// With residual streams: the composite mixing's forward and backward gains over depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_gain: Option<super::streams::StreamGain>,
    /// A mixture of experts' routing per MoE layer (empty for a dense model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routers: Vec<super::routing::RouterProbe>,
}

/// The output logits over the probe batch: the mean over tokens of their RMS, and the mean and
/// largest log-partition `log Z = log Σ_v exp(ℓ_v)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogitStats {
    #[serde(deserialize_with = "nan")]
    pub rms: f64,
    #[serde(deserialize_with = "nan")]
    pub log_z_mean: f64,
    #[serde(deserialize_with = "nan")]
    pub log_z_max: f64,
}

struct Pending {
    x: Slot,
    z: Slot,
    tau: Slot,
    tau_sum: Slot,
    cos: Slot,
    bound: Option<(Slot, Option<Slot>)>,
    bhyt: Option<(Slot, Slot)>,
    saturation: Option<Slot>,
    streams: Option<super::streams::StreamSlots>,
    depth_weights: Option<Slot>,
}

/// Probes `model` (no autodiff) on `tokens` `[B, T]` (`T ≥ 2`), keeping the `top_k` largest |x|.
pub fn forward_probe(model: &Transformer, tokens: Tensor<2, Int>, top_k: usize) -> ForwardProbe {
    forward_probe_with_histograms(model, tokens, top_k, false).0
}

/// [`forward_probe`], and with `histograms` the TensorBoard histograms `hist/x/l001`… of every
/// sublayer's input `X_l`, from the same forward pass.
pub fn forward_probe_with_histograms(
    model: &Transformer,
    tokens: Tensor<2, Int>,
    top_k: usize,
    histograms: bool,
) -> (ForwardProbe, Vec<(String, Histogram)>) {
    let out = model.trace(tokens);
    let hists = if histograms { input_histograms(&out.traces) } else { Vec::new() };
    let mut g = Gather::default();
    let pending = pend(model, &out, top_k, &mut g);
    let last = out.last_hidden;
    let final_saturation = saturation(model.final_norm.as_ref(), last.clone()).map(|t| g.push(t));
    let logit_rms = g.push(out.logit_rms.clone().mean().reshape([1]));
    let log_z = g.push(out.log_z.clone());
    let final_tau = g.push(token_alignment(last));
    let attn: Vec<AttnSlots> = out.records.take(STATS).iter().map(|a| AttnSlots::pend(a, &mut g)).collect();
    let scale_slots: Vec<(String, Slot)> = norm_params(model).into_iter().map(|(n, t)| (n, g.push(t))).collect();
    let f = g.fetch();
    let mut pooled = Pooled::default();
    let sublayers: Vec<SublayerProbe> =
        pending.iter().enumerate().map(|(i, p)| sublayer_probe(i, p, &f, &attn, &mut pooled)).collect();
    let stream_gain =
        super::streams::composite_gain(&sublayers.iter().filter_map(|s| s.streams.as_ref()).collect::<Vec<_>>());
    let scales = scale_slots
        .into_iter()
        .map(|(n, s)| {
            let v = f.get(s);
            let (min, max) = min_max(v);
            (n, ScaleStats { mean: mean(v), min, max })
        })
        .collect();
    let (variance_fit, variance_sample, variance_sample_layer) = pooled.finish();
    let final_tau = f.get(final_tau)[0];
    let final_saturation = final_saturation.map(|s| f.get(s)[0]);
    let log_z = f.get(log_z);
    let output_logits = (!log_z.is_empty()).then(|| LogitStats {
        rms: f.get(logit_rms)[0],
        log_z_mean: mean(log_z),
        log_z_max: min_max(log_z).1,
    });
    let probe = ForwardProbe {
        sublayers,
        final_tau,
        final_saturation,
        output_logits,
        scales,
        variance_fit,
        variance_sample,
        variance_sample_layer,
        stream_gain,
        routers: super::routing::router_probes(model, &out.records.take(ROUTING)),
    };
    (probe, hists)
}

/// The histograms `hist/x/l001`… of every sublayer's input.
fn input_histograms(traces: &[SublayerTrace]) -> Vec<(String, Histogram)> {
    let x = |(i, tr): (usize, &SublayerTrace)| {
        (format!("hist/x/l{:03}", i + 1), Histogram::of(&sampled_values(tr.input.clone()), 30))
    };
    traces.iter().enumerate().map(x).collect()
}

/// Every sublayer's device reductions, pushed to `g` for the one transfer.
fn pend(model: &Transformer, out: &Traced, top_k: usize, g: &mut Gather) -> Vec<Pending> {
    let traces = &out.traces;
    let mut pending = Vec::with_capacity(traces.len());
    for (i, tr) in traces.iter().enumerate() {
        let next = traces.get(i + 1).map(|n| n.input.clone()).unwrap_or_else(|| out.last_hidden.clone());
        let bound = outer_norm(model, i).and_then(|n| {
            let (how, eps, gain) = spread_of(n)?;
            Some((g.push(spread(tr.sum.clone(), how, eps)), gain.map(|p| g.push(p.val().abs().max().reshape([1])))))
        });
        pending.push(Pending {
            x: g.push(hidden_summary(tr.input.clone(), top_k)),
            z: g.push(hidden_summary(tr.sum.clone(), top_k)),
            tau: g.push(token_alignment(tr.input.clone())),
            tau_sum: g.push(token_alignment(tr.sum.clone())),
            cos: g.push(cosines(tr.input.clone(), next)),
            bound,
            bhyt: tr.approx_variance.as_ref().map(|a| {
                let exact = tr.input.clone().square().mean_dim(2);
                let n = a.dims().iter().product::<usize>();
                (g.push(a.clone().reshape([n])), g.push(exact.reshape([n])))
            }),
            saturation: saturation(input_norm(model, i), tr.input.clone()).map(|t| g.push(t)),
            streams: tr.streams.as_ref().map(|s| super::streams::pend(s, g)),
            depth_weights: tr.depth_weights.as_ref().map(|a| {
                let [b, t, s] = a.dims();
                g.push(a.clone().reshape([b * t, s]).mean_dim(0).reshape([s]))
            }),
        });
    }
    pending
}

/// BHyT's `[ŝ², exact]` pairs over all FFN sublayers, and each pair's layer.
#[derive(Default)]
struct Pooled {
    approx: Vec<f64>,
    exact: Vec<f64>,
    layer: Vec<usize>,
}

impl Pooled {
    /// The pooled fit and up to 500 evenly spaced pairs with their layers.
    fn finish(self) -> (Option<Fit>, Vec<[f64; 2]>, Vec<usize>) {
        let fitted = (!self.approx.is_empty()).then(|| fit(&self.approx, &self.exact));
        let stride = self.approx.len().div_ceil(500).max(1);
        let sample = self.approx.iter().zip(&self.exact).step_by(stride).map(|(a, e)| [*a, *e]).collect();
        (fitted, sample, self.layer.into_iter().step_by(stride).collect())
    }
}

/// Sublayer `i`'s probe from the fetched values; BHyT's pairs also go to `pooled`.
/// Where one attention sublayer's diagnostics sit among the fetched values.
struct AttnSlots {
    max_logit: Slot,
    entropy: Slot,
    head_max_logit: Slot,
    first_key_mass: Slot,
    gate_mean: Option<Slot>,
}

impl AttnSlots {
    fn pend(a: &crate::model::attention::self_attention::AttnStats, g: &mut Gather) -> Self {
        AttnSlots {
            max_logit: g.push(a.max_logit.clone()),
            entropy: g.push(a.entropy.clone()),
            head_max_logit: g.push(a.head_max_logit.clone()),
            first_key_mass: g.push(a.first_key_mass.clone()),
            gate_mean: a.gate_mean.clone().map(|m| g.push(m)),
        }
    }
}

fn sublayer_probe(i: usize, p: &Pending, f: &Fetched, attn: &[AttnSlots], pooled: &mut Pooled) -> SublayerProbe {
    let hidden = |s: Slot| {
        let h = HiddenSummary::read(f.get(s));
        let max_abs = h.top_abs.first().copied().unwrap_or(f64::NAN);
        HiddenStats {
            var: h.var,
            mean_abs: h.mean_abs,
            max_abs,
            top_abs: h.top_abs,
            median_abs: h.median_abs,
            top_at: h.top_at,
        }
    };
    let is_attn = i.is_multiple_of(2);
    let variance_fit = p.bhyt.map(|(a, e)| {
        pooled.approx.extend_from_slice(f.get(a));
        pooled.exact.extend_from_slice(f.get(e));
        pooled.layer.resize(pooled.approx.len(), i / 2 + 1);
        fit(f.get(a), f.get(e))
    });
    SublayerProbe {
        l: i + 1,
        layer: i / 2 + 1,
        branch: if is_attn { Branch::Attn } else { Branch::Ffn },
        x: hidden(p.x),
        z: hidden(p.z),
        jacobian_bound: p.bound.map(|(sigma, gain)| {
            let g_inf = gain.map(|s| f.get(s)[0]).unwrap_or(1.0);
            let sig = f.get(sigma);
            sig.iter().map(|s| g_inf / s).sum::<f64>() / sig.len() as f64
        }),
        tau: f.get(p.tau)[0],
        tau_sum: f.get(p.tau_sum)[0],
        angular_distance: angular_distance(f.get(p.cos)),
        attn_max_logit: is_attn.then(|| f.get(attn[i / 2].max_logit)[0]),
        attn_head_max_logit: is_attn.then(|| f.get(attn[i / 2].head_max_logit).to_vec()),
        attn_entropy: is_attn.then(|| f.get(attn[i / 2].entropy)[0]),
        attn_first_key_mass: is_attn.then(|| f.get(attn[i / 2].first_key_mass)[0]),
        attn_gate_mean: attn.get(i / 2).filter(|_| is_attn).and_then(|a| a.gate_mean).map(|s| f.get(s)[0]),
        variance_fit,
        grad_norm: None,
        grad_cv_window: None,
        grad_cv_run: None,
        saturation: p.saturation.map(|s| f.get(s)[0]),
        streams: p.streams.as_ref().map(|s| super::streams::probe(s, f)),
        depth_weights: p.depth_weights.map(|s| f.get(s).to_vec()),
    }
}

/// The input norm of 0-based sublayer `i`.
fn input_norm(model: &Transformer, i: usize) -> Option<&Norm> {
    let layer = &model.layers[i / 2];
    if i.is_multiple_of(2) { layer.attn.input_norm.as_ref() } else { layer.ffn.input_norm.as_ref() }
}

/// Where tanh′ = 1 − tanh² falls below 0.02.
const TANH_SATURATED: f64 = 2.65;
/// Where erf′(u)/erf′(0) = exp(−u²) falls below 0.02: `√ln 50`.
const ERF_SATURATED: f64 = 1.977_883_4;

/// For a bounded norm, the fraction of its squashing function's arguments `u` over `x` that
/// are saturated, `[1]`: DyT `u = α x`, BHyT `u = λ x / D(x)` (the exact denominator, also for
/// a slot given the approximated variance), Derf `u = α x + s`.
fn saturation(norm: Option<&Norm>, x: Tensor<3>) -> Option<Tensor<1>> {
    let (u, limit) = match norm? {
        Norm::Dyt(n) => (x * n.alpha.val().abs().unsqueeze::<3>(), TANH_SATURATED),
        Norm::Bhyt(n) | Norm::BhytStar(n) => (n.argument(x), TANH_SATURATED),
        Norm::Derf(n) => (x * n.alpha.val().unsqueeze::<3>() + n.offset.val().unsqueeze::<3>(), ERF_SATURATED),
        _ => return None,
    };
    Some(u.abs().greater_elem(limit).float().mean().reshape([1]))
}

/// The outer norm (on the residual path) of 0-based sublayer `i`.
fn outer_norm(model: &Transformer, i: usize) -> Option<&Norm> {
    let layer = &model.layers[i / 2];
    if i.is_multiple_of(2) { layer.attn.outer_norm.as_ref() } else { layer.ffn.outer_norm.as_ref() }
}

/// How a LayerNorm or RMSNorm (vector or scalar) measures σ, its ε and its gain; `None` for the
/// tanh norms, which have no Jacobian bound of this form.
fn spread_of(norm: &Norm) -> Option<(Spread, f64, Option<&Param<Tensor<1>>>)> {
    match norm {
        Norm::LayerNorm(n) | Norm::ScalarLayerNorm(n) => Some((Spread::Std, n.eps, n.gain.as_ref())),
        Norm::RmsNorm(n) | Norm::ScalarRmsNorm(n) | Norm::RmsNormApprox(n) => {
            Some((Spread::Rms, n.eps, n.gain.as_ref()))
        }
        Norm::Dyt(_) | Norm::BhytStar(_) | Norm::Bhyt(_) | Norm::LayerNorm1p(_) | Norm::Derf(_) | Norm::L2(_) => None,
        Norm::SeeDNorm(_) | Norm::ZcRms(_) | Norm::TaperNorm(_) => None,
    }
}

/// Every learned norm parameter on the residual stream and every learned residual scale
/// (gates, x0-mixing λ's), with its name.
/// Gates are reported at their used values, `stored · factor` (nGPT's scaled α).
fn norm_params(model: &Transformer) -> Vec<(String, Tensor<1>)> {
    let factors = gate_factors(model);
    let used = |(n, t): (String, Tensor<1>)| match factors.get(&n) {
        Some(&f) if f != 1.0 => (n, t * f),
        _ => (n, t),
    };
    named_tensors(model).into_iter().filter(|(n, _)| is_stream_norm(n) || is_residual_scale(n)).map(used).collect()
}

/// Each gate parameter's name and the factor its stored value is used with.
fn gate_factors(model: &Transformer) -> std::collections::BTreeMap<String, f64> {
    use crate::model::base::names::{GATE, child, layer, sublayer};
    let mut out = std::collections::BTreeMap::new();
    for (i, l) in model.layers.iter().enumerate() {
        for (b, (own, gating)) in [(&l.attn.gate, l.attn.gating), (&l.ffn.gate, l.ffn.gating)].into_iter().enumerate() {
            let Some(g) = gating else { continue };
            let owner = if own.is_some() { sublayer(i, b) } else { layer(i) };
            out.insert(child(&owner, GATE), g.factor);
        }
    }
    out
}

/// Most values a histogram is built from; larger tensors are sampled with an even stride.
pub const HISTOGRAM_VALUES: usize = 1 << 16;

/// Evenly strided values of `t`, at most [`HISTOGRAM_VALUES`], on the host.
pub fn sampled_values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    let n = t.shape().num_elements();
    let flat = t.reshape([n]);
    let stride = n.div_ceil(HISTOGRAM_VALUES).max(1);
    let picked = if stride > 1 {
        let idx = Tensor::<1, Int>::arange(0..n.div_ceil(stride) as i64, &flat.device()) * stride as i64;
        flat.select(0, idx)
    } else {
        flat
    };
    picked.into_data().convert::<f64>().try_into_vec::<f64>().unwrap_or_default()
}

#[cfg(test)]
mod saturation_tests {
    use super::*;
    use crate::norm::{Bhyt, BhytDenominator, Derf};
    use burn::tensor::{Device, TensorData};

    fn vector(v: &[f32], dev: &Device) -> Param<Tensor<1>> {
        Param::from_tensor(Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), dev))
    }

    /// Counted by hand from the thresholds: erf's slope e^{−u²} < 0.02 beyond √ln 50, tanh's
    /// 1 − tanh² < 0.02 beyond 2.65.
    #[test]
    fn derf_and_bhyt_saturation_against_the_thresholds() {
        let dev = Device::default();
        let xs = [-1.5f32, -0.5, 0.0, 0.3, 0.6, 0.8, 1.0, 2.0];
        let x = Tensor::<3>::from_data(TensorData::new(xs.to_vec(), [1, 2, 4]), &dev);
        // Derf, α = 2, s = 0.5: u = 2x + 0.5 = −2.5, −0.5, 0.5, 1.1, 1.7, 2.1, 2.5, 4.5.
        let derf = Derf {
            gain: vector(&[1.0; 4], &dev),
            shift: vector(&[0.0; 4], &dev),
            alpha: vector(&[2.0], &dev),
            offset: vector(&[0.5], &dev),
        };
        let got = saturation(Some(&Norm::Derf(derf)), x.clone()).unwrap().into_scalar::<f32>();
        assert!((got - 4.0 / 8.0).abs() < 1e-6, "Derf: {got}");
        // BHyT, RMS denominator κ√(mean x² + ε), κ = 1, λ = 4, ε = 0, per token of 4 channels.
        let bhyt = Bhyt {
            gain: vector(&[1.0; 4], &dev),
            lambda: vector(&[4.0], &dev),
            kappa: 1.0,
            eps: 0.0,
            denominator: BhytDenominator::Rms,
        };
        let mut count = 0;
        for row in xs.chunks(4) {
            let rms = (row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / 4.0).sqrt();
            count += row.iter().filter(|v| (4.0 * **v as f64 / rms).abs() > 2.65).count();
        }
        let got = saturation(Some(&Norm::Bhyt(bhyt)), x).unwrap().into_scalar::<f32>();
        assert!((got as f64 - count as f64 / 8.0).abs() < 1e-6, "BHyT: {got} vs {count}/8");
        assert!(count > 0 && count < 8, "the case straddles the threshold");
    }
}
