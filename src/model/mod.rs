//! The decoder-only Transformer, in rooms by concern. Each room imports only the rooms below it
//! (`tests/architecture.rs` checks it against the model's rooms table in `docs/architecture.md`):
//!
//! - [`base`]: what every part reads: the forward's context, records and loss terms, the run's
//!   compute settings, parameter names, projections and LoRA, RoPE, soft-capping
//! - [`attention`]: causal self-attention with its norms, gates, sinks, soft-cap and QK-clip
//! - [`ffn`]: the feed-forward kinds and the dense block; [`ffn::moe`]: the mixture of experts
//! - [`residual`]: what a residual scheme adds to the plain sum: streams, attention over depth,
//!   nGPT's normalized step and sphere, GPAS
//!
//! and at the top, the model that puts them together:
//!
//! - [`model_config`]: model size and options
//! - [`transformer`]: embedding → 2L sublayers → final norm → logits
//! - [`layer`]: attention sublayer then FFN sublayer
//! - [`sublayer`]: the generic sublayer equation every recipe instantiates
//! - [`ffn_block`]: a layer's feed-forward function, dense or a mixture of experts
//! - [`bhyt`]: BHyT's approximated FFN-input statistic (one statistic per block)
//! - [`stream_forward`]: the forward through the layers when the state is n streams
//! - [`depth_forward`]: the forward through the layers when sublayers read over depth
//! - [`moment_sigmas`]: DeepScaleLM's moment-conserving initialisation
//! - [`chunked_loss`]: output projection + cross-entropy over chunks of tokens (no whole logits)
//! - [`regularizer`]: KiteNorm's variance regulariser (KiteNorm eq. 24)
//! - [`decode`]: the KV cache for incremental decoding, with left padding
//! - [`hook`]: one after-step hook, the recipe's or the MoE bias balancing
//! - [`hooks`]: the after-step hooks (QK-clip, nGPT's projection, TaperNorm's schedule, MoE bias balancing) applied in order
//! - [`taper_schedule`]: TaperNorm's schedule on the model's `tapernorm` slots
//! - [`profile`]: Admin's profiling pass, setting the skip gates before step 1

pub mod attention;
pub mod base;
pub mod bhyt;
pub mod chunked_loss;
pub mod decode;
pub mod depth_forward;
pub mod ffn;
pub mod ffn_block;
pub mod hook;
pub mod hooks;
pub mod layer;
pub mod model_config;
pub mod moment_sigmas;
pub mod profile;
pub mod regularizer;
pub mod residual;
pub mod stream_forward;
pub mod sublayer;
pub mod taper_schedule;
pub mod transformer;

pub use base::compute::{Compute, GPU_LIMIT, LOGITS_LIMIT, SCORES_LIMIT};
pub use decode::KvCache;
pub use model_config::{FfnKind, ModelConfig};
pub use transformer::{ForwardOutput, Keep, SublayerTrace, Traced, Transformer};

#[cfg(test)]
mod attention_control_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
