//! A mixture of experts' routing on the probe batch, per MoE layer: the load over the experts
//! and its coefficient of variation, the experts no token reached, the router's mean entropy,
//! its largest |logit| and its mean `(log Σ exp l)²` (what the router z-loss penalises).

use crate::model::Transformer;
use crate::model::ffn::moe::balance::RouterRecord;
use crate::model::ffn_block::FfnBlock;
use crate::stats::coefficient_of_variation;
use serde::{Deserialize, Serialize};

/// One MoE layer's routing on the probe batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterProbe {
    /// The 1-based Transformer layer.
    pub layer: usize,
    /// Assignments per expert, `[E]`.
    pub load: Vec<f64>,
    pub load_cv: f64,
    pub dead: usize,
    pub entropy: f64,
    pub logit_max: f64,
    pub z: f64,
    /// The (token, slot) pairs dropped over the experts' capacity.
    #[serde(default)]
    pub dropped: usize,
    /// `normlab probe`: each routed expert's gradient norm `[E]` (0 for an expert no token
    /// reached) and the router's, from its backward pass; empty and absent in the live probes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expert_grad_norm: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_grad_norm: Option<f64>,
}

/// The probes of `records`, one per MoE layer of `model` in layer order.
pub fn router_probes(model: &Transformer, records: &[RouterRecord]) -> Vec<RouterProbe> {
    let layers =
        model.layers.iter().enumerate().filter(|(_, l)| matches!(l.ffn.f, FfnBlock::Moe(_))).map(|(i, _)| i + 1);
    layers
        .zip(records)
        .map(|(layer, r)| RouterProbe {
            layer,
            load: r.load.clone(),
            load_cv: coefficient_of_variation(&r.load),
            dead: r.load.iter().filter(|&&c| c == 0.0).count(),
            entropy: r.entropy,
            logit_max: r.logit_max,
            z: r.z,
            dropped: r.dropped,
            expert_grad_norm: Vec::new(),
            router_grad_norm: None,
        })
        .collect()
}

/// Fills each probe's expert and router gradient norms from the per-parameter norms
/// `per_param` (`layers.{i}.ffn.f.experts.{e}.*`, `layers.{i}.ffn.f.router`).
pub fn add_grad_norms(probes: &mut [RouterProbe], per_param: &[(String, f64)]) {
    for p in probes {
        let prefix = format!("layers.{}.ffn.f.", p.layer - 1);
        let mut squares = vec![0.0; p.load.len()];
        let mut router = 0.0;
        for (name, g) in per_param {
            let Some(rest) = name.strip_prefix(&prefix) else { continue };
            if rest == "router" {
                router = g * g;
            } else if let Some(e) =
                rest.strip_prefix("experts.").and_then(|r| r.split('.').next()?.parse::<usize>().ok())
                && let Some(sq) = squares.get_mut(e)
            {
                *sq += g * g;
            }
        }
        p.expert_grad_norm = squares.into_iter().map(f64::sqrt).collect();
        p.router_grad_norm = Some(router.sqrt());
    }
}

/// The offline table's lines for the routing, empty for a dense model.
pub fn table_lines(probes: &[RouterProbe]) -> Vec<String> {
    if probes.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["mixture of experts, per MoE layer:".to_string()];
    lines.push(format!(
        "    {:>3} {:>8} {:>6} {:>9} {:>10} {:>9} {:>7}",
        "l", "load CV", "dead", "H(router)", "max|logit|", "log²Z", "dropped"
    ));
    for p in probes {
        lines.push(format!(
            "    {:>3} {:>8.3} {:>3}/{:<2} {:>9.3} {:>10.3} {:>9.3} {:>7}",
            p.layer,
            p.load_cv,
            p.dead,
            p.load.len(),
            p.entropy,
            p.logit_max,
            p.z,
            p.dropped
        ));
        if let (Some(r), false) = (p.router_grad_norm, p.expert_grad_norm.is_empty()) {
            let (lo, hi) = p.expert_grad_norm.iter().fold((f64::INFINITY, 0.0f64), |(a, b), g| (a.min(*g), b.max(*g)));
            lines.push(format!("        ‖g‖ router {r:.3e}, experts {lo:.3e} … {hi:.3e}"));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: expert 1's two matrices with norms 3 and 4 make 5; expert 0 got none; the
    /// router's norm is its own; another layer's names are not read.
    #[test]
    fn expert_grad_norms_by_hand() {
        let mut p = vec![RouterProbe {
            layer: 2,
            load: vec![0.0, 4.0],
            load_cv: 1.0,
            dead: 1,
            entropy: 0.5,
            logit_max: 1.0,
            z: 0.1,
            dropped: 0,
            expert_grad_norm: Vec::new(),
            router_grad_norm: None,
        }];
        let per_param = [
            ("layers.1.ffn.f.experts.1.w1", 3.0),
            ("layers.1.ffn.f.experts.1.w2", 4.0),
            ("layers.1.ffn.f.router", 0.25),
            ("layers.0.ffn.f.experts.0.w1", 7.0),
        ]
        .map(|(n, g)| (n.to_string(), g));
        add_grad_norms(&mut p, &per_param);
        assert_eq!((p[0].expert_grad_norm.clone(), p[0].router_grad_norm), (vec![0.0, 5.0], Some(0.25)));
    }
}
