//! The decoder-only Transformer.
//!
//! - [`config`]: model size and options
//! - [`init`]: seeded initialisation / loading by name
//! - [`linear`]: bias-free projection
//! - [`rope`]: rotary position embeddings
//! - [`attention`]: causal multi-head self-attention (RoPE, optional QK-norm)
//! - [`ffn`]: GLU (SiLU gate) and GELU MLP
//! - [`sublayer`]: the generic sublayer equation every recipe instantiates
//! - [`transformer`]: embedding → 2L sublayers → final norm → logits
//! - [`params`]: parameters by name (checkpoints, fixtures, gradient tests)
//! - [`regularizer`]: KiteNorm's variance regulariser (seed 000 eq. 24)

pub mod attention;
pub mod config;
pub mod ffn;
pub mod init;
pub mod linear;
pub mod params;
pub mod regularizer;
pub mod rope;
pub mod sublayer;
pub mod transformer;

pub use config::{FfnKind, ModelConfig};
pub use transformer::{ForwardOutput, SublayerTrace, Transformer};

#[cfg(test)]
mod tests;
