//! What a residual scheme adds to the plain sum `a·X + c·branch` (the sum and its gates are the
//! sublayer's own step, [`crate::model::sublayer`]):
//!
//! - [`stream_mix`]: a residual state of n streams and its mixing (Hyper-Connections, mHC, mHC-lite)
//! - [`depth_attention`]: Attention Residuals, sublayers reading softmax-weighted earlier outputs
//! - [`normalized_step`]: nGPT's normalized update, the rule that replaces the residual step
//! - [`unit_sphere`]: nGPT's projection of the weights onto the unit sphere
//! - [`gpas`]: GPAS, the forward-only scaling of the stream after each residual addition

pub mod depth_attention;
pub mod gpas;
pub mod normalized_step;
pub mod stream_mix;
pub mod unit_sphere;
