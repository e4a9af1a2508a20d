//! The recipe as data: what a preset is and what a user writes in a config file, one section
//! per concern of the model.
//!
//! The heart is the placement: every sublayer `l` (attention or FFN, `l = 1..2L`, Transformer
//! layer `k = ⌈l/2⌉`) computes
//!
//! ```text
//! z_l     = a · X_l + c · N_out( F_l( s · N_in(X_l) ) )
//! X_{l+1} = N_outer(z_l)
//! ```
//!
//! with `N_in`, `N_out`, `N_outer` norm slots (or none), `a` the skip scale, `c` the residual
//! scale and `s` the input scale (LayerNorm-Scaling's `k^{-1/2}`). Initialisation scales
//! multiply the N(0, 0.02²) std of the branch's output projection (`init_out`: attention `W_O`,
//! FFN `W_2`) and of its value / FFN input projections (`init_in`: `W_V`, `W_1`, `W_3`; DeepNet).
//! `X_1` is the (optionally normalised) token embedding ([`EmbeddingSpec`]) and the logits read
//! `N_final(X_{2L+1})` ([`LogitsSpec`]). What `F_l` is for attention ([`AttentionSpec`]), what
//! the state between sublayers is ([`ResidualSpec`]) and how weights are drawn ([`InitSpec`])
//! are sections of their own.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use super::attention::{AttentionSpec, AttnGate, QkClip, QkNorm, VNorm};
pub use super::completep::CompletePSpec;
pub use super::embedding::EmbeddingSpec;
pub use super::expr::Scale;
pub use super::hypersphere::{HypersphereSpec, ScaledSpec};
pub use super::init::InitSpec;
pub use super::logits::LogitsSpec;
pub use super::moment_control::MomentControlSpec;
pub use super::residual::{ResidualSpec, SumSpec, X0Mix};
pub use super::slot::{BaseNorm, NormName, NormSpec, NormTable};
pub use super::streams::{AttnResSpec, HcSpec, MhcLiteSpec, MhcSpec};
pub use super::taper::TaperSpec;

/// A complete recipe. Presets are values of this type ([`super::presets`]); a config file
/// writes one as changes to a preset ([`super::config`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeSpec {
    pub name: String,
    /// One line: what it is and where it comes from.
    pub about: String,
    /// Which norm sits where, with which scales: the sublayer equation's slots for every
    /// sublayer and per-layer overrides.
    #[serde(default)]
    pub placement: PlacementSpec,
    /// QK/V norms, soft-cap, gate, sinks, value residual, QK-clip.
    #[serde(default)]
    pub attention: AttentionSpec,
    /// The residual state and its update: the plain sum (with x0 mixing, GPAS), residual
    /// streams, attention over depth or nGPT's hypersphere.
    #[serde(default)]
    pub residual: ResidualSpec,
    /// Moment control or CompleteP; the standard parametrisation by default.
    #[serde(default)]
    pub init: InitSpec,
    /// Embedding scale, multiplier and norm.
    #[serde(default)]
    pub embedding: EmbeddingSpec,
    /// Final norm, final soft-cap and KiteNorm's regulariser.
    #[serde(default)]
    pub logits: LogitsSpec,
}

/// `[recipe.placement]`: the base norm, the sublayer equation of every sublayer, the per-layer
/// overrides and the constants their expressions use.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    /// What `"ln"` slots are (default LayerNorm, as in KiteNorm; Peri-LN used RMSNorm), and
    /// what `"scalar-ln"` slots are: scalarised LayerNorm, or scalarised RMSNorm under
    /// `"rmsnorm"`.
    #[serde(default)]
    pub norm: BaseNorm,
    /// Named constants usable in scale expressions (e.g. `mix_ratio`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, f64>,
    /// Applies to every sublayer.
    #[serde(default)]
    pub sublayer: SublayerSpec,
    /// Per-layer overrides, applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<SublayerSpec>,
    /// The schedule of the `tapernorm` slots' global gate (see [`TaperSpec`]); its defaults
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taper: Option<TaperSpec>,
}

/// Which sublayers of the selected Transformer layers an override applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    #[default]
    Both,
    Attn,
    Ffn,
}

/// The sublayer equation's parts. In [`PlacementSpec::sublayer`] unset fields take the defaults
/// (no norms, all scales 1); in [`PlacementSpec::layers`] an entry overrides only what it sets,
/// for the Transformer layers in `range` and the sublayers in `sublayers`.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SublayerSpec {
    /// Override entries only: Transformer layers `a..=b`, `a..b` or `a` (1-based; bounds are
    /// expressions, e.g. `"1..=floor(mix_ratio*L)"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// Override entries only: `"both"` (default), `"attn"` or `"ffn"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sublayers: Option<Which>,
    /// `N_in`: norm on the sublayer input, before the branch function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<NormSpec>,
    /// `N_out`: norm on the branch output, before the residual addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<NormSpec>,
    /// `N_outer`: norm after the residual addition (post-norm position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer: Option<NormSpec>,
    /// `a`: skip-branch scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<Scale>,
    /// `c`: residual-branch scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<Scale>,
    /// `s`: multiplies the output of `N_in` (LayerNorm-Scaling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_scale: Option<Scale>,
    /// Init multiplier of the branch's output projection (`W_O`, `W_2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_out: Option<Scale>,
    /// Init multiplier of `W_V` (attention) and `W_1`, `W_3` (FFN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_in: Option<Scale>,
    /// `g`: a learnable gate on the residual branch, `z = a·X + c·(g ⊙ N_out(F(s·N_in(X))))`
    /// (ReZero, SkipInit, LayerScale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateSpec>,
}

/// A learnable residual gate: its shape, initial value and owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// `"scalar"` (one `α ∈ ℝ`: ReZero, SkipInit) or `"channel"` (`λ ∈ ℝ^d`: LayerScale).
    pub shape: GateShape,
    /// Its initial value: a number or an expression in `L`, `k`, `l`, `d` and `params`.
    pub init: Scale,
    /// `"sublayer"` (default: one gate per sublayer) or `"layer"` (one gate shared by a
    /// Transformer layer's attention and feed-forward sublayers, as ReZero's code does).
    #[serde(default)]
    pub per: GateOwner,
    /// What the gate acts on: `"branch"` (default), `"skip"` (Admin's ω) or `"interpolate"`
    /// (nGPT's eigen learning rate); see [`GateOn`].
    #[serde(default)]
    pub on: GateOn,
    /// nGPT's scaled parametrisation: the parameter is stored starting at `scale` and used as
    /// `stored · init/scale`, so that an optimizer step moves the used value `init/scale` times
    /// as far as it moves the stored one (nGPT: α stored at `1/√d`, used at 0.05). Default: the
    /// parameter is the used value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
    /// Admin's profiling pass (skip gates only): at a fresh start each gate is set from one
    /// forward on the training data, `ω_1 = 1`, `ω_{l+1} = √(Var(ω_l ⊙ X_l) + Var(F_l(X_l)))`
    /// (see [`crate::model::Transformer::profile_skip_gates`]); `init` is then unused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profile: bool,
}

/// What a gate `g` multiplies in the sublayer equation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateOn {
    /// The residual branch: `z = a·X + c·(g ⊙ N_out(F(s·N_in(X))))` (ReZero, SkipInit, LayerScale).
    #[default]
    Branch,
    /// The skip: `z = a·(g ⊙ X) + c·N_out(F(s·N_in(X)))` (Admin's ω).
    Skip,
    /// The step from the stream towards the branch: with `X̂ = N_outer(X)`,
    /// `z = X̂ + |g| ⊙ (N_out(F(s·N_in(X))) − X̂)` (nGPT's eigen learning rate α; with unit-L2
    /// `N_out` and `N_outer` a step along the hypersphere).
    Interpolate,
}

/// A gate's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateShape {
    Scalar,
    Channel,
}

/// Which sublayers one gate serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateOwner {
    #[default]
    Sublayer,
    Layer,
}

impl SublayerSpec {
    /// Fields set in `over` replace those in `self`.
    pub fn overlay(&mut self, over: &SublayerSpec) {
        macro_rules! take {
            ($($f:ident),*) => { $( if over.$f.is_some() { self.$f = over.$f.clone(); } )* };
        }
        take!(input, output, outer, skip, residual, input_scale, init_out, init_in, gate);
    }
}
