//! The one sublayer equation every recipe instantiates (KiteNorm D.2, eq. 23):
//!
//! ```text
//! z_l     = a · X_l + c · N_out( F_l( s · N_in(X_l) ) )
//! X_{l+1} = N_outer(z_l)
//! ```
//!
//! post: `N_outer = LN`; pre: `N_in = LN`; peri: `N_in = N_out = LN`; KEEL / KiteNorm:
//! `N_in = N_outer = LN` with skip / residual scales; LNS: `s = k^{-1/2}` (see
//! [`crate::recipe::presets`] for every preset).
//!
//! Extensions: a learnable gate `g` (used as `stored · factor`, nGPT's scaled parametrisation)
//! - on the residual branch (ReZero, SkipInit: a scalar α; LayerScale: `diag(λ)`),
//!   `z_l = a·X_l + c·(g ⊙ N_out(F_l(s·N_in(X_l))))`;
//! - on the skip (Admin's ω), `z_l = a·(g ⊙ X_l) + c·N_out(F_l(s·N_in(X_l)))`;
//! - as the step of a normalised update (nGPT's eigen learning rate α), with `X̂ = N_outer(X_l)`:
//!   `z_l = X̂ + |g| ⊙ (N_out(F_l(s·N_in(X_l))) − X̂)`, i.e. `a = 1 − |g|`, `c = |g|` on the
//!   renormalised stream.
//!
//! Without a gate `g = 1` and the equation is the one above.

use super::names::child;
use crate::init::Init;
use crate::init::ParamBuilder;
use crate::kernels::{Kernels, widen};
use crate::norm::{Norm, NormKind};
use crate::recipe::SublayerPlan;
use crate::recipe::{Gate, GateOn, GateOwner, GateShape};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// The runtime scales of one sublayer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scales {
    /// `a`, skip branch.
    pub skip: f64,
    /// `c`, residual branch.
    pub residual: f64,
    /// `s`, after the input norm.
    pub input: f64,
}

/// One sublayer: its norms, scales and branch function `f` (attention or feed-forward).
#[derive(Module, Debug)]
pub struct Sublayer<F> {
    pub input_norm: Option<Norm>,
    pub output_norm: Option<Norm>,
    pub outer_norm: Option<Norm>,
    /// The learnable gate `g` (`[1]` or `[d]`) when this sublayer owns one; a gate shared by a
    /// layer's two sublayers (ReZero) lives in the [`super::layer::Layer`].
    pub gate: Option<Param<Tensor<1>>>,
    pub f: F,
    #[module(skip)]
    pub scales: Scales,
    /// How the gate acts (its own or the layer's), when the sublayer has one.
    #[module(skip)]
    pub gating: Option<Gate>,
}

/// What a sublayer produces: `X_{l+1}`, and for the probes and the regulariser the sum `z_l`
/// (before any outer norm; `None` when it was not asked for and the outer norm formed it
/// inside its fused pass) and the scaled-in branch output `N_out(F_l(·))`.
pub struct SublayerOut {
    pub next: Tensor<3>,
    pub sum: Option<Tensor<3>>,
    pub branch: Tensor<3>,
}

/// Multiplies by a constant, skipping the pass when it is exactly 1.
fn scaled(x: Tensor<3>, s: f64) -> Tensor<3> {
    if s == 1.0 { x } else { x * s }
}

/// A norm slot applied exactly: the norm when the slot has one, the identity when it is empty.
pub fn maybe_norm(norm: &Option<Norm>, x: Tensor<3>, k: Kernels) -> Tensor<3> {
    match norm {
        Some(n) => n.forward(x, k),
        None => x,
    }
}

impl<F> Sublayer<F> {
    pub fn new(plan: &SublayerPlan, d: usize, f: F, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let norm = |b: &mut ParamBuilder<'_>, kind: &Option<NormKind>, name: &str| -> anyhow::Result<Option<Norm>> {
            kind.clone().map(|k| Norm::new(k, d, b, &child(prefix, name))).transpose()
        };
        Ok(Self {
            input_norm: norm(b, &plan.input, "input_norm")?,
            output_norm: norm(b, &plan.output, "output_norm")?,
            outer_norm: norm(b, &plan.outer, "outer_norm")?,
            gate: plan.gate.filter(|g| g.per == GateOwner::Sublayer).map(|g| gate(g, d, b, prefix)).transpose()?,
            f,
            scales: Scales { skip: plan.skip, residual: plan.residual, input: plan.input_scale },
            gating: plan.gate,
        })
    }

    /// `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))`.
    ///
    /// `n_in` applies the input norm slot: [`maybe_norm`] computes its statistics exactly;
    /// BHyT's FFN norm supplies an approximated one instead (see [`super::bhyt`]). `keep_sum`:
    /// return `z_l` (the probes or the regulariser read it). `k`: the output and outer norms'
    /// kernels.
    /// `shared_gate`: the layer's gate when the layer owns it (ReZero).
    pub fn forward(
        &self,
        mut x: Tensor<3>,
        k: Kernels,
        n_in: impl FnOnce(&Option<Norm>, Tensor<3>) -> Tensor<3>,
        f: impl FnOnce(&F, Tensor<3>) -> Tensor<3>,
        shared_gate: Option<Tensor<1>>,
        keep_sum: bool,
    ) -> SublayerOut {
        // A half-precision branch output joins the f32 residual stream here (and N_out, if any,
        // normalises it in f32).
        let f_out = widen(f(&self.f, scaled(n_in(&self.input_norm, x.clone()), self.scales.input)));
        let mut branch = maybe_norm(&self.output_norm, f_out, k);
        let gate = self.gate.as_ref().map(Param::val).or(shared_gate);
        if let (Some(plan), Some(g)) = (self.gating, gate) {
            let g = if plan.factor == 1.0 { g } else { g * plan.factor }.unsqueeze::<3>();
            match plan.on {
                GateOn::Branch => branch = branch * g,
                GateOn::Skip => x = x * g,
                GateOn::Interpolate => return self.interpolate(x, branch, g.abs(), k),
            }
        }
        let Scales { skip, residual, .. } = self.scales;
        // The outer norm forms the sum itself, in the same pass, when nobody reads the sum.
        let fused = self
            .outer_norm
            .as_ref()
            .filter(|_| !keep_sum)
            .and_then(|n| n.forward_sum(&x, &branch, [skip, residual], k));
        if let Some(next) = fused {
            return SublayerOut { next, sum: None, branch };
        }
        let sum = scaled(x, skip) + scaled(branch.clone(), residual);
        let next = maybe_norm(&self.outer_norm, sum.clone(), k);
        SublayerOut { next, sum: Some(sum), branch }
    }

    /// nGPT's update: `X̂ = N_outer(x)`, `z = X̂ + α ⊙ (branch − X̂)`, `X_{l+1} = N_outer(z)`.
    fn interpolate(&self, x: Tensor<3>, branch: Tensor<3>, alpha: Tensor<3>, k: Kernels) -> SublayerOut {
        // The stream is already unit-norm when N_outer is; nGPT's reference renormalises it
        // anyway, which also fixes the gradient's radial part.
        let x_hat = maybe_norm(&self.outer_norm, x, k);
        let sum = x_hat.clone() + (branch.clone() - x_hat) * alpha;
        let next = maybe_norm(&self.outer_norm, sum.clone(), k);
        SublayerOut { next, sum: Some(sum), branch }
    }

    /// The input norm when its kind takes an approximated variance (BHyT, RMSNorm-Approx).
    pub fn approximating_input(&self) -> Option<&Norm> {
        self.input_norm.as_ref().filter(|n| n.approximates())
    }
}

/// A gate parameter `{prefix}.gate` of `g`'s shape (`[1]` or `[d]`) at its initial value.
pub fn gate(g: Gate, d: usize, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Param<Tensor<1>>> {
    let len = if g.shape == GateShape::Channel { d } else { 1 };
    b.vector(&child(prefix, super::names::GATE), len, Init::Constant(g.stored))
}
