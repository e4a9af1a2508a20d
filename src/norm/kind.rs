//! The resolved description of one norm slot.

use serde::{Deserialize, Serialize};

/// Which statistic BHyT* divides by (see [`super::bhyt_star`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BhytDenominator {
    /// The BHyT paper's eq. 1: `κ √(s_x² + ε) + |μ_x|`, `s_x²` the centred variance.
    Std,
    /// The BHyT authors' code and Algorithm 1 line 3: `κ √(mean(x²) + ε)`.
    Rms,
}

/// A fully resolved norm: which function, its constants and initial parameter values.
///
/// `gain = false` removes the learnable gain (γ ≡ 1), as when Peri-LN's output-norm gain is
/// frozen at 1 (the Peri-LN paper's §4.4.1).
#[derive(Clone, Debug, PartialEq)]
pub enum NormKind {
    /// Vector LayerNorm, `γ, β ∈ ℝ^d`; `shift = false` drops β (KEEL).
    LayerNorm { gain: bool, shift: bool, eps: f64 },
    /// RMSNorm, `γ ∈ ℝ^d`.
    RmsNorm { gain: bool, eps: f64 },
    /// Scalarised LayerNorm (KiteNorm eq. 4), `γ′, β′ ∈ ℝ` initialised to 1 and 0.
    ScalarLayerNorm { shift: bool, eps: f64 },
    /// Scalarised RMSNorm, `γ′ x / √(mean(x²) + ε)` with one learnable `γ′ ∈ ℝ` (init 1) and no
    /// centring or shift: KiteNorm's scalar slots under `norm = "rmsnorm"`.
    ScalarRmsNorm { eps: f64 },
    /// DyT with learnable scalar α (initial value `alpha`) and `γ, β ∈ ℝ^d`.
    Dyt { alpha: f64 },
    /// BHyT* with exact statistics; learnable scalar λ (initial value `lambda`), `γ ∈ ℝ^d`.
    BhytStar { lambda: f64, p: f64, denominator: BhytDenominator, eps: f64 },
    /// BHyT (Algorithm 1): exact second moment in the first norm of a block, the variance
    /// approximation of Theorem 3.5 in the second. Learnable λ, `γ ∈ ℝ^d`.
    Bhyt { lambda: f64, p: f64, eps: f64 },
    /// RMSNorm-Approx (the BHyT paper's Table 5): RMSNorm, `γ ∈ ℝ^d`, whose FFN-input slot divides by
    /// the block's approximated variance instead of measuring its own input.
    RmsNormApprox { gain: bool, eps: f64 },
    /// LayerNorm with a zero-centred gain (Megatron-LM's `apply_layernorm_1p`):
    /// `(1 + γ) ⊙ (x − μ)/√(σ² + ε) + β`, γ initialised to 0, so that weight decay on γ pulls
    /// the effective gain towards 1 rather than 0.
    LayerNorm1p { shift: bool, eps: f64 },
    /// Derf: `γ ⊙ erf(α x + s) + β` with learnable scalars α (initial `alpha`) and s (initial
    /// `offset`), `γ, β ∈ ℝ^d`.
    Derf { alpha: f64, offset: f64 },
    /// Unit L2 norm `x/‖x‖`, no parameters and no ε (nGPT's `justnorm`).
    L2,
    /// Zero-centred RMSNorm (Qwen3-Next): `(1 + γ) ⊙ x/√(mean(x²) + ε)`, γ initialised to 0 and,
    /// unlike every other norm parameter, weight-decayed (towards the gain 1).
    ZcRms { eps: f64 },
    /// SeeDNorm: `[tanh(x·βᵀ)·α + γ] ⊙ x/√(mean(x²) + ε)`, `γ, α, β ∈ ℝ^d`, γ initialised to 1
    /// and α, β to `alpha`, `beta` everywhere.
    SeeDNorm { alpha: f64, beta: f64, eps: f64 },
    /// TaperNorm: `g · γ ⊙ x/√(mean(x²) + ε) + (1 − g) · c · γ̃ ⊙ x`, `γ, γ̃ ∈ ℝ^d` (init 1), the
    /// global gate `g` and the calibrated scale `c` buffers (see [`super::TaperNorm`]).
    TaperNorm { eps: f64 },
}

impl NormKind {
    /// The kinds built around a bounded elementwise function (tanh, erf) rather than a
    /// normalising statistic alone: DyT, BHyT*, BHyT, Derf.
    pub fn is_pointwise(&self) -> bool {
        matches!(self, NormKind::Dyt { .. } | NormKind::BhytStar { .. } | NormKind::Bhyt { .. } | NormKind::Derf { .. })
    }

    /// Short symbol used in printed sublayer equations.
    pub fn symbol(&self) -> String {
        match self {
            NormKind::LayerNorm { gain, shift, .. } => match (gain, shift) {
                (true, true) => "LN".into(),
                (true, false) => "LN₀".into(),
                (false, true) => "LN[γ=1]".into(),
                (false, false) => "LN₀[γ=1]".into(),
            },
            NormKind::RmsNorm { gain: true, .. } => "RMS".into(),
            NormKind::RmsNorm { gain: false, .. } => "RMS[γ=1]".into(),
            NormKind::ScalarLayerNorm { .. } => "sLN".into(),
            NormKind::ScalarRmsNorm { .. } => "sRMS".into(),
            NormKind::Dyt { alpha } => format!("DyT[α₀={alpha}]"),
            NormKind::BhytStar { lambda, .. } => format!("BHyT*[λ₀={lambda}]"),
            NormKind::Bhyt { lambda, .. } => format!("BHyT[λ₀={lambda}]"),
            NormKind::RmsNormApprox { gain: true, .. } => "RMS≈".into(),
            NormKind::RmsNormApprox { gain: false, .. } => "RMS≈[γ=1]".into(),
            NormKind::LayerNorm1p { shift: true, .. } => "LN1p".into(),
            NormKind::LayerNorm1p { shift: false, .. } => "LN1p₀".into(),
            NormKind::Derf { alpha, offset: 0.0 } => format!("Derf[α₀={alpha}]"),
            NormKind::Derf { alpha, offset } => format!("Derf[α₀={alpha}, s₀={offset}]"),
            NormKind::L2 => "L2".into(),
            NormKind::ZcRms { .. } => "zcRMS".into(),
            NormKind::SeeDNorm { alpha: 1.0, beta: 0.0, .. } => "SeeD".into(),
            NormKind::SeeDNorm { alpha, beta, .. } => format!("SeeD[α₀={alpha}, β₀={beta}]"),
            NormKind::TaperNorm { .. } => "Taper".into(),
        }
    }
}
