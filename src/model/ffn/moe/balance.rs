//! What balances a mixture of experts, from what each MoE layer's router recorded:
//!
//! - the load-balancing loss of the Switch Transformer (Fedus et al. 2021, eq. 4), `Σ_e f_e·P_e`
//!   scaled so that an even load gives 1, with `f_e` the share of the (token, slot) assignments
//!   the router made to expert `e` and `P_e` the mean of the router's probability of `e`
//!   ([`crate::model::ffn::moe::router::Router::probabilities`]), pooled as [`AuxForm`] says;
//! - the router z-loss of ST-MoE (Zoph et al. 2022, eq. 5), `mean_n (log Σ_e exp l_{n,e})²`,
//!   averaged over the MoE layers;
//! - DeepSeek V3's auxiliary-loss-free balancing: after each optimizer step
//!   `b_e ← b_e + γ · sign(mean_j c_j − c_e)`, `c_e` the step's assignments to `e` (the
//!   DeepSeek-V3 technical report, §2.1.2).

use crate::model::base::records::RecordKind;
use crate::model::base::terms::{LossTerm, Reading, Reduce};
use crate::model::ffn::moe::router::Routing;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// How the load-balancing loss pools the MoE layers and the tokens (`[model.moe] aux_form`);
/// each form uses the router's own choices and probabilities.
///
/// | form | loss | even load | source |
/// |---|---|---|---|
/// | `per-layer` | `mean_l E/(N·k) Σ_e c_{l,e}·P_{l,e}` over the batch's `N` tokens | 1 | Switch Transformer, megablocks' `batched_load_balancing_loss`, OLMo-core |
/// | `sequence` | the same within each sequence of `T` tokens, averaged over the sequences and layers | 1 | DeepSeek V3's complementary sequence-wise loss (eqs. 17–20) |
/// | `pooled` | `E/M² Σ_e (Σ_l c_{l,e})·(Σ_l Σ_n p_{l,n,e})` over the `M` rows of all layers | k | transformers' `load_balancing_loss_func` (OLMoE, Qwen3-MoE, Mixtral) |
///
/// `per-layer` is the default: each layer balances its own experts and the coefficient means
/// what Switch's, megablocks' and OLMo-core's does. The pooled form pairs expert `e` of one
/// layer with expert `e` of another, so opposite imbalances of two layers cancel, and its even
/// load is `k`, so a coefficient acts `k` times as strongly as in the per-layer form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuxForm {
    #[default]
    PerLayer,
    Sequence,
    Pooled,
}

/// One balancing-loss form: the name a config writes and its loss, with its source.
pub struct AuxFormInfo {
    pub name: &'static str,
    pub formula: &'static str,
}

/// Every form, in [`AuxForm`]'s order.
pub const AUX_FORMS: &[AuxFormInfo] = &[
    AuxFormInfo {
        name: "per-layer",
        formula: "mean over the MoE layers of E/(N·k)·Σ c_e·P_e over the batch's N tokens; even load 1 (Switch, megablocks, OLMo-core)",
    },
    AuxFormInfo {
        name: "sequence",
        formula: "the same within each sequence of T tokens, averaged over sequences and layers; even load 1 (DeepSeek V3 eqs. 17–20)",
    },
    AuxFormInfo {
        name: "pooled",
        formula: "E/M²·Σ (Σ_l c_{l,e})·(Σ_l Σ_n p_{l,n,e}) over all layers' M rows; even load k (transformers' load_balancing_loss_func)",
    },
];

impl AuxForm {
    /// Whether this is the default form (a config need not write it).
    pub fn is_default(&self) -> bool {
        *self == AuxForm::default()
    }

    /// This form's row of [`AUX_FORMS`].
    pub fn info(self) -> &'static AuxFormInfo {
        &AUX_FORMS[self as usize]
    }

    /// The name a config writes.
    pub fn name(self) -> &'static str {
        self.info().name
    }
}

/// The loss terms' names: the balancing loss and the router z-loss, before their coefficients.
pub const BALANCE: &str = "moe/balance";
pub const ROUTER_Z: &str = "moe/router_z";
/// The readings' names, one row per MoE layer: the assignments per expert `[E]` (summed over
/// the step), the router's mean entropy in nats (the step's mean), its largest `|logit|` (the
/// step's largest) and the (token, slot) pairs dropped over capacity (summed).
pub const LOAD: &str = "moe/load";
pub const ENTROPY: &str = "moe/entropy";
pub const LOGIT_MAX: &str = "moe/logit_max";
pub const DROPPED: &str = "moe/dropped";

/// What a MoE model adds to its loss: `aux · balance + z · router_z`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeBalance {
    pub aux: f64,
    /// How the balancing loss pools layers and tokens.
    pub form: AuxForm,
    pub z: f64,
}

impl MoeBalance {
    /// The balancing loss and the router z-loss of a forward's `records` (none when the forward
    /// recorded no routing: evaluation and decoding).
    pub fn terms(&self, records: &[RouterRecord]) -> Vec<LossTerm> {
        if records.is_empty() {
            return Vec::new();
        }
        vec![
            LossTerm { name: BALANCE, value: balance_loss(records, self.form), weight: self.aux },
            LossTerm { name: ROUTER_Z, value: router_z_loss(records), weight: self.z },
        ]
    }
}

/// What the step reads of a forward's routing, per MoE layer (none without routing).
pub fn readings(records: &[RouterRecord]) -> Vec<Reading> {
    if records.is_empty() {
        return Vec::new();
    }
    let per_layer = |f: fn(&RouterRecord) -> Vec<f64>| records.iter().map(f).collect();
    vec![
        Reading::host(LOAD, Reduce::Sum, per_layer(|r| r.load.clone())),
        Reading::host(ENTROPY, Reduce::Mean, per_layer(|r| vec![r.entropy])),
        Reading::host(LOGIT_MAX, Reduce::Max, per_layer(|r| vec![r.logit_max])),
        Reading::host(DROPPED, Reduce::Sum, per_layer(|r| vec![r.dropped as f64])),
    ]
}

/// Training and probing forwards of a MoE model: each MoE layer's routing.
pub const ROUTING: RecordKind<RouterRecord> = RecordKind::named("moe/routing");

/// One MoE layer's routing in one forward, for the losses, the balancing and the probes.
#[derive(Clone, Debug)]
pub struct RouterRecord {
    /// The router logits `[N, E]`, on the autodiff graph.
    pub logits: Tensor<2>,
    /// The router's probabilities over all experts `[N, E]`, on the autodiff graph: the `P` of
    /// the balancing loss.
    pub probs: Tensor<2>,
    /// The router's own assignments per expert (the load), `[E]`.
    pub load: Vec<f64>,
    /// Rows `N`, the sequence length `T` they come in (`N = B·T`), and the mean over the rows of
    /// the router's entropy `−Σ p log p` (of `softmax(l)`), the largest `|l|` and the mean
    /// `(log Σ exp l)²`.
    pub tokens: usize,
    pub seq_len: usize,
    pub entropy: f64,
    pub logit_max: f64,
    pub z: f64,
    /// Each token's chosen experts, `[N·k]`.
    pub chosen: Vec<usize>,
    /// The (token, slot) pairs dropped over the experts' capacity (0 when dropless).
    pub dropped: usize,
}

impl RouterRecord {
    /// The record of a layer's routing of `N = B·seq_len` rows: `logits` on the device, `host`
    /// the same values, `probs` the router's probabilities ([`crate::model::ffn::moe::router::Router::probabilities`]).
    pub fn new(logits: Tensor<2>, probs: Tensor<2>, host: &[f64], routing: Routing, seq_len: usize) -> Self {
        let e = logits.dims()[1];
        let tokens = host.len() / e;
        let mut load = vec![0.0; e];
        routing.chosen.iter().for_each(|&c| load[c] += 1.0);
        let (mut entropy, mut z, mut logit_max) = (0.0, 0.0, 0.0f64);
        for row in host.chunks(e) {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|l| (l - max).exp()).sum();
            let lse = max + sum.ln();
            entropy -= row.iter().map(|l| (l - lse).exp() * (l - lse)).sum::<f64>();
            z += lse * lse;
            logit_max = row.iter().fold(logit_max, |m, l| m.max(l.abs()));
        }
        let per = tokens.max(1) as f64;
        Self {
            logits,
            probs,
            load,
            tokens,
            seq_len: seq_len.max(1),
            entropy: entropy / per,
            logit_max,
            z: z / per,
            chosen: routing.chosen,
            dropped: 0,
        }
    }

    /// Experts `E` and choices per token `k`.
    fn experts_and_k(&self) -> (usize, usize) {
        (self.load.len(), self.chosen.len() / self.tokens.max(1))
    }
}

/// The load-balancing loss over all the layers' records in `form`, `[1]` (see [`AuxForm`]).
pub fn balance_loss(records: &[RouterRecord], form: AuxForm) -> Tensor<1> {
    let per_layer = |f: fn(&RouterRecord) -> Tensor<1>| {
        records.iter().map(f).reduce(|a, b| a + b).expect("one record at least") / records.len() as f64
    };
    match form {
        AuxForm::PerLayer => per_layer(layer_balance),
        AuxForm::Sequence => per_layer(sequence_balance),
        AuxForm::Pooled => pooled_balance(records),
    }
}

/// A `[E]` tensor of `v` on `like`'s device, in its float type.
fn host_vector(v: Vec<f64>, like: &Tensor<2>) -> Tensor<1> {
    let n = v.len();
    Tensor::<1>::from_data(TensorData::new(v, [n]), (&like.device(), like.dtype()))
}

/// One layer over all its rows: `E/(N·k) Σ_e c_e·P_e`, `P_e` the mean probability.
fn layer_balance(r: &RouterRecord) -> Tensor<1> {
    let (e, k) = r.experts_and_k();
    let n = r.tokens as f64;
    let p = r.probs.clone().sum_dim(0).reshape([e]);
    (host_vector(r.load.clone(), &r.probs) * p).sum() * (e as f64 / (n * n * k as f64))
}

/// One layer within each of its `N/T` sequences (DeepSeek V3's `f_i = E/(k·T) Σ_t 1(…)`,
/// `P_i = 1/T Σ_t s'_{i,t}`, `Σ_i f_i·P_i`), averaged over the sequences.
fn sequence_balance(r: &RouterRecord) -> Tensor<1> {
    let (e, k) = r.experts_and_k();
    let t = r.seq_len;
    let b = r.tokens / t;
    let mut counts = vec![0.0; b * e];
    for (p, &c) in r.chosen.iter().enumerate() {
        counts[(p / k) / t * e + c] += 1.0;
    }
    let counts = Tensor::<2>::from_data(TensorData::new(counts, [b, e]), (&r.probs.device(), r.probs.dtype()));
    let p = r.probs.clone().reshape([b, t, e]).sum_dim(1).reshape([b, e]);
    (counts * p).sum() * (e as f64 / ((t * t * k * b) as f64))
}

/// transformers' `load_balancing_loss_func`: counts and probabilities of all layers summed over
/// their `M` rows before the product, `E/M² Σ_e C_e·P_e` (even load `k`).
fn pooled_balance(records: &[RouterRecord]) -> Tensor<1> {
    let (e, _) = records[0].experts_and_k();
    let rows: usize = records.iter().map(|r| r.tokens).sum();
    let mut f = vec![0.0; e];
    for r in records {
        f.iter_mut().zip(&r.load).for_each(|(a, b)| *a += b);
    }
    let probs = records.iter().map(|r| r.probs.clone().sum_dim(0).reshape([e]));
    let p = probs.reduce(|a, b| a + b).expect("one record at least");
    (host_vector(f, &records[0].probs) * p).sum() * (e as f64 / (rows * rows) as f64)
}

/// The router z-loss averaged over the layers' records, `[1]`.
pub fn router_z_loss(records: &[RouterRecord]) -> Tensor<1> {
    let per_layer = records.iter().map(|r| {
        let l = r.logits.clone();
        let max = l.clone().max_dim(1).detach();
        let lse = (l - max.clone()).exp().sum_dim(1).log() + max;
        lse.square().mean()
    });
    per_layer.reduce(|a, b| a + b).expect("one record at least") / records.len() as f64
}

/// `b + γ · sign(mean(c) − c)` for one layer's selection bias `b` `[E]` and its step's load `c`.
pub fn update_bias(bias: Tensor<1>, load: &[f64], gamma: f64) -> Tensor<1> {
    let mean = load.iter().sum::<f64>() / load.len() as f64;
    let step: Vec<f64> = load.iter().map(|&c| gamma * sign(mean - c)).collect();
    let step = Tensor::<1>::from_data(TensorData::new(step, [load.len()]), (&bias.device(), bias.dtype()));
    (bias + step).detach()
}

/// −1, 0 or 1.
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_is_its_row() {
        for form in [AuxForm::PerLayer, AuxForm::Sequence, AuxForm::Pooled] {
            assert_eq!(serde_json::to_value(form).unwrap(), form.name());
        }
    }

    /// The update by hand: loads [4, 2, 0] (mean 2) move the biases by −γ, 0, +γ.
    #[test]
    fn bias_update_by_hand() {
        let b = crate::testutil::f64_tensor(&[0.5, 0.0, -0.5], [3], false);
        let b = update_bias(b, &[4.0, 2.0, 0.0], 0.1);
        let want = [0.4, 0.0, -0.4];
        assert!(crate::testutil::values(b).iter().zip(want).all(|(v, w)| (v - w).abs() < 1e-15));
    }
}
