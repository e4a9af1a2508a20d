//! normlab: train decoder-only Transformers with any normalization scheme, and see layer by
//! layer why it trains stably or not.
//!
//! - [`norm`]: normalization layers (LayerNorm, RMSNorm, scalarised LN, DyT, BHyT*, BHyT)
//! - [`recipe`]: placements — which norm sits where, with which scales (every preset in
//!   [`recipe::presets`])
//! - [`model`]: the decoder-only Transformer
//! - [`device`]: backend selection

pub mod bench;
pub mod data;
pub mod device;
pub mod io;
pub mod model;
pub mod norm;
pub mod probe;
pub mod recipe;
pub mod report;
pub mod sweep;
pub mod train;

#[cfg(test)]
pub(crate) mod testutil;
