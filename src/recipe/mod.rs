//! Placement recipes: which norm sits where, with which skip, residual and init scales, and
//! what the attention, the residual state, the initialisation and the two ends of the stack do.
//!
//! - [`spec`]: the data structure (what a preset is, what a config file spells), one section per
//!   concern; norm kinds are named from the one table in [`crate::norm::kinds`], residual kinds
//!   from the one table in [`residual`]
//! - [`presets`]: every named recipe as data, grouped by what it changes
//! - [`catalog`]: the one table of presets, name → spec and the facts recorded about it
//! - [`resolve`]: evaluation for a given depth, putting the concerns together and checking what
//!   spans two of them; each concern resolves in its own file:
//!   - [`sublayers`]: the placement (every sublayer's equation, per-layer overrides);
//!     [`slot`]: one norm slot; [`taper`]: TaperNorm's global gate schedule
//!   - [`attention`]: QK/V norms, soft-cap, gate, sinks, value residual, QK-clip
//!   - [`residual`]: the residual kinds: the plain sum, [`streams`] (HC, mHC, mHC-lite, attention
//!     over depth), [`hypersphere`] (nGPT)
//!   - [`init`]: standard, [`moment_control`] (DeepScaleLM), [`completep`] (CompleteP)
//!   - [`embedding`] and [`logits`]: the two ends of the stack
//! - [`expr`]: scale expressions (`1/sqrt(2*L)`, `k^-0.5`, …)
//! - [`config`]: a recipe as written in a config file (preset name, or preset + changes);
//!   [`flat_form`]: the single-table form of earlier configs, translated; [`locate`]: the path
//!   of a refused value
//! - [`equation`]: the printed sublayer equations; [`equation_streams`]: those of a recipe with
//!   n residual streams
//! - [`placement`]: which of the papers' canonical placements a resolved recipe is
//! - [`after_step`]: what a recipe does to the weights after every optimizer step
//! - [`theorem`]: the BHyT paper's Theorem 3.6 condition

pub mod after_step;
pub mod attention;
pub mod catalog;
pub mod completep;
pub mod config;
pub mod embedding;
pub mod equation;
pub mod equation_streams;
pub mod expr;
pub mod flat_form;
pub mod hypersphere;
pub mod init;
pub mod locate;
pub mod logits;
pub mod moment_control;
pub mod placement;
pub mod presets;
pub mod residual;
pub mod resolve;
pub mod slot;
pub mod spec;
pub mod streams;
pub mod sublayers;
pub mod taper;
pub mod theorem;

pub use after_step::AfterStep;
pub use attention::{Attention, MAX_SOFTCAP};
pub use catalog::{PRESET_NAMES, preset, preset_notes};
pub use completep::CompleteP;
pub use config::{RecipeConfig, RecipeOverlay};
pub use embedding::Embedding;
pub use hypersphere::{Hypersphere, Scaled};
pub use init::InitScheme;
pub use logits::Logits;
pub use moment_control::MomentControl;
pub use placement::Placement;
pub use residual::Residual;
pub use resolve::{MAX_LAYERS, MAX_WIDTH, ResolvedRecipe, norm_kind, resolve};
pub use spec::{
    AttentionSpec, AttnGate, BaseNorm, EmbeddingSpec, GateOn, GateOwner, GateShape, GateSpec, HypersphereSpec,
    InitSpec, LogitsSpec, MomentControlSpec, NormName, NormSpec, NormTable, PlacementSpec, QkClip, QkNorm, RecipeSpec,
    ResidualSpec, Scale, SublayerSpec, SumSpec, VNorm, Which, X0Mix,
};
pub use spec::{AttnResSpec, CompletePSpec, HcSpec, MhcLiteSpec, MhcSpec, TaperSpec};
pub use streams::{AttnRes, Mixing, Streams};
pub use sublayers::{Branch, Dims, Gate, SublayerPlan};
pub use taper::{Taper, TaperSteps};
pub use theorem::theorem_3_6_warning;

#[cfg(test)]
mod tests;
