//! Normalization layers.
//!
//! Each kind lives in its own file as a *functional* forward (plain tensor in, tensor out) so
//! that the math can be read next to its paper formula and tested in f64 with finite
//! differences. [`Norm`] is the module that owns the learnable parameters, one variant per
//! kind holding exactly that kind's parameters; [`NormKind`] is the resolved, validated
//! description a recipe produces.
//!
//! | kind | formula | parameters |
//! |---|---|---|
//! | LayerNorm | `γ ⊙ (x − μ)/√(σ² + ε) + β` | `γ, β ∈ ℝ^d` (β optional) |
//! | RMSNorm | `γ ⊙ x/√(mean(x²) + ε)` | `γ ∈ ℝ^d` |
//! | scalarised LayerNorm (KiteNorm eq. 4) | `γ′ (x − μ)/√(σ² + ε) + β′` | `γ′, β′ ∈ ℝ` |
//! | scalarised RMSNorm | `γ′ x/√(mean(x²) + ε)` | `γ′ ∈ ℝ` |
//! | DyT | `γ ⊙ tanh(α x) + β` | `α ∈ ℝ`, `γ, β ∈ ℝ^d` |
//! | BHyT* (the BHyT paper's eq. 1) | `γ ⊙ tanh(λ x / (κ s_x + |μ_x|))` | `λ ∈ ℝ`, `γ ∈ ℝ^d` |
//! | BHyT (the BHyT paper's Alg. 1) | as BHyT*; a block's second norm uses an approximated variance | `λ ∈ ℝ`, `γ ∈ ℝ^d` |
//! | LayerNorm-1p (Megatron-LM) | `(1 + γ) ⊙ (x − μ)/√(σ² + ε) + β`, γ stored zero-centred | `γ, β ∈ ℝ^d` |
//! | zero-centred RMSNorm (Qwen3-Next) | `(1 + γ) ⊙ x/√(mean(x²) + ε)`, γ stored zero-centred, decayed | `γ ∈ ℝ^d` |
//! | Derf ("Stronger Normalization-Free Transformers") | `γ ⊙ erf(α x + s) + β` | `α, s ∈ ℝ`, `γ, β ∈ ℝ^d` |
//! | L2 (nGPT's `justnorm`) | `x/‖x‖` | none |
//! | SeeDNorm | `[tanh(x·βᵀ)·α + γ] ⊙ x/√(mean(x²) + ε)` | `γ, α, β ∈ ℝ^d` |
//! | TaperNorm | `g · γ ⊙ x/√(mean(x²) + ε) + (1 − g) · c · γ̃ ⊙ x` | `γ, γ̃ ∈ ℝ^d`; buffers `g`, `c` |
//!
//! - [`kinds`]: the one table of kinds (names, formulas, options, how options build a kind)
//! - [`kind`]: [`NormKind`], a slot's resolved description
//! - [`module`]: [`Norm`], the module, one variant per kind
//! - [`layer_norm`], [`rms_norm`], [`dyt`], [`bhyt`], [`derf`], [`seednorm`], [`taper`]: each kind's
//!   functional forward and its parameters
//! - [`param`]: reading a slot's parameters (optional values, broadcasting)

mod bhyt;
mod derf;
mod dyt;
mod kind;
pub mod kinds;
mod layer_norm;
mod module;
mod param;
mod rms_norm;
mod seednorm;
mod taper;

pub use bhyt::{Bhyt, bhyt_rms_denominator, bhyt_star, bhyt_std_denominator, bhyt_with_variance, kappa};
pub use derf::{Derf, derf};
pub use dyt::{Dyt, dyt};
pub use kind::{BhytDenominator, NormKind};
pub use kinds::{KINDS, KindInfo, NormOption, SlotOptions};
pub use layer_norm::{LayerNorm, layer_norm};
pub use module::{Norm, input_norm, maybe_norm};
use param::{broadcast, value};
pub use rms_norm::{CENTRED_GAIN, RmsNorm, ZeroCentredRmsNorm, rms_norm, rms_with_variance};
pub use seednorm::{SeeDNorm, seednorm};
pub use taper::{TAPER_BUFFERS, TaperNorm};

#[cfg(test)]
mod tests;
