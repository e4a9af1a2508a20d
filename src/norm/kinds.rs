//! The one table of norm kinds: for each kind the name a recipe writes, its formula, the
//! options a slot of that kind takes and how those options build its [`NormKind`]. The names a
//! recipe accepts, the options it refuses and `normlab recipes`' list of kinds all derive from
//! [`KINDS`]; adding a kind is one row here, its [`NormKind`] variant and its [`super::Norm`]
//! variant (see docs/recipes.md, "Adding a norm kind").

use super::kind::{BhytDenominator, NormKind};
use anyhow::ensure;

/// An option a norm slot may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormOption {
    /// A learnable gain γ (default on).
    Gain,
    /// A learnable shift β (default on).
    Shift,
    /// DyT's, Derf's and SeeDNorm's initial α.
    Alpha,
    /// BHyT's initial λ.
    Lambda,
    /// BHyT's target probability p.
    P,
    /// BHyT*'s denominator.
    Denominator,
    /// Derf's initial shift inside the erf.
    Offset,
    /// SeeDNorm's initial β.
    Beta,
}

impl NormOption {
    /// The option as a recipe writes it.
    pub fn name(self) -> &'static str {
        match self {
            NormOption::Gain => "gain",
            NormOption::Shift => "shift",
            NormOption::Alpha => "alpha",
            NormOption::Lambda => "lambda",
            NormOption::P => "p",
            NormOption::Denominator => "denominator",
            NormOption::Offset => "offset",
            NormOption::Beta => "beta",
        }
    }
}

/// A slot's options as the recipe gave them (expressions evaluated), `None` where not given,
/// and the recipe's ε.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlotOptions {
    pub gain: Option<bool>,
    pub shift: Option<bool>,
    pub alpha: Option<f64>,
    pub lambda: Option<f64>,
    pub p: Option<f64>,
    pub denominator: Option<BhytDenominator>,
    pub offset: Option<f64>,
    pub beta: Option<f64>,
    pub eps: f64,
}

/// One norm kind.
pub struct KindInfo {
    /// The name a recipe writes (`"dyt"`).
    pub name: &'static str,
    /// Its formula, with its source.
    pub formula: &'static str,
    /// The options a slot of this kind takes; any other is refused.
    pub options: &'static [NormOption],
    /// The resolved kind from a slot's options, or why they are wrong.
    pub build: fn(&SlotOptions) -> anyhow::Result<NormKind>,
}

use NormOption::{Alpha, Beta, Denominator, Gain, Lambda, Offset, P, Shift};

/// Every norm kind, in the order `normlab recipes` lists them.
pub const KINDS: &[KindInfo] = &[
    KindInfo {
        name: "layernorm",
        formula: "γ ⊙ (x − μ)/√(σ² + ε) + β (Ba et al., 2016)",
        options: &[Gain, Shift],
        build: |o| Ok(NormKind::LayerNorm { gain: o.gain.unwrap_or(true), shift: o.shift.unwrap_or(true), eps: o.eps }),
    },
    KindInfo {
        name: "rmsnorm",
        formula: "γ ⊙ x/√(mean(x²) + ε) (Zhang & Sennrich, 2019)",
        options: &[Gain, Shift],
        build: |o| {
            ensure!(o.shift != Some(true), "RMSNorm has no shift; remove `shift = true` or use layernorm");
            Ok(NormKind::RmsNorm { gain: o.gain.unwrap_or(true), eps: o.eps })
        },
    },
    KindInfo {
        name: "scalar-ln",
        formula: "γ′ (x − μ)/√(σ² + ε) + β′, γ′, β′ ∈ ℝ (KiteNorm eq. 4)",
        options: &[Shift],
        build: |o| Ok(NormKind::ScalarLayerNorm { shift: o.shift.unwrap_or(true), eps: o.eps }),
    },
    KindInfo {
        name: "scalar-rms",
        formula: "γ′ x/√(mean(x²) + ε), γ′ ∈ ℝ (KiteNorm's scalar slots under RMSNorm)",
        options: &[],
        build: |o| Ok(NormKind::ScalarRmsNorm { eps: o.eps }),
    },
    KindInfo {
        name: "dyt",
        formula: "γ ⊙ tanh(α x) + β, α ∈ ℝ (Zhu et al., 2025)",
        options: &[Alpha],
        build: |o| Ok(NormKind::Dyt { alpha: o.alpha.unwrap_or(0.5) }),
    },
    KindInfo {
        name: "bhyt-star",
        formula: "γ ⊙ tanh(λ x/(κ √(s_x² + ε) + |μ_x|)), κ = (1 − p)^−½ (the BHyT paper's eq. 1)",
        options: &[Lambda, P, Denominator],
        build: |o| {
            Ok(NormKind::BhytStar {
                lambda: positive("lambda", o.lambda.unwrap_or(1.0))?,
                p: probability(o.p)?,
                denominator: o.denominator.unwrap_or(BhytDenominator::Std),
                eps: o.eps,
            })
        },
    },
    KindInfo {
        name: "bhyt",
        formula: "BHyT* whose FFN-input slot takes the block's approximated variance (the BHyT paper's Algorithm 1)",
        options: &[Lambda, P],
        build: |o| {
            Ok(NormKind::Bhyt {
                lambda: positive("lambda", o.lambda.unwrap_or(1.0))?,
                p: probability(o.p)?,
                eps: o.eps,
            })
        },
    },
    KindInfo {
        name: "rmsnorm-approx",
        formula: "RMSNorm whose FFN-input slot takes the block's approximated variance (the BHyT paper's Table 5)",
        options: &[Gain],
        build: |o| Ok(NormKind::RmsNormApprox { gain: o.gain.unwrap_or(true), eps: o.eps }),
    },
    KindInfo {
        name: "layernorm-1p",
        formula: "(1 + γ) ⊙ (x − μ)/√(σ² + ε) + β, γ stored zero-centred (Megatron-LM)",
        options: &[Shift],
        build: |o| Ok(NormKind::LayerNorm1p { shift: o.shift.unwrap_or(true), eps: o.eps }),
    },
    KindInfo {
        name: "zc-rms",
        formula: "(1 + γ) ⊙ x/√(mean(x²) + ε), γ stored zero-centred and weight-decayed (Qwen3-Next)",
        options: &[],
        build: |o| Ok(NormKind::ZcRms { eps: o.eps }),
    },
    KindInfo {
        name: "derf",
        formula: "γ ⊙ erf(α x + s) + β, α, s ∈ ℝ (Chen et al., 2025, \"Stronger Normalization-Free Transformers\")",
        options: &[Alpha, Offset],
        build: |o| {
            let offset = o.offset.unwrap_or(0.0);
            ensure!(offset.is_finite(), "`offset` = {offset} must be a finite number");
            Ok(NormKind::Derf { alpha: o.alpha.unwrap_or(0.5), offset })
        },
    },
    KindInfo {
        name: "l2",
        formula: "x/‖x‖, no parameters (nGPT's justnorm)",
        options: &[],
        build: |_| Ok(NormKind::L2),
    },
    KindInfo {
        name: "seednorm",
        formula: "[tanh(x·βᵀ)·α + γ] ⊙ x/√(mean(x²) + ε) (Cai et al., 2025, SeeDNorm)",
        options: &[Alpha, Beta],
        build: |o| {
            let (alpha, beta) = (o.alpha.unwrap_or(1.0), o.beta.unwrap_or(0.0));
            ensure!(alpha.is_finite() && beta.is_finite(), "SeeDNorm's `alpha` and `beta` must be finite numbers");
            Ok(NormKind::SeeDNorm { alpha, beta, eps: o.eps })
        },
    },
    KindInfo {
        name: "tapernorm",
        formula: "g · γ ⊙ x/√(mean(x²) + ε) + (1 − g) · c · γ̃ ⊙ x, g a global gate 1 → 0 (Kanavalau et al., 2026, TaperNorm)",
        options: &[],
        build: |o| Ok(NormKind::TaperNorm { eps: o.eps }),
    },
];

/// The kind a recipe names `name`.
pub fn find(name: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.name == name)
}

fn positive(name: &str, v: f64) -> anyhow::Result<f64> {
    ensure!(v.is_finite() && v > 0.0, "`{name}` = {v} must be > 0");
    Ok(v)
}

/// BHyT's target probability, 0.99 (κ = 10) unless given.
fn probability(p: Option<f64>) -> anyhow::Result<f64> {
    let p = p.unwrap_or(0.99);
    ensure!(p > 0.0 && p < 1.0, "`p` = {p} must lie in (0, 1)");
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_kind_builds_from_its_defaults() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
        for k in KINDS {
            let built = (k.build)(&SlotOptions { eps: 1e-5, ..Default::default() });
            assert!(built.is_ok(), "{}: {built:?}", k.name);
        }
    }

    #[test]
    fn the_builds_refuse_values_out_of_range() {
        let bhyt = find("bhyt").unwrap();
        let e = (bhyt.build)(&SlotOptions { p: Some(1.0), ..Default::default() }).unwrap_err().to_string();
        assert_eq!(e, "`p` = 1 must lie in (0, 1)");
        let e = (bhyt.build)(&SlotOptions { lambda: Some(0.0), ..Default::default() }).unwrap_err().to_string();
        assert_eq!(e, "`lambda` = 0 must be > 0");
        let rms = find("rmsnorm").unwrap();
        assert!((rms.build)(&SlotOptions { shift: Some(true), ..Default::default() }).is_err());
        assert!((rms.build)(&SlotOptions { shift: Some(false), ..Default::default() }).is_ok());
    }
}
