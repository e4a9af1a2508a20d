//! File formats.

pub mod tensors;
