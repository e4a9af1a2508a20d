//! Causal multi-head self-attention with RoPE, no biases, optional QK-norm: RMSNorm of queries
//! and keys per head over `d_head` (Qwen3) or over the full width before the head split
//! (OLMo 2), in both cases before RoPE.
//!
//! `softmax(q kᵀ/√h + M) v` written out with matmul, an additive causal mask and softmax,
//! not burn's fused attention op, so the gradient is plain autodiff (checked against PyTorch).

use super::linear::project;
use super::names::child;
use super::rope;
use crate::init::{Init, ParamBuilder};
use crate::norm::{Norm, NormKind};
use crate::recipe::QkNorm;
use burn::module::{Module, Param};
use burn::tensor::activation::softmax;
use burn::tensor::{Tensor, TensorData};

/// Per-forward constants shared by all attention sublayers.
pub struct AttnContext {
    pub cos: Tensor<4>,
    pub sin: Tensor<4>,
    /// Additive causal mask `[1, 1, T, T]`: 0 on and below the diagonal, −∞ above.
    pub mask: Tensor<4>,
    /// When set (probing), each attention sublayer appends its [`AttnStats`] here.
    pub stats: Option<std::cell::RefCell<Vec<AttnStats>>>,
}

/// Softmax-saturation diagnostics of one attention sublayer (seed 002's troubleshooting):
/// the largest pre-softmax logit `q·k/√h` over all heads and positions, and the mean entropy
/// (nats) of the attention distributions over batch, heads and query positions.
#[derive(Clone, Debug)]
pub struct AttnStats {
    pub max_logit: Tensor<1>,
    pub entropy: Tensor<1>,
}

impl AttnContext {
    pub fn new(seq_len: usize, head_dim: usize, rope_base: f64, device: &burn::tensor::Device) -> Self {
        let (cos, sin) = rope::tables(seq_len, head_dim, rope_base, device);
        let mut m = vec![0f32; seq_len * seq_len];
        for i in 0..seq_len {
            for j in i + 1..seq_len {
                m[i * seq_len + j] = f32::NEG_INFINITY;
            }
        }
        let mask = Tensor::from_data(TensorData::new(m, vec![1, 1, seq_len, seq_len]), device);
        Self { cos, sin, mask, stats: None }
    }
}

#[derive(Module, Debug)]
pub struct Attention {
    pub wq: Param<Tensor<2>>,
    pub wk: Param<Tensor<2>>,
    pub wv: Param<Tensor<2>>,
    pub wo: Param<Tensor<2>>,
    pub q_norm: Option<Norm>,
    pub k_norm: Option<Norm>,
    pub n_heads: usize,
    /// QK-norm over the full width (before the head split) rather than per head.
    #[module(skip)]
    pub qk_full: bool,
}

/// Sizes and init scales for one attention block.
pub struct AttnShape {
    pub d_model: usize,
    pub n_heads: usize,
    pub std: f64,
    /// Multiplies the std of `W_V` (DeepNet's β).
    pub init_in: f64,
    /// Multiplies the std of `W_O` (GPT-2's 1/√(2L), DeepNet's β).
    pub init_out: f64,
    /// Where QK-norm applies (never [`QkNorm::None`] here) and its ε; `None` without QK-norm.
    pub qk_norm: Option<(QkNorm, f64)>,
}

impl Attention {
    pub fn new(s: &AttnShape, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let d = s.d_model;
        let normal = |scale: f64| Init::Normal { std: s.std * scale };
        let head_dim = d / s.n_heads;
        let qk = |b: &mut ParamBuilder<'_>, name: &str| -> anyhow::Result<Option<Norm>> {
            let Some((place, eps)) = s.qk_norm else { return Ok(None) };
            let width = if place == QkNorm::Full { d } else { head_dim };
            Ok(Some(Norm::new(NormKind::RmsNorm { gain: true, eps }, width, b, &child(prefix, name))?))
        };
        Ok(Self {
            wq: b.matrix(&child(prefix, "wq"), [d, d], normal(1.0))?,
            wk: b.matrix(&child(prefix, "wk"), [d, d], normal(1.0))?,
            wv: b.matrix(&child(prefix, "wv"), [d, d], normal(s.init_in))?,
            wo: b.matrix(&child(prefix, "wo"), [d, d], normal(s.init_out))?,
            q_norm: qk(b, "q_norm")?,
            k_norm: qk(b, "k_norm")?,
            n_heads: s.n_heads,
            qk_full: matches!(s.qk_norm, Some((QkNorm::Full, _))),
        })
    }

    /// `[B, T, d]` → `[B, H, T, h]`.
    fn heads(&self, x: Tensor<3>) -> Tensor<4> {
        let [b, t, d] = x.dims();
        x.reshape([b, t, self.n_heads, d / self.n_heads]).swap_dims(1, 2)
    }

    /// `x`: `[B, T, d]` → `[B, T, d]`.
    pub fn forward(&self, x: Tensor<3>, ctx: &AttnContext) -> Tensor<3> {
        let [b, t, d] = x.dims();
        let head_dim = d / self.n_heads;
        let (mut q, mut k) = (project(x.clone(), &self.wq), project(x.clone(), &self.wk));
        let v = self.heads(project(x, &self.wv));
        let qk_norms = self.q_norm.as_ref().zip(self.k_norm.as_ref());
        if let (Some((qn, kn)), true) = (qk_norms, self.qk_full) {
            (q, k) = (qn.forward(q), kn.forward(k));
        }
        let (mut q, mut k) = (self.heads(q), self.heads(k));
        if let (Some((qn, kn)), false) = (qk_norms, self.qk_full) {
            (q, k) = (qn.forward(q), kn.forward(k));
        }
        let q = rope::apply(q, &ctx.cos, &ctx.sin);
        let k = rope::apply(k, &ctx.cos, &ctx.sin);
        let scores = q.matmul(k.swap_dims(2, 3)) * (1.0 / (head_dim as f64).sqrt()) + ctx.mask.clone();
        if let Some(stats) = &ctx.stats {
            stats.borrow_mut().push(attn_stats(scores.clone()));
        }
        let out = softmax(scores, 3).matmul(v);
        project(out.swap_dims(1, 2).reshape([b, t, d]), &self.wo)
    }

    /// `‖W_V W_O‖²_F` (seed 003 Theorem 3.5), `[1]`; differentiable in both matrices.
    pub fn value_output_frobenius_sq(&self) -> Tensor<1> {
        self.wv.val().matmul(self.wo.val()).square().sum()
    }
}

/// Max logit and mean entropy of masked scores `[B, H, T, T]` (−∞ above the diagonal).
pub fn attn_stats(scores: Tensor<4>) -> AttnStats {
    let max_logit = scores.clone().max().reshape([1]);
    let logp = burn::tensor::activation::log_softmax(scores, 3);
    // Masked entries have p = 0 and log p = −∞; clamping log p makes their p·log p exactly 0.
    let plogp = logp.clone().exp() * logp.clamp_min(-1e30);
    let entropy = -plogp.sum_dim(3).mean().reshape([1]);
    AttnStats { max_logit, entropy }
}
