//! Placement recipes: which norm sits where, with which skip, residual and init scales.
//!
//! - [`spec`]: the data structure (what a preset is, what a config file spells)
//! - [`presets`]: every named recipe (post, pre, gpt2-pre, lns, peri, mix, keel, kitenorm and
//!   ablations, dyt, bhyt-star, bhyt, olmo2, deepnorm)
//! - [`resolve`]: evaluation for a given depth, with validation
//! - [`config`]: a recipe as written in a config file (preset name, or preset + overrides)
//! - [`equation`]: the printed sublayer equations

pub mod catalog;
pub mod config;
pub mod equation;
pub mod expr;
pub mod hypersphere;
pub mod moment_control;
pub mod placement;
pub mod presets;
pub mod resolve;
pub mod spec;
pub mod theorem;

pub use catalog::{PRESET_NAMES, preset};
pub use config::{RecipeConfig, RecipeOverlay};
pub use hypersphere::{Hypersphere, Scaled};
pub use moment_control::MomentControl;
pub use placement::Placement;
pub use resolve::{Branch, Dims, Gate, MAX_LAYERS, MAX_WIDTH, ResolvedRecipe, SublayerPlan, norm_kind, resolve};
pub use spec::{
    BaseNorm, GateOn, GateOwner, GateShape, GateSpec, HypersphereSpec, MomentControlSpec, NormName, NormSpec,
    NormTable, QkClip, QkNorm, RecipeSpec, Scale, SublayerSpec, Which, X0Mix,
};
pub use theorem::theorem_3_6_warning;

#[cfg(test)]
mod tests;
