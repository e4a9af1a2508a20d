//! The one table of MoE router kinds and the routing each computes, as its authors wrote it.
//!
//! From the router logits `l = x W_r` (`[N, E]`) a router picks each token's `k` experts and
//! the weights their outputs are summed with:
//!
//! | kind | selection | weights |
//! |---|---|---|
//! | `softmax-topk` | top-k of `p = softmax(l)` | `p` of the chosen, optionally divided by their sum (OLMoE, Qwen3-MoE `norm_topk_prob`) |
//! | `topk-softmax` | top-k of `l` | `softmax` over the chosen logits (Mixtral) |
//! | `sigmoid` | top-k of `σ(l) + b` within the best groups | `σ(l)` of the chosen, optionally normalised, times a routed scale (DeepSeek V3) |
//!
//! DeepSeek V3's selection bias `b` moves no weight; its after-step update
//! ([`crate::model::ffn::moe::balance::update_bias`]) balances the load without an auxiliary loss. The
//! selection runs on the host, on the scores read once per layer (the dispatch needs the
//! chosen experts there anyway); the weights are gathered on the device, carrying the
//! gradient to the router.

use anyhow::ensure;
use burn::tensor::activation::{log_sigmoid, sigmoid, softmax};
use burn::tensor::{Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// A router kind with its options (`[model.moe.router]`, `kind = "…"`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Router {
    /// Softmax over the experts, then the top k; `normalize` divides the k weights by their sum.
    SoftmaxTopk {
        #[serde(default)]
        normalize: bool,
    },
    /// The top k logits, then a softmax over them.
    TopkSoftmax,
    /// Sigmoid scores; selection by `σ(l) + b` among the `top_groups` best of `groups` expert
    /// groups (a group's score: the sum of its two best); weights `σ(l)`, normalised when
    /// `normalize` (denominator `+1e-20`), times `scale`. `bias_update` is the step γ of the
    /// auxiliary-loss-free balancing (0: the bias stays).
    Sigmoid {
        #[serde(default = "one")]
        groups: usize,
        #[serde(default = "one")]
        top_groups: usize,
        #[serde(default = "yes")]
        normalize: bool,
        #[serde(default = "unit")]
        scale: f64,
        #[serde(default)]
        bias_update: f64,
    },
}

fn one() -> usize {
    1
}
fn yes() -> bool {
    true
}
fn unit() -> f64 {
    1.0
}

impl Default for Router {
    fn default() -> Self {
        Router::SoftmaxTopk { normalize: false }
    }
}

/// One router kind.
pub struct RouterKindInfo {
    /// The name a config writes (`kind = "softmax-topk"`).
    pub name: &'static str,
    /// Its selection and weights, with its source.
    pub formula: &'static str,
}

/// Every router kind, in [`Router`]'s order.
pub const KINDS: &[RouterKindInfo] = &[
    RouterKindInfo {
        name: "softmax-topk",
        formula: "p = softmax(x W_r); the top k of p, weights p (÷ their sum with normalize) (OLMoE; Qwen3-MoE's norm_topk_prob)",
    },
    RouterKindInfo {
        name: "topk-softmax",
        formula: "the top k of l = x W_r, weights softmax(l over the chosen) (Mixtral)",
    },
    RouterKindInfo {
        name: "sigmoid",
        formula: "s = σ(x W_r); the top k of s + b within the top_groups best groups, weights s (÷ Σ + 1e-20 with \
                  normalize) × scale; b moved by ±γ after each step (DeepSeek V3)",
    },
];

/// Where the chosen experts of `N` tokens are, on the host and on the device.
pub struct Routing {
    /// The chosen experts, `k` per token in the order their weights rank them, `[N·k]`.
    pub chosen: Vec<usize>,
    /// Their weights `[N, k]`, differentiable in the router weights.
    pub weights: Tensor<2>,
}

impl Router {
    /// This kind's row of [`KINDS`].
    pub fn info(self) -> &'static RouterKindInfo {
        let i = match self {
            Router::SoftmaxTopk { .. } => 0,
            Router::TopkSoftmax => 1,
            Router::Sigmoid { .. } => 2,
        };
        &KINDS[i]
    }

    /// Whether the router keeps DeepSeek V3's selection bias `b` `[E]`.
    pub fn has_bias(self) -> bool {
        matches!(self, Router::Sigmoid { .. })
    }

    /// The auxiliary-loss-free balancing step γ, when the router updates its bias.
    pub fn bias_step(self) -> Option<f64> {
        match self {
            Router::Sigmoid { bias_update, .. } if bias_update > 0.0 => Some(bias_update),
            _ => None,
        }
    }

    /// Checks the options against `experts` and `top_k`.
    pub fn check(self, experts: usize, top_k: usize) -> anyhow::Result<()> {
        let Router::Sigmoid { groups, top_groups, scale, bias_update, .. } = self else { return Ok(()) };
        ensure!(
            groups >= 1 && experts.is_multiple_of(groups),
            "model.moe.router.groups = {groups} must divide model.moe.experts = {experts}"
        );
        ensure!(
            groups == 1 || experts / groups >= 2,
            "model.moe.router.groups = {groups} leaves fewer than 2 experts a group; a group's score is the sum of its \
             two best"
        );
        ensure!(
            (1..=groups).contains(&top_groups),
            "model.moe.router.top_groups = {top_groups} must be between 1 and groups = {groups}"
        );
        ensure!(
            top_k <= top_groups * (experts / groups),
            "model.moe.top_k = {top_k} is more than the {} experts of the top_groups = {top_groups} groups",
            top_groups * (experts / groups)
        );
        ensure!(scale.is_finite() && scale > 0.0, "model.moe.router.scale = {scale} must be > 0");
        ensure!(
            bias_update.is_finite() && bias_update >= 0.0,
            "model.moe.router.bias_update = {bias_update} must be ≥ 0"
        );
        Ok(())
    }

    /// The scores the device computes from `logits` `[N, E]`: `softmax(l)`, `l`, or `σ(l)`.
    pub fn scores(self, logits: Tensor<2>) -> Tensor<2> {
        match self {
            Router::SoftmaxTopk { .. } => softmax(logits, 1),
            Router::TopkSoftmax => logits,
            Router::Sigmoid { .. } => sigmoid(logits),
        }
    }

    /// The router's probability of each of the `E` experts `[N, E]`, the `P` its balancing loss
    /// reads ([`crate::model::ffn::moe::balance`]): `softmax(l)` for the softmax kinds; for the sigmoid router
    /// DeepSeek V3's normalised scores `s'_e = σ(l_e) / Σ_j σ(l_j)`, computed as
    /// `softmax(log σ(l))` so that they sum to 1 however small the scores: with an ε in the
    /// denominator (1e-20 in Megatron-LM and OLMo-core before its fix, OLMo-core #255,
    /// Megatron-LM #1545) a router that pushes every score below ε lowers the loss without
    /// balancing anything.
    pub fn probabilities(self, logits: Tensor<2>) -> Tensor<2> {
        match self {
            Router::SoftmaxTopk { .. } | Router::TopkSoftmax => softmax(logits, 1),
            Router::Sigmoid { .. } => softmax(log_sigmoid(logits), 1),
        }
    }

    /// Routes `N` tokens: `host` is `[N·E]`, the logits on the host (f64), `scores` the device's
    /// [`Router::scores`] of them, `bias` the selection bias on the host (sigmoid routers).
    pub fn route(self, host: &[f64], scores: Tensor<2>, bias: &[f64], k: usize) -> Routing {
        let [n, e] = scores.dims();
        let chosen = self.choose(host, bias, e, k);
        let ids: Vec<i64> = chosen.iter().map(|&c| c as i64).collect();
        let index = Tensor::<2, Int>::from_data(TensorData::new(ids, [n, k]), &scores.device());
        let picked = scores.gather(1, index);
        let weights = match self {
            Router::SoftmaxTopk { normalize: false } => picked,
            Router::SoftmaxTopk { normalize: true } => picked.clone() / picked.sum_dim(1),
            Router::TopkSoftmax => softmax(picked, 1),
            Router::Sigmoid { normalize, scale, .. } => {
                let w = if normalize { picked.clone() / (picked.sum_dim(1) + 1e-20) } else { picked };
                if scale == 1.0 { w } else { w * scale }
            }
        };
        Routing { chosen, weights }
    }

    /// Each token's `k` experts by the selection score, best first (ties to the lower index).
    fn choose(self, logits: &[f64], bias: &[f64], e: usize, k: usize) -> Vec<usize> {
        let mut chosen = Vec::with_capacity(logits.len() / e * k);
        for row in logits.chunks(e) {
            let score: Vec<f64> = match self {
                // Softmax is monotone: the top k of p are the top k of l.
                Router::SoftmaxTopk { .. } | Router::TopkSoftmax => row.to_vec(),
                Router::Sigmoid { groups, top_groups, .. } => {
                    let s: Vec<f64> = row.iter().zip(bias).map(|(l, b)| 1.0 / (1.0 + (-l).exp()) + b).collect();
                    group_limited(s, groups, top_groups)
                }
            };
            chosen.extend(top(&score, k));
        }
        chosen
    }
}

/// The indices of the `k` largest of `v`, largest first; equal values by lower index.
pub fn top(v: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    order.truncate(k);
    order
}

/// DeepSeek V3's group limit: the scores of experts outside the `top` best of `groups`
/// contiguous groups (a group's score the sum of its two best) set to −∞, as transformers'
/// `DeepseekV3TopkRouter` and DeepSeek-V3's `inference/model.py` mask them: no expert of a
/// group not chosen can be selected, however low the selection biases of the chosen groups.
fn group_limited(mut s: Vec<f64>, groups: usize, top_groups: usize) -> Vec<f64> {
    if groups == 1 {
        return s;
    }
    let size = s.len() / groups;
    let group_score: Vec<f64> = s.chunks(size).map(|g| top(g, 2).iter().map(|&i| g[i]).sum()).collect();
    let kept = top(&group_score, top_groups);
    for (g, chunk) in s.chunks_mut(size).enumerate() {
        if !kept.contains(&g) {
            chunk.fill(f64::NEG_INFINITY);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: 4 experts in 2 groups, scores before the bias σ(l); group 0's two best sum to
    /// less than group 1's, so with one group kept only experts 2 and 3 may be chosen.
    #[test]
    fn group_limit_by_hand() {
        let s = vec![0.9, 0.1, 0.6, 0.5];
        let inf = f64::NEG_INFINITY;
        assert_eq!(group_limited(s.clone(), 2, 1), [inf, inf, 0.6, 0.5]);
        assert_eq!(top(&group_limited(s, 2, 1), 2), [2, 3]);
        assert_eq!(top(&[1.0, 3.0, 3.0, 2.0], 3), [1, 2, 3]);
    }

    /// A uniform shift of the selection biases moves every score and every group's score alike,
    /// so it must not change DeepSeek V3's routing: 16 experts in 4 groups, 2 kept, top 4, over
    /// 64 tokens of random logits, shifted by −5 … +0.3 (below about −σ the chosen groups'
    /// scores fall under 0, the value a zero mask would give the others). Every choice also
    /// lies within the chosen groups.
    #[test]
    fn a_uniform_bias_shift_leaves_every_token_s_experts_unchanged() {
        let (e, k, n) = (16, 4, 64);
        let router = Router::Sigmoid { groups: 4, top_groups: 2, normalize: true, scale: 1.0, bias_update: 0.0 };
        let mut rng = crate::rng::SplitMix64::new(5);
        let logits: Vec<f64> = (0..n * e).map(|_| rng.normal() * 2.0).collect();
        let bias: Vec<f64> = (0..e).map(|_| rng.normal() * 0.1).collect();
        let base = router.choose(&logits, &bias, e, k);
        for shift in [-5.0, -0.6, -0.1, 0.3] {
            let moved: Vec<f64> = bias.iter().map(|b| b + shift).collect();
            assert_eq!(router.choose(&logits, &moved, e, k), base, "shift {shift}");
        }
        for (row, chosen) in logits.chunks(e).zip(base.chunks(k)) {
            let s: Vec<f64> = row.iter().zip(&bias).map(|(l, b)| 1.0 / (1.0 + (-l).exp()) + b).collect();
            let group = |g: usize| top(&s[g * 4..g * 4 + 4], 2).iter().map(|&i| s[g * 4 + i]).sum::<f64>();
            let kept = top(&(0..4).map(group).collect::<Vec<_>>(), 2);
            assert!(chosen.iter().all(|c| kept.contains(&(c / 4))), "{chosen:?} outside groups {kept:?}");
        }
    }

    #[test]
    fn each_row_is_its_kind() {
        let kinds = [
            Router::SoftmaxTopk { normalize: false },
            Router::TopkSoftmax,
            Router::Sigmoid { groups: 1, top_groups: 1, normalize: true, scale: 1.0, bias_update: 0.0 },
        ];
        for kind in kinds {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json["kind"], kind.info().name);
        }
        assert_eq!(KINDS.len(), kinds.len());
    }
}
