//! `normlab probe`: the live measurements on a checkpoint (or the freshly initialised model of
//! its config) over held-out windows, with per-sublayer gradient norms from one backward pass,
//! as JSON and as a table.

use super::grads::{block_norms, measure, sublayer_norms};
use super::snapshot::{ForwardProbe, forward_probe};
use crate::io::json::{nan, nan_vec};
use crate::model::Transformer;
use crate::model::base::names;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};
use serde::{Deserialize, Serialize};

/// `RUN/probes/{init,step-N}.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OfflineProbe {
    /// `init` or the checkpoint's step.
    pub at: String,
    pub recipe: String,
    pub windows: usize,
    pub tokens_per_window: usize,
    /// Cross-entropy (+ λ·R) on these windows.
    #[serde(deserialize_with = "nan")]
    pub loss: f64,
    #[serde(deserialize_with = "nan")]
    pub grad_norm: f64,
    #[serde(deserialize_with = "nan_vec")]
    pub block_grad_norms: Vec<f64>,
    #[serde(flatten)]
    pub forward: ForwardProbe,
}

/// Probes `model` (on an autodiff device) on `x`, `y` `[N, T]` given on `plain`.
pub fn probe_model(
    model: &Transformer,
    x: Tensor<2, Int>,
    y: Tensor<2, Int>,
    plain: &Device,
    top_k: usize,
    at: String,
) -> OfflineProbe {
    let [n, t] = x.dims();
    let mut forward = forward_probe(&model.valid(), x.clone(), top_k);
    let ad = plain.clone().autodiff();
    let (loss, _, _) = model.loss(Tensor::from_data(x.into_data(), &ad), Tensor::from_data(y.into_data(), &ad), false);
    // The trainer's own per-parameter norms (one transfer).
    let norms = measure(model, &GradientsParams::from_grads(loss.backward(), model));
    let subs = sublayer_norms(&norms.per_param, forward.sublayers.len());
    for (p, g) in forward.sublayers.iter_mut().zip(&subs) {
        p.grad_norm = Some(*g);
    }
    super::routing::add_grad_norms(&mut forward.routers, &norms.per_param);
    OfflineProbe {
        at,
        recipe: model.meta.recipe.clone(),
        windows: n,
        tokens_per_window: t,
        loss: loss.into_scalar::<f32>() as f64,
        grad_norm: norms.total,
        block_grad_norms: block_norms(&subs),
        forward,
    }
}

/// The learned scalars and the residual-path norms' parameters (means, the first 12): the
/// residual scales the model names as such (gates, x0 mixing, a residual scheme's own), then
/// the norms' and the value residual's scalars.
fn scalars_line(p: &OfflineProbe) -> String {
    let shown = [
        ".alpha",
        ".lambda",
        "output_norm.gain",
        "outer_norm.gain",
        "outer_norm.shift",
        "_lambda",
        ".taper_gate",
        ".taper_scale",
    ];
    let scalars: Vec<String> = p
        .forward
        .scales
        .iter()
        .filter(|(n, _)| names::is_residual_scale(n) || shown.iter().any(|s| n.ends_with(s)))
        .take(12)
        .map(|(n, v)| format!("{n} {:.3}", v.mean))
        .collect();
    if scalars.is_empty() {
        return String::new();
    }
    let more = if p.forward.scales.len() > 12 { ", … (all in the JSON)" } else { "" };
    format!("learned scales (mean): {}{more}\n", scalars.join(", "))
}

/// The per-sublayer table.
pub fn table(p: &OfflineProbe) -> String {
    let mut s = format!(
        "{} at {}: {} windows × {} tokens, loss {:.4}, ‖g‖ {:.4}, τ(final) {:.3}\n",
        p.recipe, p.at, p.windows, p.tokens_per_window, p.loss, p.grad_norm, p.forward.final_tau
    );
    s += "    l   k branch    var(X)     var(z)    mean|z|    max|z|  max/med(X)  ‖γ‖∞/σ(z)   τ(X)    τ(z)   angle    ‖g‖     \
        max-logit  H(attn) p(first)  gate\n";
    let opt = |v: Option<f64>, w: usize, prec: usize| {
        v.map(|x| format!("{x:>w$.prec$}")).unwrap_or_else(|| format!("{:>w$}", "·"))
    };
    for q in &p.forward.sublayers {
        s += &format!(
            "  {:>3} {:>3} {:<5} {:>10.3e} {:>10.3e} {:>10.3e} {:>9.3e} {:>11.1} {} {:>7.3} {:>7.3} {:>7.3} {:>9.3e} {} {} {} {}\n",
            q.l,
            q.layer,
            q.branch,
            q.x.var,
            q.z.var,
            q.z.mean_abs,
            q.z.max_abs,
            q.x.massive_ratio(),
            opt(q.jacobian_bound, 11, 4),
            q.tau,
            q.tau_sum,
            q.angular_distance,
            q.grad_norm.unwrap_or(f64::NAN),
            opt(q.attn_max_logit, 10, 3),
            opt(q.attn_entropy, 8, 3),
            opt(q.attn_first_key_mass, 8, 3),
            opt(q.attn_gate_mean, 5, 2),
        );
    }
    if let Some(m) = largest_input(&p.forward) {
        s += &m;
    }
    if let Some(f) = &p.forward.variance_fit {
        s += &format!(
            "Theorem 3.5's ŝ² vs the exact mean(x²) of the FFN inputs: RMSE {:.3e}, R² {:.4}, Pearson r {:.4}, \
             Spearman ρ {:.4} (n = {})\n",
            f.rmse, f.r2, f.pearson, f.spearman, f.n
        );
    }
    for line in super::routing::table_lines(&p.forward.routers) {
        s += &line;
        s.push('\n');
    }
    s + &scalars_line(p)
}

/// Where the largest sublayer input |X_l| of the probe batch sits (massive activations: Sun et
/// al. 2024; the Peri-LN paper §3): its value, its ratio to the median |X_l|, the sublayer, and
/// the window, token and channel.
fn largest_input(f: &super::ForwardProbe) -> Option<String> {
    let q = f.sublayers.iter().max_by(|a, b| a.x.max_abs.total_cmp(&b.x.max_abs))?;
    let [row, token, channel] = *q.x.top_at.first()?;
    Some(format!(
        "largest |X_l|: {:.3e} = {:.1} × the median |X_l| (sublayer {}), window {row}, token {token}, channel {channel}\n",
        q.x.max_abs,
        q.x.massive_ratio(),
        q.l
    ))
}
