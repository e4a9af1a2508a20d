//! The recipe as data: what a preset is and what a user writes in a config file.
//!
//! Every sublayer `l` (attention or FFN, `l = 1..2L`, Transformer layer `k = ⌈l/2⌉`) computes
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
//! `X_1` is the (optionally normalised) token embedding and the logits read
//! `N_final(X_{2L+1})`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::norm::BhytDenominator;
use crate::norm::kinds::NormOption;

/// A norm slot as written: a kind name (`"none"`, `"ln"`, `"layernorm"`, `"rmsnorm"`,
/// `"scalar-ln"`, `"dyt"`, `"bhyt-star"`, `"bhyt"`, `"rmsnorm-approx"`) or a table with options.
///
/// `"ln"` means the recipe's base norm ([`RecipeSpec::norm`]), so that LayerNorm vs RMSNorm is
/// chosen independently of placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[serde(try_from = "toml::Value")]
pub enum NormSpec {
    Kind(NormName),
    Table(NormTable),
}

/// A norm kind as a recipe names it: `"none"` (an empty slot), `"ln"` (the recipe's base norm,
/// [`RecipeSpec::norm`]) or a kind of [`crate::norm::KINDS`], the one table of kinds their names
/// and options come from. `"scalar-ln"` under `norm = "rmsnorm"` is the scalarised RMSNorm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "&'static str")]
pub struct NormName(&'static str);

impl<'de> Deserialize<'de> for NormName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        NormName::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl NormName {
    /// An empty slot.
    pub const NONE: NormName = NormName("none");
    /// The recipe's base norm: LayerNorm or RMSNorm.
    pub const LN: NormName = NormName("ln");

    /// A kind of [`crate::norm::KINDS`] by its name, for the presets (a name the table lacks is
    /// refused when the recipe resolves; every preset resolves in the tests).
    pub const fn kind(name: &'static str) -> NormName {
        NormName(name)
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Every name a recipe may write.
    pub fn known() -> Vec<&'static str> {
        let mut all = vec![Self::NONE.0, Self::LN.0];
        all.extend(crate::norm::KINDS.iter().map(|k| k.name));
        all
    }

    /// The options a slot of this kind takes (any other set option is an error): `ln` takes
    /// LayerNorm's.
    pub fn options(self) -> &'static [NormOption] {
        let name = if self == Self::LN { "layernorm" } else { self.0 };
        crate::norm::kinds::find(name).map_or(&[], |k| k.options)
    }
}

impl TryFrom<String> for NormName {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::known()
            .into_iter()
            .find(|n| *n == s)
            .map(NormName)
            .ok_or_else(|| format!("unknown norm kind `{s}` (known: {})", Self::known().join(", ")))
    }
}

impl From<NormName> for &'static str {
    fn from(n: NormName) -> Self {
        n.as_str()
    }
}

impl std::fmt::Display for NormName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Options of a norm slot; fields that do not apply to the kind are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormTable {
    pub kind: NormName,
    /// Learnable gain γ (default true). `false` fixes γ = 1 (the Peri-LN paper's §4.4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<bool>,
    /// Learnable shift β (LayerNorm, scalarised LayerNorm; default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<bool>,
    /// DyT's and Derf's initial α (default 0.5, both repositories' default), SeeDNorm's (every
    /// entry; default 1): a number or an expression in `L`, `k`, `l`, `d` and `params` (the
    /// `dyt` preset steps it by width `d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<Scale>,
    /// BHyT's initial λ (the BHyT paper's C.3: 2.0 before attention, 1.0 before the FFN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// BHyT's target probability p, κ = (1 − p)^{−1/2} (default 0.99, κ = 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// BHyT*'s denominator: `"std"` (paper eq. 1, default) or `"rms"` (authors' code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denominator: Option<BhytDenominator>,
    /// Derf's initial shift `s` inside the erf (default 0, the Derf repository's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<f64>,
    /// SeeDNorm's initial β, every entry (default 0: RMSNorm at initialisation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
}

/// Parsed by hand so that a typo inside a norm table is reported by name, not as "did not
/// match any variant".
impl TryFrom<toml::Value> for NormSpec {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => NormName::try_from(s).map(NormSpec::Kind),
            toml::Value::Table(_) => v.try_into::<NormTable>().map(NormSpec::Table).map_err(|e| e.to_string()),
            other => Err(format!("a norm is a kind name or a table, not `{other}`")),
        }
    }
}

impl NormSpec {
    pub fn none() -> Self {
        NormSpec::Kind(NormName::NONE)
    }

    pub fn table(&self) -> NormTable {
        match self {
            NormSpec::Kind(k) => NormTable::of(*k),
            NormSpec::Table(t) => t.clone(),
        }
    }

    pub fn is_none(&self) -> bool {
        self.table().kind == NormName::NONE
    }
}

impl NormTable {
    /// The options this table sets.
    pub fn set_options(&self) -> Vec<NormOption> {
        let set = [
            (NormOption::Gain, self.gain.is_some()),
            (NormOption::Shift, self.shift.is_some()),
            (NormOption::Alpha, self.alpha.is_some()),
            (NormOption::Lambda, self.lambda.is_some()),
            (NormOption::P, self.p.is_some()),
            (NormOption::Denominator, self.denominator.is_some()),
            (NormOption::Offset, self.offset.is_some()),
            (NormOption::Beta, self.beta.is_some()),
        ];
        set.into_iter().filter(|(_, is_set)| *is_set).map(|(o, _)| o).collect()
    }

    /// `kind` with every option at its default.
    pub fn of(kind: NormName) -> Self {
        Self {
            kind,
            gain: None,
            shift: None,
            alpha: None,
            lambda: None,
            p: None,
            denominator: None,
            offset: None,
            beta: None,
        }
    }
}

/// A scale: a number or an expression in `L`, `k`, `l`, `d` (the hidden size) and the
/// recipe's `params` (see [`super::expr`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scale {
    Number(f64),
    Expr(String),
}

impl Scale {
    pub fn expr(s: &str) -> Self {
        Scale::Expr(s.into())
    }

    pub fn text(&self) -> String {
        match self {
            Scale::Number(v) => format!("{v}"),
            Scale::Expr(s) => s.clone(),
        }
    }

    pub fn is_one(&self) -> bool {
        matches!(self, Scale::Number(v) if *v == 1.0) || matches!(self, Scale::Expr(s) if s.trim() == "1")
    }
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

/// The sublayer equation's parts. In [`RecipeSpec::sublayer`] unset fields take the defaults
/// (no norms, all scales 1); in [`RecipeSpec::layers`] an entry overrides only what it sets,
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

/// Where QK-norm normalises queries and keys (always RMSNorm with a learnable gain).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "toml::Value")]
pub enum QkNorm {
    #[default]
    None,
    /// Over each head's `d_head` features after the head split (Qwen3), gains in `ℝ^{d_head}`
    /// shared by the heads.
    Head,
    /// Over the full width `d` before the head split (OLMo 2), gains in `ℝ^d`.
    Full,
    /// Per head, to unit mean square, `q/√(mean(q²) + ε)`, no gain: Megatron-LM's
    /// `qk_l2_norm` (its `L2Norm`) and Llama 4's `L2Norm`.
    L2,
    /// Per head, to unit L2 norm, `q/√(‖q‖² + ε)`, no gain (Transformer Engine's
    /// `l2normalization`): [`QkNorm::L2`] divided by `√d_head`.
    UnitL2,
}

impl QkNorm {
    /// The name a recipe writes.
    pub fn as_str(self) -> &'static str {
        match self {
            QkNorm::None => "none",
            QkNorm::Head => "head",
            QkNorm::Full => "full",
            QkNorm::L2 => "l2",
            QkNorm::UnitL2 => "unit-l2",
        }
    }

    /// Whether the norm has no gain and lies per head (the L2 forms).
    pub fn is_l2(self) -> bool {
        matches!(self, QkNorm::L2 | QkNorm::UnitL2)
    }
}

/// Accepts the names and, for configs written before the choice existed, a boolean.
impl TryFrom<toml::Value> for QkNorm {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Boolean(b) => Ok(if b { QkNorm::Head } else { QkNorm::None }),
            toml::Value::String(s) => match s.as_str() {
                "none" => Ok(QkNorm::None),
                "head" => Ok(QkNorm::Head),
                "full" => Ok(QkNorm::Full),
                "l2" => Ok(QkNorm::L2),
                "unit-l2" => Ok(QkNorm::UnitL2),
                other => {
                    Err(format!("qk_norm = \"{other}\": expected \"none\", \"head\", \"full\", \"l2\" or \"unit-l2\""))
                }
            },
            other => Err(format!("qk_norm is \"none\", \"head\", \"full\", \"l2\" or \"unit-l2\", not `{other}`")),
        }
    }
}

impl QkNorm {
    pub fn is_on(self) -> bool {
        self != QkNorm::None
    }
}

/// Qwen's gated attention ("Gated Attention for Large Language Models: Non-linearity, Sparsity,
/// and Attention-Sink-Free", position G1): each head's attention output multiplied by
/// `σ(X W_θ)` before the output projection, `X` the sublayer input the projections read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttnGate {
    /// No gate.
    #[default]
    None,
    /// One gate per head, `W_θ ∈ ℝ^{d×H}`.
    Headwise,
    /// One gate per head and feature, `W_θ ∈ ℝ^{d×H·h}` (the paper's best variant).
    Elementwise,
}

impl AttnGate {
    /// The name a recipe writes.
    pub fn as_str(self) -> &'static str {
        match self {
            AttnGate::None => "none",
            AttnGate::Headwise => "headwise",
            AttnGate::Elementwise => "elementwise",
        }
    }

    pub fn is_on(self) -> bool {
        self != AttnGate::None
    }

    /// For `skip_serializing_if`.
    pub fn is_off(&self) -> bool {
        !self.is_on()
    }
}

/// The initial values of the per-layer x0-mixing scalars: `λ_r` on the stream, `λ₀` on the
/// embedding stream `X_1` (default 1 and 0: the plain residual stream at initialisation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct X0Mix {
    #[serde(default = "one")]
    pub residual: f64,
    #[serde(default)]
    pub x0: f64,
}

fn one() -> f64 {
    1.0
}

/// QK-clip's threshold `τ` on the attention logit `q·k/√h` and the split `α` of the rescaling
/// between queries and keys: `W_q ← W_q·(τ/S)^α`, `W_k ← W_k·(τ/S)^{1−α}` (Kimi K2: τ = 100,
/// α = 0.5).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QkClip {
    pub tau: f64,
    #[serde(default = "half")]
    pub alpha: f64,
}

fn half() -> f64 {
    0.5
}

/// A scaled parameter of nGPT: used value `init` at initialisation, stored starting at `scale`
/// (see [`GateSpec::scale`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaledSpec {
    pub init: Scale,
    pub scale: Scale,
}

/// nGPT's scaling factors, each a scaled parameter; the defaults are NVIDIA's reference code's
/// (`sqk`, `sz`: init 1 stored at `1/√d`; `suv`: init 1 stored at 1, used times `√d`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HypersphereSpec {
    /// `s_qk ∈ ℝ^{d}` (one value per query/key channel of every head).
    #[serde(default = "unit_over_root_d")]
    pub sqk: ScaledSpec,
    /// `s_uv ∈ ℝ^{2·d_ff}` on the two GLU pre-activations, used times `√d`.
    #[serde(default = "unit")]
    pub suv: ScaledSpec,
    /// `s_z ∈ ℝ^V` on the logits.
    #[serde(default = "unit_over_root_d")]
    pub sz: ScaledSpec,
}

impl Default for HypersphereSpec {
    fn default() -> Self {
        Self { sqk: unit_over_root_d(), suv: unit(), sz: unit_over_root_d() }
    }
}

fn unit_over_root_d() -> ScaledSpec {
    ScaledSpec { init: Scale::Number(1.0), scale: Scale::expr("1/sqrt(d)") }
}

fn unit() -> ScaledSpec {
    ScaledSpec { init: Scale::Number(1.0), scale: Scale::Number(1.0) }
}

/// DeepScaleLM's initialisation (Kedia et al., 2024, "Transformers Get Stable"; the authors'
/// Megatron-LM code, `moment_control_sigma`): unit-variance embeddings, `W_Q`, `W_K` at
/// `σ² = 1/d`, the FFN at unit output variance, and `W_V`, `W_O` per layer at unit output
/// variance given the token correlation `r` that the model carries at that depth, tracked from
/// `r0` through every sublayer's skip and residual scales.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MomentControlSpec {
    /// The correlation between two positions' embeddings (the authors measured 0.221 on their
    /// Wikipedia BERT data; the default).
    #[serde(default = "authors_r0")]
    pub r0: f64,
}

impl Default for MomentControlSpec {
    fn default() -> Self {
        Self { r0: authors_r0() }
    }
}

fn authors_r0() -> f64 {
    0.221
}

/// How a sublayer reads the streams and mixes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamMixing {
    /// Hyper-Connections: learnable width connections `A_m`, `A_r` and depth connections `B`,
    /// static (initialised as pre-norm) plus, with `dynamic`, `tanh` terms of the normalised
    /// streams; unconstrained.
    Hc,
    /// mHC: read `σ(·)`, write `2σ(·)`, residual mixing projected onto the doubly stochastic
    /// matrices by Sinkhorn–Knopp (DeepSeek V4's form).
    Mhc,
    /// mHC-lite: mHC whose residual mixing is a convex combination of the `n!` permutation
    /// matrices (exactly doubly stochastic, no iterations).
    MhcLite,
}

impl StreamMixing {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMixing::Hc => "hc",
            StreamMixing::Mhc => "mhc",
            StreamMixing::MhcLite => "mhc-lite",
        }
    }
}

/// `streams = { n = 4, mixing = "mhc" }` as a recipe writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamsSpec {
    /// The number of streams (the papers' expansion rate; 4 in all three).
    #[serde(default = "four")]
    pub n: usize,
    pub mixing: StreamMixing,
    /// Hyper-Connections only: the input-dependent (`tanh`) terms (default true, the paper's
    /// DHC; false is its static SHC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    /// mHC only: Sinkhorn–Knopp iterations (default 20, the paper's t_max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sinkhorn_iters: Option<usize>,
}

fn four() -> usize {
    4
}

/// `attn_res = { blocks = 8 }` as a recipe writes it: Attention Residuals (Kimi Team,
/// "Attention Residuals", 2026). Every sublayer reads a softmax mixture of the earlier
/// sublayers' outputs, weighted by a learned pseudo-query against their RMS-normalised values,
/// instead of their unit-weight sum.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttnResSpec {
    /// Block AttnRes: the 2L sublayers fall into this many blocks of `⌈2L/N⌉` consecutive
    /// sublayers, summed within a block and attended across blocks (the paper's N; ≈ 8 recovers
    /// most of the full form's gain). Unset: Full AttnRes, every sublayer's output a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<usize>,
}

/// `completep = { base_layers = 2 }`: CompleteP (Dey et al., "Don't be lazy: CompleteP enables
/// compute-efficient deep transformers", NeurIPS 2025), the depth parametrisation α = 1 of the
/// authors' `nanoGPT-mup` (branch `completep`). With `m = L / base_layers`, every residual branch
/// is multiplied by `m^{-1}` before the addition and AdamW's ε of every parameter inside the
/// Transformer layers by `m^{-1}` (the embedding, final norm and output projection keep ε);
/// learning rates (`m^{α−1} = 1`), initialisations and weight decay stay as tuned at
/// `base_layers`, which is what lets the best learning rate found there transfer to depth `L`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletePSpec {
    /// The depth `L_base` (Transformer layers) the hyperparameters were tuned at.
    pub base_layers: usize,
}

/// `taper = { start = 0.1, end = 0.5, decay = 0.99 }`: the global gate of the recipe's
/// `tapernorm` slots (TaperNorm; see [`crate::recipe::taper`]). Every field has a default, and
/// a recipe with a `tapernorm` slot and no `taper` uses them all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaperSpec {
    /// The fraction of the run after which the gate starts to fall (and `c` is calibrated);
    /// unset: the end of the learning-rate warm-up, through which the paper holds the gate at 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    /// The fraction of the run after which the gate is 0 (default ½).
    #[serde(default = "TaperSpec::default_end")]
    pub end: f64,
    /// The decay β of the calibration's moving averages (default 0.99).
    #[serde(default = "TaperSpec::default_decay")]
    pub decay: f64,
}

impl TaperSpec {
    fn default_end() -> f64 {
        0.5
    }
    fn default_decay() -> f64 {
        0.99
    }
}

impl Default for TaperSpec {
    fn default() -> Self {
        Self { start: None, end: Self::default_end(), decay: Self::default_decay() }
    }
}

/// The base norm that `"ln"` slots resolve to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseNorm {
    #[default]
    Layernorm,
    Rmsnorm,
}

/// A complete placement recipe. Presets are values of this type ([`super::presets`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeSpec {
    pub name: String,
    /// One line: what it is and where it comes from.
    pub about: String,
    /// What `"ln"` slots are (default LayerNorm, as in KiteNorm; Peri-LN used RMSNorm), and
    /// what `"scalar-ln"` slots are: scalarised LayerNorm, or scalarised RMSNorm under
    /// `"rmsnorm"`.
    #[serde(default)]
    pub norm: BaseNorm,
    /// A learnable scalar multiplying the token embeddings, `X_1 = N_emb(e · Embed(x))`, with
    /// this initial value (DyT's LLaMA recipe: `"sqrt(d)"`); none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_scale: Option<Scale>,
    /// A constant multiplying the token embeddings (Gemma's normalizer `"sqrt(d)"`): fixed,
    /// unlike [`RecipeSpec::embedding_scale`]; none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_multiplier: Option<Scale>,
    /// Norm applied to the token embedding (Peri-LN).
    pub embedding_norm: NormSpec,
    /// Norm applied before the output projection.
    pub final_norm: NormSpec,
    /// RMSNorm on queries and keys: `"none"`, `"head"` (per head, over `d_head`; Qwen3),
    /// `"full"` (over all heads together, before the split; OLMo 2) or `"l2"` (per head, unit
    /// L2 norm, no gain; Megatron-LM). `true` means `"head"`.
    #[serde(default)]
    pub qk_norm: QkNorm,
    /// RMSNorm on the values too, `"head"` or `"full"` (HybridNorm's QKV-norm); default none.
    #[serde(default)]
    pub v_norm: QkNorm,
    /// Soft-capping of the attention logits, `c·tanh(s/c)` before the mask (Gemma 2: 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_softcap: Option<f64>,
    /// Soft-capping of the output logits, `c·tanh(logits/c)` (Gemma 2: 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_softcap: Option<f64>,
    /// A sigmoid gate on each head's attention output (Qwen's gated attention): `"none"`
    /// (default), `"headwise"` or `"elementwise"`.
    #[serde(default, skip_serializing_if = "AttnGate::is_off")]
    pub attn_gate: AttnGate,
    /// A learnable logit per head in every softmax's denominator (gpt-oss's attention sinks):
    /// `p_j = exp(s_j)/(exp(b_h) + Σ_k exp(s_k))`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attn_sink: bool,
    /// Value residual learning (ResFormer): every attention sublayer after the first mixes the
    /// first layer's values into its own, `v ← λ₁·v + λ₂·v₁`, λ learnable per layer (0.5, 0.5).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub value_residual: bool,
    /// Mixing of the embedding stream into every Transformer layer's input,
    /// `X ← λ_r·X + λ₀·X_1` with learnable per-layer scalars (modded-nanogpt, nanochat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x0_mix: Option<X0Mix>,
    /// QK-clip (MuonClip): after every optimizer step, rescale the query and key projections
    /// of each head whose largest attention logit in the step exceeded `tau`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_clip: Option<QkClip>,
    /// nGPT's hypersphere: unit-norm embedding and weight vectors (projected after every
    /// optimizer step), per-channel `s_qk` on unit queries and keys with softmax scale `√d_h`,
    /// `s_uv` on the GLU pre-activations and `s_z` on the logits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypersphere: Option<HypersphereSpec>,
    /// DeepScaleLM's moment-control initialisation: every weight drawn so that each component
    /// conserves unit output moments at initialisation (see [`MomentControlSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moment_control: Option<MomentControlSpec>,
    /// A residual state of `n` streams, read and written by each sublayer through learned
    /// mixing (Hyper-Connections, mHC, mHC-lite); one stream when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamsSpec>,
    /// Attention Residuals: the residual sum replaced by softmax attention over depth (see
    /// [`AttnResSpec`]); the plain sum when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_res: Option<AttnResSpec>,
    /// GPAS (gradient-preserving activation scaling): after every residual addition the stream
    /// is scaled down in the forward pass only, `X ← X − SiLU(α_k)·sg(X)`, one learnable `α_k`
    /// per Transformer layer starting at 0 (see [`crate::model::gpas`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gpas: bool,
    /// CompleteP's depth parametrisation (see [`CompletePSpec`]); standard parametrisation when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completep: Option<CompletePSpec>,
    /// The schedule of the `tapernorm` slots' global gate (see [`TaperSpec`]); its defaults
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taper: Option<TaperSpec>,
    /// Weight λ of KiteNorm's variance regulariser (KiteNorm eq. 24) in the training loss.
    #[serde(default)]
    pub regularizer: f64,
    /// Named constants usable in scale expressions (e.g. `mix_ratio`).
    #[serde(default)]
    pub params: BTreeMap<String, f64>,
    /// Applies to every sublayer.
    pub sublayer: SublayerSpec,
    /// Per-layer overrides, applied in order.
    #[serde(default)]
    pub layers: Vec<SublayerSpec>,
    /// Documented facts about the recipe, e.g. parameters that provably cannot learn.
    #[serde(default)]
    pub notes: Vec<String>,
}
