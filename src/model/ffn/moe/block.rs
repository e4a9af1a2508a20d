//! The mixture-of-experts feed-forward block:
//!
//! ```text
//! MoE(x) = Σ_{e ∈ TopK(x)} w_e(x) · N_e(FFN_e(x))  +  N_s(FFN_shared(x)),   l = N_r(x) W_r
//! ```
//!
//! (the norm slots `N_r`, `N_e` empty unless `[model.moe]` fills them), the router ([`crate::model::ffn::moe::router`]) choosing each token's `k` experts and their weights from
//! `x W_r`, every expert the model's FFN kind ([`crate::model::ffn::dense`]) at width `d_expert`, the shared
//! experts (DeepSeek) one FFN every token passes through. The tokens are sorted by expert and
//! each expert runs once on its rows (one product per expert). Dropless by default (every
//! chosen pair is computed); under a capacity factor `c` (Switch Transformer) a training
//! forward lets an expert take at most `⌈c·N·k/E⌉` pairs, every token's first choice before any
//! token's second (GShard's priority), and drops and counts the rest. Evaluation and decoding
//! forwards are dropless, as in GShard, Switch and ST-MoE: a token's result there never depends
//! on the other tokens of its batch.
//!
//! # Shapes
//! - input and output: `[B, T, d]`; router logits `[B·T, E]`

use crate::init::{Init, ParamBuilder};
use crate::kernels::widen;
use crate::model::base::compute::Compute;
use crate::model::base::names::child;
use crate::model::base::records::Records;
use crate::model::ffn::dense::{DenseFfn, FfnShape};
use crate::model::ffn::moe::balance::{ROUTING, RouterRecord};
use crate::model::ffn::moe::options::MoeNorms;
use crate::model::ffn::moe::router::Router;
use crate::norm::{Norm, maybe_norm};
use burn::module::{Module, Param};
use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

/// A MoE block's parameters and routing.
#[derive(Module, Debug)]
pub struct Moe {
    /// `W_r` `[d, E]`.
    pub router: Param<Tensor<2>>,
    /// DeepSeek V3's selection bias `b` `[E]`: a buffer, moved by the after-step balancing,
    /// never by a gradient (sigmoid routers only).
    pub selection_bias: Option<Param<Tensor<1>>>,
    pub experts: Vec<DenseFfn>,
    pub shared: Option<DenseFfn>,
    /// `N_r` on the router's input, when `[model.moe] router_norm` fills the slot.
    pub router_norm: Option<Norm>,
    /// `N_e` on each expert's output (the shared experts' last), when `expert_norm` fills it;
    /// empty otherwise.
    pub expert_norms: Vec<Norm>,
    #[module(skip)]
    pub kind: Router,
    #[module(skip)]
    pub top_k: usize,
    /// The capacity factor `c`: in a training forward each expert takes at most `⌈c·N·k/E⌉` of
    /// its `N·k` (token, slot) pairs, by GShard's priority, the rest dropped (that slot adds
    /// nothing); `None`: dropless. Evaluation and decoding forwards are always dropless.
    #[module(skip)]
    pub capacity: Option<f64>,
}

/// The (token, slot) pairs an expert computes (positions `n·k + j` into the routing), grouped by
/// expert and within each by priority (slot `j`, then token `n`), how many each expert
/// computes, and the pairs dropped over its capacity.
struct Dispatch {
    order: Vec<usize>,
    counts: Vec<usize>,
    dropped: usize,
}

/// The dispatch of `chosen` (`[N·k]`) over `e` experts under the capacity factor `capacity`:
/// a full expert keeps the first choices of all its tokens before any second choice (GShard's
/// priority), then in token order.
fn dispatch(chosen: &[usize], e: usize, k: usize, capacity: Option<f64>) -> Dispatch {
    let mut order: Vec<usize> = (0..chosen.len()).collect();
    order.sort_by_key(|&p| (chosen[p], p % k, p / k));
    let cap =
        capacity.map_or(usize::MAX, |c| ((c * (chosen.len() / k * k) as f64) / e as f64).ceil().max(1.0) as usize);
    let mut counts = vec![0usize; e];
    order.retain(|&p| {
        let keep = counts[chosen[p]] < cap;
        counts[chosen[p]] += usize::from(keep);
        keep
    });
    Dispatch { dropped: chosen.len() - order.len(), order, counts }
}

/// What builds one MoE block: the expert shape (its width `d_expert`) and the routing.
pub struct MoeShape {
    pub expert: FfnShape,
    pub experts: usize,
    pub top_k: usize,
    pub shared: usize,
    pub router: Router,
    pub norms: MoeNorms,
    pub capacity: Option<f64>,
}

impl Moe {
    pub fn new(s: MoeShape, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let d = s.expert.d_model;
        let router = b.matrix(&child(prefix, "router"), [d, s.experts], Init::Normal { std: s.expert.std })?;
        let selection_bias = s
            .router
            .has_bias()
            .then(|| b.vector(&child(prefix, crate::model::base::names::SELECTION_BIAS), s.experts, Init::Zeros))
            .transpose()?
            .map(|p| p.set_require_grad(false));
        let experts = (0..s.experts)
            .map(|e| DenseFfn::new(&s.expert, b, &child(prefix, &format!("experts.{e}"))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let shared = (s.shared > 0)
            .then(|| {
                let shape = FfnShape { d_ff: s.shared * s.expert.d_ff, lora: None, suv: None, ..s.expert };
                DenseFfn::new(&shape, b, &child(prefix, "shared"))
            })
            .transpose()?;
        let router_norm =
            s.norms.router.clone().map(|k| Norm::new(k, d, b, &child(prefix, "router_norm"))).transpose()?;
        let normed = s.experts + usize::from(shared.is_some());
        let expert_norms = match &s.norms.expert {
            Some(k) => (0..normed)
                .map(|e| Norm::new(k.clone(), d, b, &child(prefix, &format!("expert_norms.{e}"))))
                .collect::<anyhow::Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        Ok(Self {
            router,
            selection_bias,
            experts,
            shared,
            router_norm,
            expert_norms,
            kind: s.router,
            top_k: s.top_k,
            capacity: s.capacity,
        })
    }

    /// `[B, T, d]` → `[B, T, d]`; appends the layer's [`RouterRecord`] to `records` when they
    /// collect [`ROUTING`].
    pub fn forward(&self, x: Tensor<3>, c: &Compute, records: &Records) -> Tensor<3> {
        let [bsz, t, d] = x.dims();
        let (n, e, k) = (bsz * t, self.experts.len(), self.top_k);
        let flat = x.clone().reshape([n, d]);
        let router_in = maybe_norm(&self.router_norm, widen(x.clone()), c.kernels).reshape([n, d]);
        let logits = router_in.matmul(widen(self.router.val()));
        let (host, bias) = self.read(&logits, n * e);
        let routing = self.kind.route(&host, self.kind.scores(logits.clone()), &bias, k);
        // Only a training forward (on an autodiff device) drops: at evaluation and in decoding
        // a token's result must not depend on its neighbours in the batch or the cache.
        let capacity = self.capacity.filter(|_| x.is_autodiff());
        let Dispatch { order, counts: load, dropped } = dispatch(&routing.chosen, e, k, capacity);
        let device = x.device();
        let index = |v: Vec<i64>| Tensor::<1, Int>::from_data(TensorData::new(v.clone(), [v.len()]), &device);
        let tokens = index(order.iter().map(|&p| (p / k) as i64).collect());
        let rows = flat.clone().select(0, tokens.clone());
        let mut outputs = Vec::with_capacity(e);
        let mut start = 0;
        for (i, (expert, &count)) in self.experts.iter().zip(&load).enumerate() {
            if count > 0 {
                let input = rows.clone().narrow(0, start, count).reshape([1, count, d]);
                outputs.push(self.expert_output(i, expert.forward(input, c), c).reshape([count, d]));
                start += count;
            }
        }
        let weights =
            routing.weights.clone().reshape([n * k]).select(0, index(order.iter().map(|&p| p as i64).collect()));
        let weighted = Tensor::cat(outputs, 0) * weights.unsqueeze_dim(1);
        let mut out = widen(flat).zeros_like().select_assign(0, tokens, weighted, IndexingUpdateOp::Add);
        if let Some(shared) = &self.shared {
            out = out + self.expert_output(self.experts.len(), shared.forward(x, c), c).reshape([n, d]);
        }
        if records.collects(ROUTING) {
            let probs = self.kind.probabilities(logits.clone());
            records.push(ROUTING, RouterRecord { dropped, ..RouterRecord::new(logits, probs, &host, routing, t) });
        }
        out.reshape([bsz, t, d])
    }

    /// Expert `i`'s output in f32, through its output norm `N_e` when the block has them (the
    /// shared experts are `i = E`).
    fn expert_output(&self, i: usize, y: Tensor<3>, c: &Compute) -> Tensor<3> {
        match self.expert_norms.get(i) {
            Some(n) => n.forward(widen(y), c.kernels),
            None => widen(y),
        }
    }

    /// The logits `[N·E]` and the selection bias on the host, in one read.
    fn read(&self, logits: &Tensor<2>, len: usize) -> (Vec<f64>, Vec<f64>) {
        let flat = logits.clone().detach().reshape([len]);
        let parts = match &self.selection_bias {
            Some(b) => vec![flat, widen(b.val().detach())],
            None => vec![flat],
        };
        // The conversion to f64 is done first, so reading it back as f64 cannot fail.
        let mut v = Tensor::cat(parts, 0).into_data().convert::<f64>().try_into_vec::<f64>().expect("f64 data");
        let bias = v.split_off(len.min(v.len()));
        (v, bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: 4 tokens, top 1, 2 experts, c = 1: each expert takes ⌈1·4/2⌉ = 2 pairs, so the
    /// third token for expert 0 is dropped; top 2 over 3 tokens at c = 0.5: ⌈0.5·6/2⌉ = 2.
    #[test]
    fn dispatch_by_hand() {
        let d = dispatch(&[0, 0, 0, 1], 2, 1, Some(1.0));
        assert_eq!((d.order, d.counts, d.dropped), (vec![0, 1, 3], vec![2, 1], 1));
        let d = dispatch(&[0, 1, 0, 1, 0, 1], 2, 2, Some(0.5));
        assert_eq!((d.order, d.counts, d.dropped), (vec![0, 2, 1, 3], vec![2, 2], 2));
        let d = dispatch(&[0, 1, 0, 1, 0, 1], 2, 2, None);
        assert_eq!((d.order, d.counts, d.dropped), (vec![0, 2, 4, 1, 3, 5], vec![3, 3], 0));
    }

    /// GShard's priority by hand: token 0 chooses experts (1, 0), token 1 (0, 1); at c = 0.5
    /// each expert takes ⌈0.5·4/2⌉ = 1 pair, so each keeps the token whose first choice it is
    /// (pairs 2 and 0), not the earlier token's second choice (pairs 1 and 3). In token order the
    /// second choices would have won.
    #[test]
    fn a_first_choice_goes_before_any_second() {
        let d = dispatch(&[1, 0, 0, 1], 2, 2, Some(0.5));
        assert_eq!((d.order, d.counts, d.dropped), (vec![2, 0], vec![1, 1], 2));
    }
}
