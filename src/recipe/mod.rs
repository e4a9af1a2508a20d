//! Placement recipes: which norm sits where, with which skip, residual and init scales.
//!
//! - [`spec`]: the data structure (what a preset is, what a config file spells); norm kinds are
//!   named from the one table in [`crate::norm::kinds`]
//! - [`presets`]: every named recipe as data, grouped by what it changes
//! - [`catalog`]: the one table of presets, name → spec
//! - [`resolve`]: evaluation for a given depth, with validation
//! - [`expr`]: scale expressions (`1/sqrt(2*L)`, `k^-0.5`, …)
//! - [`config`]: a recipe as written in a config file (preset name, or preset + overrides)
//! - [`equation`]: the printed sublayer equations; [`equation_streams`]: those of a recipe with
//!   n residual streams
//! - [`placement`]: which of the papers' canonical placements a resolved recipe is
//! - [`completep`]: CompleteP's depth parametrisation
//! - [`hypersphere`]: nGPT's factors; [`moment_control`]: DeepScaleLM's initialisation option
//! - [`after_step`]: what a recipe does to the weights after every optimizer step
//! - [`taper`]: TaperNorm's global gate schedule
//! - [`theorem`]: the BHyT paper's Theorem 3.6 condition
//! - [`streams`]: a residual state of n streams (Hyper-Connections, mHC, mHC-lite) or attended
//!   over depth (Attention Residuals) resolved

pub mod after_step;
pub mod catalog;
pub mod completep;
pub mod config;
pub mod equation;
pub mod equation_streams;
pub mod expr;
pub mod hypersphere;
pub mod moment_control;
pub mod placement;
pub mod presets;
pub mod resolve;
pub mod spec;
pub mod streams;
pub mod taper;
pub mod theorem;

pub use after_step::AfterStep;
pub use catalog::{PRESET_NAMES, preset};
pub use completep::CompleteP;
pub use config::{RecipeConfig, RecipeOverlay};
pub use hypersphere::{Hypersphere, Scaled};
pub use moment_control::MomentControl;
pub use placement::Placement;
pub use resolve::{Branch, Dims, Gate, MAX_LAYERS, MAX_WIDTH, ResolvedRecipe, SublayerPlan, norm_kind, resolve};
pub use spec::{
    AttnGate, BaseNorm, GateOn, GateOwner, GateShape, GateSpec, HypersphereSpec, MomentControlSpec, NormName, NormSpec,
    NormTable, QkClip, QkNorm, RecipeSpec, Scale, SublayerSpec, Which, X0Mix,
};
pub use spec::{AttnResSpec, CompletePSpec, StreamMixing, StreamsSpec, TaperSpec};
pub use streams::{AttnRes, Mixing, Streams};
pub use taper::{Taper, TaperSteps};
pub use theorem::theorem_3_6_warning;

#[cfg(test)]
mod tests;
