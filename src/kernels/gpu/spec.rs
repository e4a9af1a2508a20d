//! [`RowNorm`]: which of the module table's norms a GPU kernel computes (see [`super`]).

use crate::kernels::tanh_norm::{Denominator, TanhNorm};

/// The statistic under `D`'s root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Root {
    /// `D = 1` (DyT).
    None,
    /// The row's centred variance σ².
    Variance,
    /// The row's mean square.
    MeanSquare,
    /// A given `v` per row.
    Given,
}

/// One row norm of the module table: `y = γ ⊙ φ(λ (x − m) / D) + β`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowNorm {
    /// `m = μ` (LayerNorm) rather than 0.
    pub centre: bool,
    pub root: Root,
    /// `D` has `+ |μ|` (BHyT*).
    pub abs_mean: bool,
    /// `φ = tanh` rather than the identity.
    pub tanh: bool,
    pub kappa: f64,
    pub eps: f64,
}

impl RowNorm {
    /// LayerNorm (`centred`) or RMSNorm.
    pub fn affine(eps: f64, centred: bool) -> RowNorm {
        let root = if centred { Root::Variance } else { Root::MeanSquare };
        RowNorm { centre: centred, root, abs_mean: false, tanh: false, kappa: 1.0, eps }
    }

    /// RMSNorm with a given second moment per row.
    pub fn given_rms(eps: f64) -> RowNorm {
        RowNorm { centre: false, root: Root::Given, abs_mean: false, tanh: false, kappa: 1.0, eps }
    }

    /// DyT and the BHyT forms.
    pub fn tanh(n: TanhNorm) -> RowNorm {
        let root = match n.denominator {
            Denominator::One => Root::None,
            Denominator::Std => Root::Variance,
            Denominator::Rms => Root::MeanSquare,
            Denominator::Given => Root::Given,
        };
        let abs_mean = n.denominator == Denominator::Std;
        RowNorm { centre: false, root, abs_mean, tanh: true, kappa: n.kappa, eps: n.eps }
    }
}
