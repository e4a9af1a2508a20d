//! The initialisation concern of a recipe: how the weights are drawn and parametrised with
//! depth, beyond the per-sublayer `init_out`/`init_in` multipliers of the placement.
//!
//! ```text
//! standard         every weight N(0, init_std²), times the sublayer's init scales
//! moment-control   DeepScaleLM: each weight at the std that conserves unit output moments
//! completep        CompleteP (α = 1): branches × (L/L_base)^{-1}, the layers' AdamW ε likewise
//! ```

use super::completep::{self, CompleteP, CompletePSpec};
use super::moment_control::{self, MomentControl, MomentControlSpec};
use serde::{Deserialize, Serialize};

/// `[recipe.init]` as a recipe writes it: one kind, with only its own settings.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum InitSpec {
    /// The standard parametrisation.
    #[default]
    Standard,
    /// DeepScaleLM's moment-control initialisation (see [`MomentControlSpec`]).
    MomentControl(MomentControlSpec),
    /// CompleteP's depth parametrisation (see [`CompletePSpec`]).
    Completep(CompletePSpec),
}

/// The initialisation resolved for a depth.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum InitScheme {
    #[default]
    Standard,
    MomentControl(MomentControl),
    /// CompleteP's multiplier (the sublayers' `residual` already include its `m^{-1}`).
    CompleteP(CompleteP),
}

/// Resolves `spec` for a model of `n_layers` Transformer layers.
pub fn resolve(spec: &InitSpec, n_layers: usize) -> anyhow::Result<InitScheme> {
    Ok(match spec {
        InitSpec::Standard => InitScheme::Standard,
        InitSpec::MomentControl(m) => InitScheme::MomentControl(moment_control::resolve(m)?),
        InitSpec::Completep(c) => InitScheme::CompleteP(completep::resolve(c, n_layers)?),
    })
}

impl InitScheme {
    /// The kind as a recipe writes it (`init.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            InitScheme::Standard => "standard",
            InitScheme::MomentControl(_) => "moment-control",
            InitScheme::CompleteP(_) => "completep",
        }
    }

    pub fn moment_control(&self) -> Option<MomentControl> {
        match self {
            InitScheme::MomentControl(m) => Some(*m),
            _ => None,
        }
    }

    pub fn completep(&self) -> Option<CompleteP> {
        match self {
            InitScheme::CompleteP(c) => Some(*c),
            _ => None,
        }
    }
}
