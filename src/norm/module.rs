//! [`Norm`]: the module that owns a norm slot's parameters.

use super::{
    BhytDenominator, NormKind, bhyt_rms_denominator, bhyt_star, bhyt_std_denominator, bhyt_with_variance, dyt, kappa,
    layer_norm, rms_norm,
};
use crate::init::{Init, ParamBuilder};
use crate::kernels::{self, Denominator, Kernels, TanhNorm};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// One norm slot. Parameters are named `gain` (γ or γ′), `shift` (β or β′), and `alpha` (DyT)
/// or `lambda` (BHyT) for the learnable scalar.
#[derive(Module, Debug)]
pub struct Norm {
    pub gain: Option<Param<Tensor<1>>>,
    pub shift: Option<Param<Tensor<1>>>,
    pub alpha: Option<Param<Tensor<1>>>,
    pub lambda: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub kind: NormKind,
    /// Whether the norm uses its fused kernel (see [`crate::kernels`]).
    #[module(skip)]
    pub kernels: Kernels,
}

impl Norm {
    /// Creates the slot's parameters with the paper initialisations: gains 1, shifts 0, DyT α
    /// and BHyT λ at their configured initial values.
    pub fn new(kind: NormKind, d: usize, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let vec = |b: &mut ParamBuilder<'_>, name: &str, len: usize, init: Init| {
            b.vector(&format!("{prefix}.{name}"), len, init).map(Some)
        };
        let none = || Ok::<_, anyhow::Error>(None);
        let (gain, shift, alpha, lambda) = match &kind {
            NormKind::LayerNorm { gain, shift, .. } => (
                if *gain { vec(b, "gain", d, Init::Ones)? } else { none()? },
                if *shift { vec(b, "shift", d, Init::Zeros)? } else { none()? },
                None,
                None,
            ),
            NormKind::RmsNorm { gain, .. } => {
                (if *gain { vec(b, "gain", d, Init::Ones)? } else { none()? }, None, None, None)
            }
            NormKind::ScalarLayerNorm { shift, .. } => (
                vec(b, "gain", 1, Init::Ones)?,
                if *shift { vec(b, "shift", 1, Init::Zeros)? } else { none()? },
                None,
                None,
            ),
            NormKind::ScalarRmsNorm { .. } => (vec(b, "gain", 1, Init::Ones)?, None, None, None),
            NormKind::Dyt { alpha } => (
                vec(b, "gain", d, Init::Ones)?,
                vec(b, "shift", d, Init::Zeros)?,
                vec(b, "alpha", 1, Init::Constant(*alpha))?,
                None,
            ),
            NormKind::BhytStar { lambda, .. } | NormKind::Bhyt { lambda, .. } => {
                (vec(b, "gain", d, Init::Ones)?, None, None, vec(b, "lambda", 1, Init::Constant(*lambda))?)
            }
        };
        Ok(Self { gain, shift, alpha, lambda, kind, kernels: Kernels::default() })
    }

    fn gain_val(&self) -> Option<Tensor<1>> {
        self.gain.as_ref().map(Param::val)
    }

    fn shift_val(&self) -> Option<Tensor<1>> {
        self.shift.as_ref().map(Param::val)
    }

    /// The learnable BHyT λ, `[1]`.
    pub fn lambda_val(&self) -> Option<Tensor<1>> {
        self.lambda.as_ref().map(Param::val)
    }

    /// Applies the norm over the last axis. For [`NormKind::Bhyt`] this is the exact form
    /// (Algorithm 1 lines 3–5); use [`Norm::forward_with_variance`] to supply an approximation.
    /// A half-precision input is normalised in f32 (its statistics need the range), and the
    /// output is f32.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let x = kernels::widen(x);
        match &self.kind {
            NormKind::LayerNorm { eps, .. } | NormKind::ScalarLayerNorm { eps, .. } => {
                if self.kernels.fuse(&x) {
                    kernels::norm_affine(x, self.gain_val(), self.shift_val(), *eps, true)
                } else {
                    layer_norm(x, self.gain_val(), self.shift_val(), *eps)
                }
            }
            NormKind::RmsNorm { eps, .. } | NormKind::ScalarRmsNorm { eps } => {
                if self.kernels.fuse(&x) {
                    kernels::norm_affine(x, self.gain_val(), None, *eps, false)
                } else {
                    rms_norm(x, self.gain_val(), *eps)
                }
            }
            NormKind::Dyt { .. } => {
                let alpha = self.alpha.as_ref().expect("DyT has α").val();
                if self.kernels.fuse(&x) {
                    let n = TanhNorm { denominator: Denominator::One, kappa: 1.0, eps: 0.0 };
                    return kernels::tanh_norm(x, alpha, self.gain_val(), self.shift_val(), None, n);
                }
                dyt(x, alpha, self.gain_val(), self.shift_val())
            }
            NormKind::BhytStar { p, denominator, eps, .. } if self.kernels.fuse(&x) => {
                let denominator = match denominator {
                    BhytDenominator::Std => Denominator::Std,
                    BhytDenominator::Rms => Denominator::Rms,
                };
                let n = TanhNorm { denominator, kappa: kappa(*p), eps: *eps };
                kernels::tanh_norm(x, self.lambda_val().expect("BHyT has λ"), self.gain_val(), None, None, n)
            }
            NormKind::Bhyt { p, eps, .. } if self.kernels.fuse(&x) => {
                // The exact second moment: Algorithm 1 line 3, κ √(mean(x²) + ε).
                let n = TanhNorm { denominator: Denominator::Rms, kappa: kappa(*p), eps: *eps };
                kernels::tanh_norm(x, self.lambda_val().expect("BHyT has λ"), self.gain_val(), None, None, n)
            }
            NormKind::BhytStar { p, denominator, eps, .. } => {
                let k = kappa(*p);
                let denom = match denominator {
                    BhytDenominator::Std => bhyt_std_denominator(x.clone(), k, *eps),
                    BhytDenominator::Rms => bhyt_rms_denominator(x.clone(), k, *eps),
                };
                bhyt_star(x, self.lambda_val().expect("BHyT has λ"), self.gain_val(), denom)
            }
            NormKind::Bhyt { .. } => {
                let variance = x.clone().square().mean_dim(D - 1);
                self.forward_with_variance(x, variance)
            }
        }
    }

    /// This norm of the residual sum `a·x + c·b` (`[a, c]` = `scales`) in one fused pass, when
    /// the fused kernels apply to both terms and the norm is a LayerNorm or RMSNorm (vector or
    /// scalar); `None` otherwise, and the caller forms the sum and calls [`Norm::forward`].
    pub fn forward_sum<const D: usize>(&self, x: &Tensor<D>, b: &Tensor<D>, scales: [f64; 2]) -> Option<Tensor<D>> {
        if !(self.kernels.fuse(x) && self.kernels.fuse(b)) || x.dtype() != b.dtype() {
            return None;
        }
        let (x, b) = (x.clone(), b.clone());
        match &self.kind {
            NormKind::LayerNorm { eps, .. } | NormKind::ScalarLayerNorm { eps, .. } => {
                Some(kernels::add_norm(x, b, scales, self.gain_val(), self.shift_val(), *eps, true))
            }
            NormKind::RmsNorm { eps, .. } | NormKind::ScalarRmsNorm { eps } => {
                Some(kernels::add_norm(x, b, scales, self.gain_val(), None, *eps, false))
            }
            _ => None,
        }
    }

    /// BHyT with a given per-token variance `[..., 1]` (Algorithm 1 lines 7–9).
    pub fn forward_with_variance<const D: usize>(&self, x: Tensor<D>, variance: Tensor<D>) -> Tensor<D> {
        let NormKind::Bhyt { p, eps, .. } = &self.kind else {
            panic!("forward_with_variance is only defined for BHyT, not {:?}", self.kind)
        };
        let lambda = self.lambda_val().expect("BHyT has λ");
        let (x, variance) = (kernels::widen(x), kernels::widen(variance));
        if self.kernels.fuse(&x) {
            let n = TanhNorm { denominator: Denominator::Given, kappa: kappa(*p), eps: *eps };
            return kernels::tanh_norm(x, lambda, self.gain_val(), None, Some(variance), n);
        }
        bhyt_with_variance(x, variance, lambda, self.gain_val(), kappa(*p), *eps)
    }
}
