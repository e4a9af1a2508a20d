//! Causal self-attention and what a recipe does to it:
//!
//! - [`self_attention`]: the block: projections, QK-norm and V-norm, RoPE, grouped queries,
//!   output gates, sinks, soft-capped logits, value residual, and its records (softmax
//!   diagnostics, per-head logit maxima)
//! - [`qk_clip`]: QK-clip's per-head rescaling of `W_q`, `W_k` (Kimi K2)

pub mod qk_clip;
pub mod self_attention;
