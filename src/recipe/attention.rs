//! The attention concern of a recipe: what normalises, caps, gates and sinks the attention of
//! every layer, and what rescales its projections after a step.
//!
//! ```text
//! q, k = N_qk(x W_q), N_qk(x W_k)              qk_norm: per head (Qwen3), full width (OLMo 2), L2
//! v    = N_v(x W_v);  v ← λ₁·v + λ₂·v₁          v_norm (HybridNorm); value_residual (ResFormer)
//! s    = c·tanh((q·k/√h)/c)                     softcap (Gemma 2: 50)
//! p_j  = exp(s_j)/(exp(b_h) + Σ_k exp(s_k))     sink (gpt-oss)
//! o    = σ(x W_θ) ⊙ Σ_j p_j v_j                 gate: headwise or elementwise (Qwen)
//! after a step: W_q, W_k of heads whose max logit passed τ scaled by (τ/S)^α, (τ/S)^{1−α}   qk_clip
//! ```

use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// `[recipe.attention]` as a recipe writes it; every field has a default (plain attention).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionSpec {
    /// RMSNorm on queries and keys: `"none"`, `"head"` (per head, over `d_head`; Qwen3),
    /// `"full"` (over all heads together, before the split; OLMo 2) or `"l2"` / `"unit-l2"`
    /// (per head, no gain; Megatron-LM, Transformer Engine). `true` means `"head"`.
    #[serde(default, skip_serializing_if = "QkNorm::is_off")]
    pub qk_norm: QkNorm,
    /// RMSNorm on the values too, `"head"` or `"full"` (HybridNorm's QKV-norm); default none.
    #[serde(default, skip_serializing_if = "VNorm::is_off")]
    pub v_norm: VNorm,
    /// Soft-capping of the attention logits, `c·tanh(s/c)` before the mask (Gemma 2: 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softcap: Option<f64>,
    /// A sigmoid gate on each head's attention output (Qwen's gated attention): `"none"`
    /// (default), `"headwise"` or `"elementwise"`.
    #[serde(default, skip_serializing_if = "AttnGate::is_off")]
    pub gate: AttnGate,
    /// A learnable logit per head in every softmax's denominator (gpt-oss's attention sinks):
    /// `p_j = exp(s_j)/(exp(b_h) + Σ_k exp(s_k))`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sink: bool,
    /// Value residual learning (ResFormer): every attention sublayer after the first mixes the
    /// first layer's values into its own, `v ← λ₁·v + λ₂·v₁`, λ learnable per layer (0.5, 0.5).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub value_residual: bool,
    /// QK-clip (MuonClip): after every optimizer step, rescale the query and key projections
    /// of each head whose largest attention logit in the step exceeded `tau`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_clip: Option<QkClip>,
}

/// The attention concern resolved: the same choices, checked.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Attention {
    pub qk_norm: QkNorm,
    /// RMSNorm on the values (HybridNorm's QKV-norm): `Head`, `Full` or `None`.
    pub v_norm: QkNorm,
    pub softcap: Option<f64>,
    /// Qwen's sigmoid gate on each head's attention output, when on.
    pub gate: AttnGate,
    /// gpt-oss's learnable per-head logit in the softmax denominator.
    pub sink: bool,
    /// ResFormer's value residual: later layers mix the first layer's values into theirs.
    pub value_residual: bool,
    pub qk_clip: Option<QkClip>,
}

/// The largest soft-cap: `x/c` stays a normal f32 for logits from 10⁻⁷ on (f32's smallest
/// normal is 1.2·10⁻³⁸).
pub const MAX_SOFTCAP: f64 = 1e30;

/// A soft-cap `c` (of the attention or the output logits, named `field`): positive and within
/// what f32 computes `c·tanh(x/c)` with.
pub fn check_softcap(field: &str, cap: Option<f64>) -> anyhow::Result<()> {
    if let Some(c) = cap {
        ensure!(c.is_finite() && c > 0.0, "`{field}` = {c} must be a positive number (Gemma 2: 50 and 30)");
        // Past this, `x/c` underflows f32 for every logit and `c` itself may not be one.
        ensure!(
            c <= MAX_SOFTCAP,
            "`{field}` = {c} is beyond what f32 computes c·tanh(x/c) with (at most {MAX_SOFTCAP:e}); a cap that \
             large changes nothing: remove it"
        );
    }
    Ok(())
}

/// Resolves `spec`: positive caps and a valid QK-clip that no QK-norm undoes.
pub fn resolve(spec: &AttentionSpec) -> anyhow::Result<Attention> {
    check_softcap("attention.softcap", spec.softcap)?;
    if let Some(QkClip { tau, alpha }) = spec.qk_clip {
        ensure!(tau.is_finite() && tau > 0.0, "`attention.qk_clip.tau` = {tau} must be > 0 (Kimi K2: 100)");
        ensure!((0.0..=1.0).contains(&alpha), "`attention.qk_clip.alpha` = {alpha} must lie in [0, 1] (Kimi K2: 0.5)");
        // Both are written in one table, but a clip of weights a norm renormalises is a
        // no-op the user should hear about rather than a second enum to spell.
        ensure!(
            !spec.qk_norm.is_on(),
            "qk_clip rescales W_q and W_k, which QK-norm (qk_norm = \"{}\") undoes; use one or the other",
            spec.qk_norm.as_str()
        );
    }
    Ok(Attention {
        qk_norm: spec.qk_norm,
        v_norm: spec.v_norm.into(),
        softcap: spec.softcap,
        gate: spec.gate,
        sink: spec.sink,
        value_residual: spec.value_residual,
        qk_clip: spec.qk_clip,
    })
}

/// Where a value norm normalises: RMSNorm with a learnable gain, per head or over the full width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VNorm {
    #[default]
    None,
    Head,
    Full,
}

impl VNorm {
    /// For `skip_serializing_if`.
    pub fn is_off(&self) -> bool {
        *self == VNorm::None
    }
}

impl From<VNorm> for QkNorm {
    fn from(v: VNorm) -> QkNorm {
        match v {
            VNorm::None => QkNorm::None,
            VNorm::Head => QkNorm::Head,
            VNorm::Full => QkNorm::Full,
        }
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

    /// For `skip_serializing_if`.
    pub fn is_off(&self) -> bool {
        !self.is_on()
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
