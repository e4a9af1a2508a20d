//! The feed-forward function of a sublayer:
//!
//! - [`kinds`]: the one table of feed-forward kinds (GLU variants, GELU and ReLU² MLPs)
//! - [`dense`]: the dense block every token passes through
//! - [`moe`]: the mixture of experts, each expert a dense block of the same kind

pub mod dense;
pub mod kinds;
pub mod moe;
