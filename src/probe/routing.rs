//! A mixture of experts' routing on the probe batch, per MoE layer: the load over the experts
//! and its coefficient of variation, the experts no token reached, the router's mean entropy,
//! its largest |logit| and its mean `(log Σ exp l)²` (what the router z-loss penalises).

use crate::model::Transformer;
use crate::model::ffn_block::Ffn;
use crate::model::moe_balance::{RouterRecord, coefficient_of_variation};
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
}

/// The probes of `records`, one per MoE layer of `model` in layer order.
pub fn router_probes(model: &Transformer, records: &[RouterRecord]) -> Vec<RouterProbe> {
    let layers = model.layers.iter().enumerate().filter(|(_, l)| matches!(l.ffn.f, Ffn::Moe(_))).map(|(i, _)| i + 1);
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
        })
        .collect()
}

/// The offline table's lines for the routing, empty for a dense model.
pub fn table_lines(probes: &[RouterProbe]) -> Vec<String> {
    if probes.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["mixture of experts, per MoE layer:".to_string()];
    lines.push(format!(
        "    {:>3} {:>8} {:>6} {:>9} {:>10} {:>9}",
        "l", "load CV", "dead", "H(router)", "max|logit|", "log²Z"
    ));
    for p in probes {
        lines.push(format!(
            "    {:>3} {:>8.3} {:>3}/{:<2} {:>9.3} {:>10.3} {:>9.3}",
            p.layer,
            p.load_cv,
            p.dead,
            p.load.len(),
            p.entropy,
            p.logit_max,
            p.z
        ));
    }
    lines
}
