//! Causal multi-head self-attention with RoPE, optional QK-norm: RMSNorm of queries and keys
//! per head over `d_head` (Qwen3) or over the full width before the head split (OLMo 2), in
//! both cases before RoPE. Grouped-query attention (`n_kv_heads` < `n_heads`: key/value head
//! `j` serves query heads `j·r … (j+1)·r − 1`, `r = n_heads / n_kv_heads`, as Hugging Face's
//! `repeat_kv`) and query/key/value biases (Qwen2) are options for imported checkpoints; the
//! KV cache holds the `n_kv_heads` heads.
//!
//! Recipe options: QK L2-norm (Megatron-LM's `qk_l2_norm` and Llama 4's `L2Norm`:
//! `q/√(mean(q²) + ε)` per head, no gain; or unit L2 norm, `q/√(‖q‖² + ε)`),
//! V-norm (RMSNorm of the values, per head or over the full width: HybridNorm's QKV-norm) and
//! soft-capping of the logits, `c·tanh((q·k/√h)/c)` before the mask (Gemma 2). A soft-capped
//! attention runs the composite path. nGPT (the recipe's `hypersphere`): after RoPE, each
//! head's query and key scaled to unit L2 norm times a learnable `s_qk ∈ ℝ^{h}` per head, and
//! the logits `q·k·√h` (softmax scale `√h` instead of `1/√h`; NVIDIA's reference code).
//!
//! On the CPU with `model.kernels = "fused"` (the default), unprobed causal attention is one
//! fused op with a hand-written backward ([`crate::kernels::attention`]: blocks of query rows,
//! masked blocks skipped, the log-sum-exp saved instead of the probabilities). The composite
//! path, `softmax(q kᵀ/√h + M) v` written out with matmul, an additive mask and softmax and
//! differentiated by autodiff, is the reference (checked against PyTorch) and serves probing,
//! padding masks, half precision and the GPU backends.
//!
//! On a GPU with `model.kernels = "fused"`, a forward that no gradient flows through (evaluation,
//! decoding's prefill, `bench`'s forward) with a purely causal mask over as many keys as queries
//! runs burn's fused attention (`burn::tensor::module::attention`: cubek's flash attention on
//! wgpu/vulkan/cuda, scale `1/√h`, causal). Training keeps the composite path: burn 0.22's
//! autodiff computes `attention` by decomposing it into these same ops, so a fused forward
//! would gain nothing there.

use crate::init::{Init, ParamBuilder};
use crate::kernels::{self, Kernels, Precision, widen};
use crate::model::base::compute::Compute;
use crate::model::base::context::ForwardContext;
use crate::model::base::lora::{Lora, LoraPlan, LoraTarget, adapted};
use crate::model::base::names::child;
use crate::model::base::records::RecordKind;
use crate::model::base::rope;
use crate::norm::{Norm, NormKind};
use crate::recipe::{AttnGate, QkNorm};
use burn::backend::DispatchDevice;
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;

/// The name of the output gate's weight `W_θ` under an attention prefix.
pub const GATE_WEIGHT: &str = "w_gate";
/// The name of the sink logits `b` under an attention prefix.
pub const SINKS: &str = "sinks";

/// The name of value residual's `(λ₁, λ₂)` under an attention prefix.
pub const VALUE_LAMBDA: &str = "value_lambda";

/// A layer's part in value residual learning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRole {
    /// The first layer: its values are the `v₁` every later layer mixes in.
    Source,
    /// A later layer: `v ← λ₁·v + λ₂·v₁`.
    Mix,
}

/// Probing forwards: each attention sublayer's softmax diagnostics.
pub const STATS: RecordKind<AttnStats> = RecordKind::named("attention/stats");
/// QK-clip's training forwards: each attention sublayer's largest logit `q·k/√h` of each head,
/// `[H]`, outside the autodiff graph.
pub const HEAD_MAX: RecordKind<Tensor<1>> = RecordKind::named("attention/head_max");

/// One attention sublayer's keys (after QK-norm and RoPE) and values of the positions decoded
/// so far, each `[B, H, T, h]`: the KV cache of one layer.
pub type KvSlot = Option<(Tensor<4>, Tensor<4>)>;

/// Softmax-saturation diagnostics of one attention sublayer (the LayerNorm tutorial's troubleshooting):
/// the largest pre-softmax logit `q·k/√h` over all heads and positions, and the mean entropy
/// (nats) of the attention distributions over batch, heads and query positions.
#[derive(Clone, Debug)]
pub struct AttnStats {
    pub max_logit: Tensor<1>,
    /// The largest logit of each head, `[H]` (QK-clip's `S_max^h`).
    pub head_max_logit: Tensor<1>,
    pub entropy: Tensor<1>,
    /// The mean attention probability on the first key over batch, heads and query rows 2…T:
    /// the attention-sink mass (the Peri-LN paper's massive-activation story, the gated
    /// attention paper's Figure 1).
    pub first_key_mass: Tensor<1>,
    /// The mean of gated attention's sigmoid gate `σ(X W_θ)`, when the sublayer is gated.
    pub gate_mean: Option<Tensor<1>>,
}

/// Whether `q` is on a GPU device and no gradient flows through it (burn's fused attention
/// serves these; see the module's doc).
fn gpu_forward_only(q: &Tensor<4>) -> bool {
    !q.is_require_grad() && !matches!(q.device().inner().as_dispatch(), DispatchDevice::Flex(_))
}

#[derive(Module, Debug)]
pub struct Attention {
    pub wq: Param<Tensor<2>>,
    pub wk: Param<Tensor<2>>,
    pub wv: Param<Tensor<2>>,
    pub wo: Param<Tensor<2>>,
    /// Query, key and value biases (Qwen2), when the model has them.
    pub bq: Option<Param<Tensor<1>>>,
    pub bk: Option<Param<Tensor<1>>>,
    pub bv: Option<Param<Tensor<1>>>,
    pub q_norm: Option<Norm>,
    pub k_norm: Option<Norm>,
    /// V-norm (HybridNorm): RMSNorm of the values, per head or over the full width.
    pub v_norm: Option<Norm>,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// QK-norm over the full width (before the head split) rather than per head.
    #[module(skip)]
    pub qk_full: bool,
    #[module(skip)]
    pub v_full: bool,
    /// QK L2-norm's form (unit mean square or unit L2 norm) and ε, when queries and keys are
    /// scaled so.
    #[module(skip)]
    pub qk_l2: Option<(QkNorm, f64)>,
    /// Soft-cap `c` of the logits.
    #[module(skip)]
    pub softcap: Option<f64>,
    /// nGPT's `s_qk` `[n_heads·h]` (stored; used times `sqk_factor`), when on the hypersphere.
    pub sqk: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub sqk_factor: f64,
    /// Qwen's output gate `W_θ` `[d, H]` (headwise) or `[d, H·h]` (elementwise), when gated.
    pub w_gate: Option<Param<Tensor<2>>>,
    /// gpt-oss's sink logit `b_h` of each head `[H]`, when the softmax has sinks.
    pub sinks: Option<Param<Tensor<1>>>,
    /// Value residual: `(λ₁, λ₂)` of `v ← λ₁·v + λ₂·v₁`, `[2]`, in every layer after the first.
    pub value_lambda: Option<Param<Tensor<1>>>,
    /// Value residual: this is the first layer, whose values the later ones mix in.
    #[module(skip)]
    pub value_source: bool,
    /// LoRA adapters of `W_Q`, `W_K`, `W_V`, `W_O`, when `[model.lora]` adapts them.
    pub lora_wq: Option<Lora>,
    pub lora_wk: Option<Lora>,
    pub lora_wv: Option<Lora>,
    pub lora_wo: Option<Lora>,
}

/// Sizes and init scales for one attention block.
pub struct AttnShape {
    pub d_model: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Query, key and value biases.
    pub bias: bool,
    pub std: f64,
    /// Multiplies the std of `W_Q` and `W_K` (1 but under DeepScaleLM's moment control).
    pub init_qk: f64,
    /// Multiplies the std of `W_V` (DeepNet's β).
    pub init_in: f64,
    /// Multiplies the std of `W_O` (GPT-2's 1/√(2L), DeepNet's β).
    pub init_out: f64,
    /// Where QK-norm applies (never [`QkNorm::None`] here) and its ε; `None` without QK-norm.
    pub qk_norm: Option<(QkNorm, f64)>,
    /// Where V-norm applies (`Head` or `Full`) and its ε; `None` without.
    pub v_norm: Option<(QkNorm, f64)>,
    /// Soft-cap of the attention logits.
    pub softcap: Option<f64>,
    /// nGPT's `s_qk`, when the recipe lives on the hypersphere.
    pub sqk: Option<crate::recipe::Scaled>,
    /// Qwen's sigmoid gate on each head's output, when on.
    pub gate: AttnGate,
    /// gpt-oss's per-head sink logit in the softmax denominator.
    pub sink: bool,
    /// Value residual: this layer's role, when the recipe has it.
    pub value_residual: Option<ValueRole>,
    /// The projections LoRA adapts, when it does.
    pub lora: Option<LoraPlan>,
}

impl Attention {
    pub fn new(s: &AttnShape, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let d = s.d_model;
        let (dq, dkv) = (s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim);
        let normal = |scale: f64| Init::Normal { std: s.std * scale };
        let rms = |b: &mut ParamBuilder<'_>, on: Option<(QkNorm, f64)>, name: &str, full: usize| {
            let Some((place, eps)) = on.filter(|(p, _)| matches!(p, QkNorm::Head | QkNorm::Full)) else {
                return Ok(None);
            };
            let width = if place == QkNorm::Full { full } else { s.head_dim };
            Norm::new(NormKind::RmsNorm { gain: true, eps }, width, b, &child(prefix, name)).map(Some)
        };
        let bias = |b: &mut ParamBuilder<'_>, name: &str, n: usize| {
            s.bias.then(|| b.vector(&child(prefix, name), n, Init::Zeros)).transpose()
        };
        Ok(Self {
            wq: b.matrix(&child(prefix, "wq"), [d, dq], normal(s.init_qk))?,
            wk: b.matrix(&child(prefix, "wk"), [d, dkv], normal(s.init_qk))?,
            wv: b.matrix(&child(prefix, "wv"), [d, dkv], normal(s.init_in))?,
            wo: b.matrix(&child(prefix, "wo"), [dq, d], normal(s.init_out))?,
            bq: bias(b, "bq", dq)?,
            bk: bias(b, "bk", dkv)?,
            bv: bias(b, "bv", dkv)?,
            q_norm: rms(b, s.qk_norm, "q_norm", dq)?,
            k_norm: rms(b, s.qk_norm, "k_norm", dkv)?,
            v_norm: rms(b, s.v_norm, "v_norm", dkv)?,
            n_heads: s.n_heads,
            n_kv_heads: s.n_kv_heads,
            head_dim: s.head_dim,
            qk_full: matches!(s.qk_norm, Some((QkNorm::Full, _))),
            v_full: matches!(s.v_norm, Some((QkNorm::Full, _))),
            qk_l2: s.qk_norm.filter(|(p, _)| p.is_l2()),
            softcap: s.softcap,
            sqk: s.sqk.map(|q| b.vector(&child(prefix, "sqk"), dq, Init::Constant(q.stored))).transpose()?,
            sqk_factor: s.sqk.map_or(1.0, |q| q.factor),
            // Qwen's code draws the gate as part of q_proj; HF's gpt-oss draws sinks N(0, σ²).
            w_gate: match s.gate {
                AttnGate::None => None,
                AttnGate::Headwise => Some(b.matrix(&child(prefix, GATE_WEIGHT), [d, s.n_heads], normal(s.init_qk))?),
                AttnGate::Elementwise => Some(b.matrix(&child(prefix, GATE_WEIGHT), [d, dq], normal(s.init_qk))?),
            },
            sinks: s.sink.then(|| b.vector(&child(prefix, SINKS), s.n_heads, normal(1.0))).transpose()?,
            // ResFormer's fixed 0.5 and 0.5, the start of its learnable λ's.
            value_lambda: (s.value_residual == Some(ValueRole::Mix))
                .then(|| b.vector(&child(prefix, VALUE_LAMBDA), 2, Init::Constant(0.5)))
                .transpose()?,
            value_source: s.value_residual == Some(ValueRole::Source),
            lora_wq: LoraPlan::adapter(s.lora.as_ref(), LoraTarget::Q, [d, dq], b, prefix)?,
            lora_wk: LoraPlan::adapter(s.lora.as_ref(), LoraTarget::K, [d, dkv], b, prefix)?,
            lora_wv: LoraPlan::adapter(s.lora.as_ref(), LoraTarget::V, [d, dkv], b, prefix)?,
            lora_wo: LoraPlan::adapter(s.lora.as_ref(), LoraTarget::O, [dq, d], b, prefix)?,
        })
    }

    /// The softmax scale: `1/√h`, or nGPT's `√h` for its unit queries and keys.
    fn scale(&self) -> f64 {
        let h = self.head_dim as f64;
        if self.sqk.is_some() { h.sqrt() } else { 1.0 / h.sqrt() }
    }

    /// nGPT: `s_qk ⊙ q/‖q‖` and `s_qk ⊙ k/‖k‖` per head, for `[B, H, t, h]` after RoPE.
    fn on_sphere(&self, q: Tensor<4>, k: Tensor<4>, p: Precision) -> (Tensor<4>, Tensor<4>) {
        let Some(sqk) = &self.sqk else { return (q, k) };
        let s = (sqk.val() * self.sqk_factor).reshape([1, self.n_heads, 1, self.head_dim]);
        // Normalised in f32 (half-precision projections widened), then back in the compute type.
        let unit = |x: Tensor<4>| p.compute(l2_normalize(widen(x), QkNorm::UnitL2, 0.0) * s.clone());
        (unit(q), unit(k))
    }

    /// `[B, T, n·h]` → `[B, n, T, h]`.
    fn heads(&self, x: Tensor<3>, n: usize) -> Tensor<4> {
        let [b, t, _] = x.dims();
        x.reshape([b, t, n, self.head_dim]).swap_dims(1, 2)
    }

    /// `x W + bias` (and the LoRA update `lora` adds) in `c`'s precision.
    fn linear(
        x: Tensor<3>,
        w: &Param<Tensor<2>>,
        lora: &Option<Lora>,
        bias: &Option<Param<Tensor<1>>>,
        c: &Compute,
    ) -> Tensor<3> {
        let y = adapted(x, w, lora, c.precision, c.kernels);
        match bias {
            Some(bias) => y + c.precision.compute(bias.val().unsqueeze::<3>()),
            None => y,
        }
    }

    /// `[B, n_kv, T, h]` → `[B, n_heads, T, h]`, each key/value head repeated for its group.
    fn repeat_kv(&self, x: Tensor<4>) -> Tensor<4> {
        let r = self.n_heads / self.n_kv_heads;
        if r == 1 {
            return x;
        }
        let [b, n, t, h] = x.dims();
        x.unsqueeze_dim::<5>(2).repeat_dim(2, r).reshape([b, n * r, t, h])
    }

    /// `x`: `[B, t, d]` → `[B, t, d]`. With `kv`, the keys and values of earlier positions are
    /// read from it and this forward's appended to it.
    pub fn forward(&self, x: Tensor<3>, ctx: &ForwardContext, kv: Option<&mut KvSlot>) -> Tensor<3> {
        let [b, t, _] = x.dims();
        let gate_input = self.w_gate.as_ref().map(|_| x.clone());
        let (q, k, v) = self.qkv(x, ctx);
        let (k, v) = match kv {
            Some(slot) => {
                let (k, v) = match slot.take() {
                    Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
                    None => (k, v),
                };
                *slot = Some((k.clone(), v.clone()));
                (k, v)
            }
            None => (k, v),
        };
        let (k, v) = (self.repeat_kv(k), self.repeat_kv(v));
        if ctx.records.collects(HEAD_MAX) {
            ctx.records.push(HEAD_MAX, self.head_max_logits(&q, &k, ctx));
        }
        let out = self.attend(q, k, v, ctx);
        let c = &ctx.compute;
        let out = self.gated(out.swap_dims(1, 2), gate_input, ctx).reshape([b, t, self.n_heads * self.head_dim]);
        adapted(out, &self.wo, &self.lora_wo, c.precision, c.kernels)
    }

    /// Gated attention: the heads' outputs `o` `[B, t, H, h]` times `σ(x W_θ)` (one value per
    /// head, or per head and feature), recording the gate's mean for the probes; `o` unchanged
    /// without a gate.
    fn gated(&self, o: Tensor<4>, x: Option<Tensor<3>>, ctx: &ForwardContext) -> Tensor<4> {
        let (Some(w), Some(x)) = (&self.w_gate, x) else { return o };
        let [b, t, h, hd] = o.dims();
        let Compute { precision: p, kernels: k, .. } = ctx.compute;
        let g = sigmoid(widen(adapted(x, w, &None, p, k)));
        ctx.records.edit_last(STATS, |last| last.gate_mean = Some(g.clone().mean()));
        // Headwise `W_θ` has one column per head, elementwise one per head and feature.
        let g = if w.dims()[1] == h { g.reshape([b, t, h, 1]) } else { g.reshape([b, t, h, hd]) };
        o * p.compute(g)
    }

    /// Queries, keys and values `[B, n, t, h]`: projected, QK-normed and rotated.
    fn qkv(&self, x: Tensor<3>, ctx: &ForwardContext) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let c = &ctx.compute;
        let kern = ctx.compute.kernels;
        let fused = kern.fuse(&x) && c.precision == Precision::F32;
        let linear = |w, l, b| Self::linear(x.clone(), w, l, b, c);
        let (mut q, mut k, v) = (
            linear(&self.wq, &self.lora_wq, &self.bq),
            linear(&self.wk, &self.lora_wk, &self.bk),
            linear(&self.wv, &self.lora_wv, &self.bv),
        );
        let v = self.value_residual(self.values(v, kern), ctx);
        let qk_norms = self.q_norm.as_ref().zip(self.k_norm.as_ref());
        if let (Some((qn, kn)), true) = (qk_norms, self.qk_full) {
            q = qn.forward(q, kern);
            k = kn.forward(k, kern);
        }
        let [b, t, _] = q.dims();
        if fused && (ctx.shared_positions() || t == 1) {
            // RoPE on the projections' own [B, t, n, h] layout, then the head transpose.
            let split = |y: Tensor<3>, n: usize| y.reshape([b, t, n, self.head_dim]);
            let (q, k) = self.per_head_norms(split(q, self.n_heads), split(k, self.n_kv_heads), kern);
            // The kernel takes one table row per position. One new token per row at each
            // row's own position (a batched decode step) is rotated as one sequence whose
            // positions are the rows: `[B, 1, n, h]` read as `[1, B, n, h]`.
            let (seqs, positions) = if ctx.shared_positions() { (b, t) } else { (1, b) };
            let half = self.head_dim / 2;
            let table = |x: &Tensor<4>| x.clone().reshape([positions, half]);
            let (cos, sin) = (table(&ctx.cos), table(&ctx.sin));
            let rot = |y: Tensor<4>| {
                let [_, _, n, h] = y.dims();
                let y = kernels::rope(y.reshape([seqs, positions, n, h]), cos.clone(), sin.clone());
                y.reshape([b, t, n, h]).swap_dims(1, 2)
            };
            let (q, k) = self.on_sphere(rot(q), rot(k), c.precision);
            return (q, k, v);
        }
        let (q, k) = self.per_head_norms(self.heads(q, self.n_heads), self.heads(k, self.n_kv_heads), kern);
        let p = c.precision;
        let (cos, sin) = (p.compute(ctx.cos.clone()), p.compute(ctx.sin.clone()));
        let (q, k) = self.on_sphere(rope::apply(p.compute(q), &cos, &sin), rope::apply(p.compute(k), &cos, &sin), p);
        (q, k, v)
    }

    /// Per-head QK-norm (RMSNorm over `d_head`) or QK L2-norm of queries and keys whose last axis
    /// is the head's (either layout of the heads); unchanged otherwise.
    fn per_head_norms<const D: usize>(&self, q: Tensor<D>, k: Tensor<D>, kern: Kernels) -> (Tensor<D>, Tensor<D>) {
        match (&self.q_norm, &self.k_norm, self.qk_l2) {
            (Some(qn), Some(kn), _) if !self.qk_full => (qn.forward(q, kern), kn.forward(k, kern)),
            (_, _, Some((form, eps))) => (l2_normalize(q, form, eps), l2_normalize(k, form, eps)),
            _ => (q, k),
        }
    }

    /// Value residual: the first layer leaves its values in `ctx`; a later one returns
    /// `λ₁·v + λ₂·v₁`; `v` unchanged without it.
    fn value_residual(&self, v: Tensor<4>, ctx: &ForwardContext) -> Tensor<4> {
        if self.value_source {
            *ctx.first_values.borrow_mut() = Some(v.clone());
            return v;
        }
        let (Some(lambda), Some(v1)) = (&self.value_lambda, ctx.first_values.borrow().clone()) else { return v };
        let p = ctx.compute.precision;
        let at = |i| p.compute(lambda.val().narrow(0, i, 1).reshape([1, 1, 1, 1]));
        v * at(0) + v1 * at(1)
    }

    /// The values `[B, n_kv, t, h]` of the projection `v` `[B, t, n_kv·h]`, V-normed when the
    /// recipe says so (over the full width before the head split, or per head after it).
    fn values(&self, v: Tensor<3>, kern: Kernels) -> Tensor<4> {
        match &self.v_norm {
            Some(n) if self.v_full => self.heads(n.forward(v, kern), self.n_kv_heads),
            Some(n) => n.forward(self.heads(v, self.n_kv_heads), kern),
            None => self.heads(v, self.n_kv_heads),
        }
    }

    /// The largest logit `q·k/√h` (before any soft-cap, masked positions excluded) of each head,
    /// `[H]`, off the autodiff graph; a block of query rows at a time within
    /// `ctx.compute.scores_limit` values.
    fn head_max_logits(&self, q: &Tensor<4>, k: &Tensor<4>, ctx: &ForwardContext) -> Tensor<1> {
        let scale = self.scale();
        let (q, kt) = (widen(q.clone().detach()), widen(k.clone().detach()).swap_dims(2, 3));
        let [b, h, t, _] = q.dims();
        let s = kt.dims()[3];
        let rows = (ctx.compute.scores_limit / (b * h * s)).max(1);
        let blocks = (0..t.div_ceil(rows)).map(|i| {
            let (start, len) = (i * rows, rows.min(t - i * rows));
            let scores = q.clone().narrow(2, start, len).matmul(kt.clone()) * scale;
            let scores = scores + ctx.mask.clone().narrow(2, start, len).detach();
            scores.swap_dims(0, 1).reshape([h, b * len * s]).max_dim(1).reshape([h])
        });
        blocks.reduce(|a, b| a.max_pair(b)).expect("at least one query row")
    }

    /// The logits `q·k/√h` of raw scores `q kᵀ`, soft-capped when the recipe caps them.
    fn logits(&self, raw: Tensor<4>, scale: f64) -> Tensor<4> {
        match self.softcap {
            Some(c) => crate::model::base::softcap::softcap(raw * scale, c),
            None => raw * scale,
        }
    }

    /// `softmax(q kᵀ/√h + M) v`, `[B, H, t, h]`; the fused softmax applies a purely causal `M`
    /// without reading it.
    pub fn attend(&self, q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, ctx: &ForwardContext) -> Tensor<4> {
        let scale = self.scale();
        let t = q.dims()[2];
        let Compute { kernels: kn, precision: p, scores_limit, .. } = ctx.compute;
        // The fused kernels compute a plain softmax: a soft-capped attention, or one with sinks,
        // stays composite.
        let fusable = self.softcap.is_none() && self.sinks.is_none();
        let whole = t == k.dims()[2];
        // A GPU forward no gradient flows through: burn's flash attention (tensor cores).
        if fusable
            && ctx.causal
            && !ctx.records.collects(STATS)
            && kn != Kernels::Composite
            && whole
            && gpu_forward_only(&q)
        {
            let scale = self.sqk.as_ref().map(|_| scale);
            let causal = AttentionModuleOptions { scale, softcap: None, is_causal: true };
            return attention(p.compute(q), p.compute(k), p.compute(v), None, None, causal);
        }
        if fusable && ctx.causal && !ctx.records.collects(STATS) && kn.fuse_attention(&q) {
            return kernels::causal_attention(q, k, v, scale);
        }
        let [b, h, _, _] = q.dims();
        if !ctx.records.collects(STATS) && b * h * t * k.dims()[2] > scores_limit {
            return self.attend_rows(q, k, v, ctx, scale);
        }
        let mm = |a, b| kn.matmul(p, a, b);
        let raw = widen(mm(q, k.swap_dims(2, 3)));
        if fusable && ctx.causal && kn.fuse(&raw) {
            if ctx.records.collects(STATS) {
                ctx.records.push(STATS, attn_stats(raw.clone() * scale + ctx.mask.clone(), None));
            }
            return mm(kernels::causal_softmax(raw, scale), v);
        }
        let scores = self.logits(raw, scale) + ctx.mask.clone();
        if ctx.records.collects(STATS) {
            ctx.records.push(STATS, attn_stats(scores.clone(), self.sink_logits()));
        }
        p.matmul(softmax_with_sink(scores, self.sink_logits()), v)
    }

    /// The sink logits `b` `[H]`, when the softmax has sinks.
    fn sink_logits(&self) -> Option<Tensor<1>> {
        self.sinks.as_ref().map(Param::val)
    }

    /// The composite `softmax(q kᵀ/√h + M) v` a block of query rows at a time, each block's
    /// scores within `ctx.compute.scores_limit` values; under a purely causal mask a block meets only the
    /// keys it can see. Same formula, same gradient; memory O(limit) instead of O(t·S).
    fn attend_rows(&self, q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, ctx: &ForwardContext, scale: f64) -> Tensor<4> {
        let [b, h, t, _] = q.dims();
        let s = k.dims()[2];
        let rows = (ctx.compute.scores_limit / (b * h * s)).max(1);
        let p = ctx.compute.precision;
        let (kt, v) = (p.compute(k.swap_dims(2, 3)), p.compute(v));
        let outs = (0..t.div_ceil(rows))
            .map(|i| {
                let (start, len) = (i * rows, rows.min(t - i * rows));
                let keys = if ctx.causal { s - t + start + len } else { s };
                let raw = widen(p.matmul(q.clone().narrow(2, start, len), kt.clone().narrow(3, 0, keys)));
                let scores = self.logits(raw, scale) + ctx.mask.clone().narrow(2, start, len).narrow(3, 0, keys);
                p.matmul(softmax_with_sink(scores, self.sink_logits()), v.clone().narrow(2, 0, keys))
            })
            .collect();
        Tensor::cat(outs, 2)
    }

    /// `‖W_V W_O‖²_F` (the BHyT paper's Theorem 3.5), `[1]`; differentiable in both matrices.
    /// With grouped-query attention `W_V` is taken with each key/value head's columns repeated
    /// for its group, the value map every query head actually applies. That map is
    /// `Σ_h W_V,g(h) W_O,h = Σ_j W_V,j (Σ_{h∈j} W_O,h)`: the rows of `W_O` are summed within each
    /// group first, so the product costs `2·d·(n_kv·h)·d` FLOPs instead of `2·d³`.
    pub fn value_output_frobenius_sq(&self) -> Tensor<1> {
        let wo = self.wo.val();
        let r = self.n_heads / self.n_kv_heads;
        let wo = if r == 1 {
            wo
        } else {
            let d = wo.dims()[1];
            let grouped = wo.reshape([self.n_kv_heads, r, self.head_dim, d]).sum_dim(1);
            grouped.reshape([self.n_kv_heads * self.head_dim, d])
        };
        self.wv.val().matmul(wo).square().sum()
    }
}

/// `softmax(scores)` over the keys (last axis) of `[B, H, t, S]`; with sink logits `b` `[H]`,
/// gpt-oss's form: each row's softmax taken over its keys and `b_h` together, the sink's share
/// dropped, so a row sums to `1 − p_sink`.
pub fn softmax_with_sink(scores: Tensor<4>, sinks: Option<Tensor<1>>) -> Tensor<4> {
    let Some(b) = sinks else { return softmax(scores, 3) };
    let [n, h, t, s] = scores.dims();
    let sink = b.reshape([1, h, 1, 1]).expand([n, h, t, 1]);
    softmax(Tensor::cat(vec![scores, sink], 3), 3).narrow(3, 0, s)
}

/// Max logit (overall and per head), mean entropy and first-key mass of masked scores
/// `[B, H, T, S]` (−∞ above the diagonal), with the sink logits when the softmax has them (the
/// entropy is then that of the distribution over the keys and the sink together).
pub fn attn_stats(scores: Tensor<4>, sinks: Option<Tensor<1>>) -> AttnStats {
    let [b, h, t, s] = scores.dims();
    let per_head = scores.clone().swap_dims(0, 1).reshape([h, b * t * s]).max_dim(1).reshape([h]);
    let max_logit = per_head.clone().max().reshape([1]);
    let has_sink = sinks.is_some();
    let probs = softmax_with_sink(scores, sinks);
    // Masked entries have p = 0; clamping log p makes their p·log p exactly 0. The clamp is a
    // normal f32: the binary flushes denormals to zero, which would make it log 0 = −∞ and the
    // product NaN.
    let plogp = |p: Tensor<4>| p.clone() * p.clamp_min(1e-30).log();
    let mut entropy = -plogp(probs.clone()).sum_dim(3);
    if has_sink {
        let sink_mass = -(probs.clone().sum_dim(3) - 1.0);
        entropy = entropy - plogp(sink_mass.clamp_min(0.0));
    }
    // The first query sees only the first key: its mass 1 says nothing, so rows 2.. count.
    let from = usize::from(t > 1);
    let first_key_mass = probs.narrow(2, from, t - from).narrow(3, 0, 1).mean().reshape([1]);
    AttnStats {
        max_logit,
        head_max_logit: per_head,
        entropy: entropy.mean().reshape([1]),
        first_key_mass,
        gate_mean: None,
    }
}

/// QK L2-norm over the last axis, no gain: `x/√(mean(x²) + ε)` (unit mean square; Megatron-LM's
/// `qk_l2_norm` and Llama 4's `L2Norm`) or, for [`QkNorm::UnitL2`], `x/√(‖x‖² + ε)` (unit L2
/// norm; Transformer Engine's).
pub fn l2_normalize<const D: usize>(x: Tensor<D>, form: QkNorm, eps: f64) -> Tensor<D> {
    let square = x.clone().square();
    let stat = if form == QkNorm::UnitL2 { square.sum_dim(D - 1) } else { square.mean_dim(D - 1) };
    x / (stat + eps).sqrt()
}
