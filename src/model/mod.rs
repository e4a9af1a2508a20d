//! The decoder-only Transformer.
//!
//! - [`config`]: model size and options
//! - [`compute`]: the run-wide settings a forward reads (kernels, precision, memory limits)
//! - [`context`]: one forward's context: positions, masks, compute, what passes between layers, records
//! - [`records`]: what a forward collects beside its output, by kind
//! - [`terms`]: a training forward's loss terms and readings, by name, and a step's combined readings
//! - [`names`]: the parameter naming scheme
//! - [`linear`]: bias-free projection
//! - [`lora`]: LoRA adapters on the projections (`[model.lora]`), the base frozen
//! - [`rope`]: rotary position embeddings
//! - [`attention`]: causal multi-head self-attention (RoPE, optional QK-norm)
//! - [`ffn`]: GLU (SiLU gate) and GELU MLP; [`ffn_kinds`]: the one table of feed-forward kinds
//! - [`ffn_block`]: a layer's feed-forward function, dense or a mixture of experts
//! - [`moe`]: the mixture-of-experts block (routed and shared experts, dropless dispatch)
//! - [`moe_config`]: `[model.moe]`, its sizes, router and balancing coefficients
//! - [`moe_router`]: the one table of router kinds and their routing
//! - [`moe_balance`]: the load-balancing loss, the router z-loss and the aux-loss-free bias update
//! - [`sublayer`]: the generic sublayer equation every recipe instantiates
//! - [`layer`]: attention sublayer then FFN sublayer
//! - [`bhyt`]: BHyT's approximated FFN-input statistic (one statistic per block)
//! - [`moment_control`]: DeepScaleLM's moment-conserving initialisation
//! - [`transformer`]: embedding → 2L sublayers → final norm → logits
//! - [`chunked_loss`]: output projection + cross-entropy over chunks of tokens (no whole logits)
//! - [`decode`]: the KV cache for incremental decoding, with left padding
//! - [`params`]: parameters by name (checkpoints, fixtures, gradient tests)
//! - [`regularizer`]: KiteNorm's variance regulariser (KiteNorm eq. 24)
//! - [`softcap`]: soft-capping `c·tanh(x/c)` of attention and output logits (Gemma 2)
//! - [`gpas`]: GPAS, the forward-only scaling of the stream after each residual addition
//! - [`normalized_step`]: nGPT's normalized update, the rule that replaces the residual step
//! - [`hypersphere`]: nGPT's projection of the weights onto the unit sphere
//! - [`qk_clip`]: QK-clip's per-head rescaling of `W_q`, `W_k` (Kimi K2)
//! - [`after_step`]: the after-step hooks (QK-clip, nGPT's projection, TaperNorm's schedule, MoE bias balancing) applied in order
//! - [`hook`]: one after-step hook, the recipe's or the MoE bias balancing
//! - [`taper`]: TaperNorm's schedule on the model's `tapernorm` slots
//! - [`profile`]: Admin's profiling pass, setting the skip gates before step 1
//! - [`streams`]: a residual state of n streams and its mixing (Hyper-Connections, mHC, mHC-lite)
//! - [`stream_forward`]: the forward through the layers when the state is n streams
//! - [`depth_attention`]: Attention Residuals, sublayers reading softmax-weighted earlier outputs
//! - [`depth_forward`]: the forward through the layers when sublayers read over depth

pub mod after_step;
pub mod attention;
pub mod bhyt;
pub mod chunked_loss;
pub mod compute;
pub mod config;
pub mod context;
pub mod decode;
pub mod depth_attention;
pub mod depth_forward;
pub mod ffn;
pub mod ffn_block;
pub mod ffn_kinds;
pub mod gpas;
pub mod hook;
pub mod hypersphere;
pub mod layer;
pub mod linear;
pub mod lora;
pub mod moe;
pub mod moe_balance;
pub mod moe_config;
pub mod moe_router;
pub mod moment_control;
pub mod names;
pub mod normalized_step;
pub mod params;
pub mod profile;
pub mod qk_clip;
pub mod records;
pub mod regularizer;
pub mod rope;
pub mod softcap;
pub mod stream_forward;
pub mod streams;
pub mod sublayer;
pub mod taper;
pub mod terms;
pub mod transformer;

pub use compute::{Compute, GPU_LIMIT, LOGITS_LIMIT, SCORES_LIMIT};
pub use config::{FfnKind, ModelConfig};
pub use decode::KvCache;
pub use transformer::{ForwardOutput, Keep, SublayerTrace, Traced, Transformer};

#[cfg(test)]
mod attention_control_tests;
#[cfg(test)]
mod moe_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
