//! [`Norm`]: one norm slot, one variant per kind, each holding exactly its own parameters.

use super::{
    Bhyt, BhytDenominator, Derf, Dyt, LayerNorm, NormKind, RmsNorm, SeeDNorm, TaperNorm, ZeroCentredRmsNorm, kappa,
};
use crate::init::{Init, ParamBuilder};
use crate::kernels::{self, Kernels};
use burn::module::Module;
use burn::tensor::Tensor;

/// One norm slot, built from a resolved [`NormKind`] with the paper initialisations (gains 1,
/// shifts 0, DyT's α and BHyT's λ at their configured values). The variant name is not part of
/// a parameter's name: they stay `gain`, `shift`, `alpha`, `lambda` under the slot's prefix
/// (see [`crate::model::base::params`]).
///
/// # Shapes
/// - input and output: `[..., d]`, normalised over the last axis
#[derive(Module, Debug)]
pub enum Norm {
    /// `γ ⊙ (x − μ)/√(σ² + ε) + β`, `γ, β ∈ ℝ^d`.
    LayerNorm(LayerNorm),
    /// KiteNorm eq. 4: `γ′ (x − μ)/√(σ² + ε) + β′`, `γ′, β′ ∈ ℝ`.
    ScalarLayerNorm(LayerNorm),
    /// `γ ⊙ x/√(mean(x²) + ε)`, `γ ∈ ℝ^d`.
    RmsNorm(RmsNorm),
    /// `γ′ x/√(mean(x²) + ε)`, `γ′ ∈ ℝ`.
    ScalarRmsNorm(RmsNorm),
    /// `γ ⊙ tanh(α x) + β`.
    Dyt(Dyt),
    /// The BHyT paper's eq. 1, exact statistics.
    BhytStar(Bhyt),
    /// The BHyT paper's Algorithm 1.
    Bhyt(Bhyt),
    /// RMSNorm-Approx (the BHyT paper's Table 5): `γ ⊙ x/√(mean(x²) + ε)` alone; in a block's FFN-input
    /// slot `γ ⊙ x/√(ŝ² + ε)` with the approximated `ŝ²` (see [`RmsNorm::forward_with_variance`]).
    RmsNormApprox(RmsNorm),
    /// `(1 + γ) ⊙ (x − μ)/√(σ² + ε) + β`, `γ, β ∈ ℝ^d`, γ stored zero-centred (Megatron-LM).
    LayerNorm1p(LayerNorm),
    /// `γ ⊙ erf(α x + s) + β`.
    Derf(Derf),
    /// `x/‖x‖`: held as a weightless RMSNorm with ε = 0, since `x/‖x‖ = (x/√mean(x²))/√d`.
    L2(RmsNorm),
    /// `[tanh(x·βᵀ)·α + γ] ⊙ x/√(mean(x²) + ε)`.
    SeeDNorm(SeeDNorm),
    /// `(1 + γ) ⊙ x/√(mean(x²) + ε)`, γ stored zero-centred and decayed (Qwen3-Next).
    ZcRms(ZeroCentredRmsNorm),
    /// `g · γ ⊙ x/√(mean(x²) + ε) + (1 − g) · c · γ̃ ⊙ x` (TaperNorm).
    TaperNorm(TaperNorm),
}

/// `x/√mean(x²)` → `x/‖x‖`: divides by `√d`, `d` the last axis.
fn unit_l2<const D: usize>(rms_normed: Tensor<D>) -> Tensor<D> {
    let d = rms_normed.dims()[D - 1];
    rms_normed / (d as f64).sqrt()
}

/// A norm slot applied exactly: the norm when the slot has one, the identity when it is empty.
pub fn maybe_norm<const D: usize>(norm: &Option<Norm>, x: Tensor<D>, k: Kernels) -> Tensor<D> {
    match norm {
        Some(n) => n.forward(x, k),
        None => x,
    }
}

/// An input norm slot given the block's statistic (BHyT, RMSNorm-Approx): the kinds that take
/// one use it, every other slot computes its own exactly.
pub fn input_norm<const D: usize>(
    norm: &Option<Norm>,
    x: Tensor<D>,
    variance: Option<Tensor<D>>,
    k: Kernels,
) -> Tensor<D> {
    if let (Some(n), Some(v)) = (norm, variance)
        && let Some(y) = n.forward_with_variance(x.clone(), v, k)
    {
        return y;
    }
    maybe_norm(norm, x, k)
}

impl Norm {
    /// Creates the slot `kind` of width `d`, its parameters named `{prefix}.gain` and so on.
    pub fn new(kind: NormKind, d: usize, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        if kind.is_pointwise() {
            return Self::pointwise(kind, d, b, prefix);
        }
        let mut param = |name: &str, len: usize, init: Init| b.vector(&format!("{prefix}.{name}"), len, init);
        Ok(match kind {
            NormKind::LayerNorm { gain, shift, eps } => Norm::LayerNorm(LayerNorm {
                gain: gain.then(|| param("gain", d, Init::Ones)).transpose()?,
                shift: shift.then(|| param("shift", d, Init::Zeros)).transpose()?,
                eps,
            }),
            NormKind::ScalarLayerNorm { shift, eps } => Norm::ScalarLayerNorm(LayerNorm {
                gain: Some(param("gain", 1, Init::Ones)?),
                shift: shift.then(|| param("shift", 1, Init::Zeros)).transpose()?,
                eps,
            }),
            NormKind::RmsNorm { gain, eps } => {
                Norm::RmsNorm(RmsNorm { gain: gain.then(|| param("gain", d, Init::Ones)).transpose()?, eps })
            }
            NormKind::ScalarRmsNorm { eps } => {
                Norm::ScalarRmsNorm(RmsNorm { gain: Some(param("gain", 1, Init::Ones)?), eps })
            }
            NormKind::RmsNormApprox { gain, eps } => {
                Norm::RmsNormApprox(RmsNorm { gain: gain.then(|| param("gain", d, Init::Ones)).transpose()?, eps })
            }
            NormKind::LayerNorm1p { shift, eps } => Norm::LayerNorm1p(LayerNorm {
                gain: Some(param("gain", d, Init::Zeros)?),
                shift: shift.then(|| param("shift", d, Init::Zeros)).transpose()?,
                eps,
            }),
            NormKind::L2 => Norm::L2(RmsNorm { gain: None, eps: 0.0 }),
            NormKind::ZcRms { eps } => {
                Norm::ZcRms(ZeroCentredRmsNorm { centred_gain: param(super::CENTRED_GAIN, d, Init::Zeros)?, eps })
            }
            NormKind::SeeDNorm { alpha, beta, eps } => Norm::SeeDNorm(SeeDNorm {
                gain: param("gain", d, Init::Ones)?,
                alpha: param("alpha", d, Init::Constant(alpha))?,
                beta: param("beta", d, Init::Constant(beta))?,
                eps,
            }),
            NormKind::TaperNorm { eps } => Self::taper(eps, d, b, prefix)?,
            NormKind::Dyt { .. } | NormKind::BhytStar { .. } | NormKind::Bhyt { .. } | NormKind::Derf { .. } => {
                anyhow::bail!("{kind:?} is built by Norm::pointwise")
            }
        })
    }

    /// TaperNorm's gains (1) and buffers: the gate and the scale at 1, the averages at 0, none
    /// of them taking a gradient.
    fn taper(eps: f64, d: usize, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let mut param = |name: &str, len: usize, init: Init| b.vector(&format!("{prefix}.{name}"), len, init);
        let gain = param("gain", d, Init::Ones)?;
        let taper_gain = param("taper_gain", d, Init::Ones)?;
        let [gate, scale, scaled, energy] = super::TAPER_BUFFERS;
        let mut buffer = |name: &str, init: Init| param(name, 1, init).map(|p| p.set_require_grad(false));
        Ok(Norm::TaperNorm(TaperNorm {
            gain,
            taper_gain,
            taper_gate: buffer(gate, Init::Ones)?,
            taper_scale: buffer(scale, Init::Ones)?,
            taper_ema_scaled: buffer(scaled, Init::Zeros)?,
            taper_ema_energy: buffer(energy, Init::Zeros)?,
            eps,
        }))
    }

    /// The kinds built around a bounded function (tanh, erf) with their learnable scalars.
    fn pointwise(kind: NormKind, d: usize, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let mut param = |name: &str, len: usize, init: Init| b.vector(&format!("{prefix}.{name}"), len, init);
        Ok(match kind {
            NormKind::Dyt { alpha } => Norm::Dyt(Dyt {
                gain: param("gain", d, Init::Ones)?,
                shift: param("shift", d, Init::Zeros)?,
                alpha: param("alpha", 1, Init::Constant(alpha))?,
            }),
            NormKind::BhytStar { lambda, p, denominator, eps } => Norm::BhytStar(Bhyt {
                gain: param("gain", d, Init::Ones)?,
                lambda: param("lambda", 1, Init::Constant(lambda))?,
                kappa: kappa(p),
                eps,
                denominator,
            }),
            NormKind::Derf { alpha, offset } => Norm::Derf(Derf {
                gain: param("gain", d, Init::Ones)?,
                shift: param("shift", d, Init::Zeros)?,
                alpha: param("alpha", 1, Init::Constant(alpha))?,
                offset: param("offset", 1, Init::Constant(offset))?,
            }),
            NormKind::Bhyt { lambda, p, eps } => Norm::Bhyt(Bhyt {
                gain: param("gain", d, Init::Ones)?,
                lambda: param("lambda", 1, Init::Constant(lambda))?,
                kappa: kappa(p),
                eps,
                // Algorithm 1 line 3: the second moment.
                denominator: BhytDenominator::Rms,
            }),
            other => anyhow::bail!("{other:?} is not a pointwise norm"),
        })
    }

    /// Applies the norm over the last axis, by the fused kernels where `k` fuses (BHyT in its
    /// exact form; see [`Bhyt::forward_with_variance`]). A half-precision input is normalised
    /// in f32 (its statistics need the range), and the output is f32.
    pub fn forward<const D: usize>(&self, x: Tensor<D>, k: Kernels) -> Tensor<D> {
        let x = kernels::widen(x);
        match self {
            Norm::LayerNorm(n) | Norm::ScalarLayerNorm(n) => n.forward(x, k),
            Norm::RmsNorm(n) | Norm::ScalarRmsNorm(n) | Norm::RmsNormApprox(n) => n.forward(x, k),
            Norm::Dyt(n) => n.forward(x, k),
            Norm::BhytStar(n) | Norm::Bhyt(n) => n.forward(x, k),
            Norm::LayerNorm1p(n) => n.forward_1p(x, k),
            Norm::Derf(n) => n.forward(x),
            Norm::L2(n) => unit_l2(n.forward(x, k)),
            Norm::SeeDNorm(n) => n.forward(x),
            Norm::ZcRms(n) => n.forward(x, k),
            Norm::TaperNorm(n) => n.forward(x, k),
        }
    }

    /// This norm of the residual sum `a·x + c·b` (`[a, c]` = `scales`) in one fused pass, when
    /// `k` fuses on both terms and the norm is a LayerNorm or RMSNorm (vector or scalar);
    /// `None` otherwise, and the caller forms the sum and calls [`Norm::forward`].
    pub fn forward_sum<const D: usize>(
        &self,
        x: &Tensor<D>,
        b: &Tensor<D>,
        scales: [f64; 2],
        k: Kernels,
    ) -> Option<Tensor<D>> {
        if !(k.fuse(x) && k.fuse(b)) || x.dtype() != b.dtype() {
            return None;
        }
        let (x, b) = (x.clone(), b.clone());
        match self {
            Norm::LayerNorm(n) | Norm::ScalarLayerNorm(n) => Some(n.forward_sum(x, b, scales)),
            Norm::RmsNorm(n) | Norm::ScalarRmsNorm(n) | Norm::RmsNormApprox(n) => Some(n.forward_sum(x, b, scales)),
            Norm::L2(n) => Some(unit_l2(n.forward_sum(x, b, scales))),
            Norm::ZcRms(n) => Some(n.forward_sum(x, b, scales)),
            Norm::Dyt(_) | Norm::BhytStar(_) | Norm::Bhyt(_) | Norm::LayerNorm1p(_) | Norm::Derf(_) => None,
            Norm::SeeDNorm(_) | Norm::TaperNorm(_) => None,
        }
    }

    /// The slot as TaperNorm.
    pub fn as_taper(&self) -> Option<&TaperNorm> {
        match self {
            Norm::TaperNorm(n) => Some(n),
            _ => None,
        }
    }

    /// The slot as BHyT (Algorithm 1), the kind whose FFN norm takes an approximated variance.
    pub fn as_bhyt(&self) -> Option<&Bhyt> {
        match self {
            Norm::Bhyt(n) => Some(n),
            _ => None,
        }
    }

    /// Whether this kind's FFN-input slot takes the block's approximated variance (BHyT,
    /// RMSNorm-Approx).
    pub fn approximates(&self) -> bool {
        matches!(self, Norm::Bhyt(_) | Norm::RmsNormApprox(_))
    }

    /// This norm with a given per-token variance `[..., 1]` in place of its own statistic, for
    /// the kinds that take one; `None` for the others.
    pub fn forward_with_variance<const D: usize>(
        &self,
        x: Tensor<D>,
        variance: Tensor<D>,
        k: Kernels,
    ) -> Option<Tensor<D>> {
        match self {
            Norm::Bhyt(n) => Some(n.forward_with_variance(x, variance, k)),
            Norm::RmsNormApprox(n) => Some(n.forward_with_variance(x, variance, k)),
            _ => None,
        }
    }
}
