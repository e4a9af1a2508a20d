//! Presets whose stability control sits inside attention, on RMSNorm pre-norm: Qwen's gated
//! attention (a sigmoid gate on each head's output), gpt-oss's learned attention sinks (a
//! per-head logit in the softmax denominator) and ResFormer's value residual (the first layer's
//! values mixed into every later layer's). Both give a head a way to attend to nothing
//! other than parking its mass on the first token, the attention sink the Peri-LN paper ties to
//! massive activations. Notation as in [`super::placement`].

use super::placement::pre_rms;
use crate::recipe::spec::{AttnGate, RecipeSpec};

/// Gated attention ("Gated Attention for Large Language Models: Non-linearity, Sparsity, and
/// Attention-Sink-Free", Qiu et al., NeurIPS 2025), its best variant: position G1 (after SDPA,
/// before `W_O`), elementwise, head-specific, sigmoid, multiplicative; `W_θ` drawn like `W_Q`
/// (the authors' code widens `q_proj`). On RMSNorm pre-norm without QK-norm, so that the gate
/// is the only difference from `pre-rms` (the paper's Qwen3 baselines add `qk_norm = "head"`).
pub fn gated_attn() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "gated-attn".into();
    r.about = "RMSNorm pre-norm with gated attention: each head's output × σ(RMS(X) W_θ), elementwise, before W_O \
        (Qwen, NeurIPS 2025; Qwen3-Next)"
        .into();
    r.attention.gate = AttnGate::Elementwise;
    r
}

/// Learned attention sinks (gpt-oss; HF transformers' `GptOssAttention`): each head's softmax
/// over its keys and one learnable logit `b_h`, whose share is dropped, so that a row may sum
/// to less than 1. `b_h` drawn N(0, σ²) as HF's `_init_weights`. On RMSNorm pre-norm.
pub fn attn_sink() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "attn-sink".into();
    r.about = "RMSNorm pre-norm with learned attention sinks: softmax over the keys and one learnable logit per head, \
        whose share is dropped (gpt-oss)"
        .into();
    r.attention.sink = true;
    r
}

/// Value residual learning (Zhou et al., "Value Residual Learning For Alleviating Attention
/// Concentration In Transformers"): every attention sublayer after the first adds the first
/// layer's values to its own, `v ← λ₁·v + λ₂·v₁`, with ResFormer's 0.5 and 0.5 as the initial
/// values of learnable λ's. On RMSNorm pre-norm.
pub fn value_residual() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "value-residual".into();
    r.about = "RMSNorm pre-norm with value residual learning: layer k ≥ 2's values v ← λ₁·v + λ₂·v₁ (layer 1's), λ \
        learnable from 0.5, 0.5 (ResFormer)"
        .into();
    r.attention.value_residual = true;
    r
}
