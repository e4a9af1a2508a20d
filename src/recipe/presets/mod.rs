//! Every named recipe, as data, grouped by what it changes; [`super::catalog`] names them.
//!
//! - [`parts`]: the blank recipe and the parts presets are built from
//! - [`placement`]: where the norms go (KiteNorm Table 2's baselines, Peri-LN, OLMo 2, …)
//! - [`norm_functions`]: another norm function in the same places (DyT, BHyT, Derf, SeeDNorm)
//! - [`residual`]: the residual update scaled, gated or reshaped (DeepNorm, ReZero, Admin, nGPT, …)
//! - [`logits`]: attention and output logits bounded (soft-caps, QK L2-norm, QK-clip)
//! - [`attention`]: controls inside attention (gated attention, attention sinks)

pub mod attention;
pub mod logits;
pub mod norm_functions;
pub mod parts;
pub mod placement;
pub mod residual;
