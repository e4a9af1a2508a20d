//! What balances a mixture of experts, from what each MoE layer's router recorded:
//!
//! - the load-balancing loss of the Switch Transformer as transformers'
//!   `load_balancing_loss_func` computes it (OLMoE, Qwen3-MoE, Mixtral): over the `M` rows of
//!   all MoE layers together, `E · Σ_e f_e · P_e` with `f_e` the (token, slot) assignments of
//!   the top k of `softmax(l)` to expert `e` over `M` (so `Σ_e f_e = k`) and `P_e` the mean
//!   router probability of `e`; its minimum, at an even load, is `k`;
//! - the router z-loss of ST-MoE (Zoph et al. 2022, eq. 5), `mean_n (log Σ_e exp l_{n,e})²`,
//!   averaged over the MoE layers;
//! - DeepSeek V3's auxiliary-loss-free balancing: after each optimizer step
//!   `b_e ← b_e + γ · sign(mean_j c_j − c_e)`, `c_e` the step's assignments to `e` (the
//!   DeepSeek-V3 technical report, §2.1.2).

use super::moe_router::{Routing, top};
use burn::tensor::activation::softmax;
use burn::tensor::{Tensor, TensorData};

/// One MoE layer's routing in one forward, for the losses, the balancing and the probes.
#[derive(Clone, Debug)]
pub struct RouterRecord {
    /// The router logits `[N, E]`, on the autodiff graph.
    pub logits: Tensor<2>,
    /// The router's own assignments per expert (the load), `[E]`.
    pub load: Vec<f64>,
    /// The assignments of the top k of `softmax(l)` per expert, the `f_e` of the balancing
    /// loss (the load itself for the softmax routers), `[E]`.
    pub softmax_load: Vec<f64>,
    /// Rows `N` and the mean over them of the router's entropy `−Σ p log p` (of `softmax(l)`), the largest
    /// `|l|` and the mean `(log Σ exp l)²`.
    pub tokens: usize,
    pub entropy: f64,
    pub logit_max: f64,
    pub z: f64,
    /// Each token's chosen experts, `[N·k]`.
    pub chosen: Vec<usize>,
    /// The (token, slot) pairs dropped over the experts' capacity (0 when dropless).
    pub dropped: usize,
}

impl RouterRecord {
    /// The record of a layer's routing: `logits` on the device, `host` the same values.
    pub fn new(logits: Tensor<2>, host: &[f64], routing: Routing, e: usize, k: usize) -> Self {
        let tokens = host.len() / e;
        let mut load = vec![0.0; e];
        routing.chosen.iter().for_each(|&c| load[c] += 1.0);
        let mut softmax_load = vec![0.0; e];
        let (mut entropy, mut z, mut logit_max) = (0.0, 0.0, 0.0f64);
        for row in host.chunks(e) {
            top(row, k).into_iter().for_each(|c| softmax_load[c] += 1.0);
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
            load,
            softmax_load,
            tokens,
            entropy: entropy / per,
            logit_max,
            z: z / per,
            chosen: routing.chosen,
            dropped: 0,
        }
    }
}

/// The load-balancing loss over all the layers' records, `[1]` (see the module doc).
pub fn balance_loss(records: &[RouterRecord]) -> Tensor<1> {
    let e = records[0].load.len();
    let rows: usize = records.iter().map(|r| r.tokens).sum();
    let mut f = vec![0.0; e];
    for r in records {
        f.iter_mut().zip(&r.softmax_load).for_each(|(a, b)| *a += b);
    }
    let probs: Vec<Tensor<1>> = records.iter().map(|r| softmax(r.logits.clone(), 1).sum_dim(0).reshape([e])).collect();
    let p = probs.into_iter().reduce(|a, b| a + b).expect("one record at least");
    let device = p.device();
    let f = Tensor::<1>::from_data(TensorData::new(f, [e]), (&device, p.dtype()));
    (f * p).sum() * (e as f64 / (rows * rows) as f64)
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

    /// The update by hand: loads [4, 2, 0] (mean 2) move the biases by −γ, 0, +γ.
    #[test]
    fn bias_update_by_hand() {
        let b = crate::testutil::f64_tensor(&[0.5, 0.0, -0.5], [3], false);
        let b = update_bias(b, &[4.0, 2.0, 0.0], 0.1);
        let want = [0.4, 0.0, -0.4];
        assert!(crate::testutil::values(b).iter().zip(want).all(|(v, w)| (v - w).abs() < 1e-15));
    }
}
