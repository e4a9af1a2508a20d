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
//! - as the step of nGPT's normalized update (its eigen learning rate α): a rule of its own,
//!   [`crate::model::residual::normalized_step`], on the same branch output.
//!
//! Without a gate `g = 1` and the equation is the one above.

use crate::init::Init;
use crate::init::ParamBuilder;
use crate::kernels::{Kernels, widen};
use crate::model::base::names::child;
use crate::model::residual::depth_attention::DepthQuery;
use crate::model::residual::normalized_step::normalized_step;
use crate::model::residual::stream_mix::StreamMix;
use crate::norm::{Norm, NormKind, input_norm, maybe_norm};
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
    /// layer's two sublayers (ReZero) lives in the [`crate::model::layer::Layer`].
    pub gate: Option<Param<Tensor<1>>>,
    /// How the sublayer reads and writes the residual streams, when the state is `n` streams
    /// ([`crate::model::residual::stream_mix`]); it then replaces `a·X + c·(…)` and `N_outer`.
    pub hc: Option<StreamMix>,
    /// Attention Residuals' pseudo-query, when the sublayer reads over depth
    /// ([`crate::model::residual::depth_attention`]); the first sublayer has none.
    pub attn_res: Option<DepthQuery>,
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

/// What a sublayer's step on the streams produces: the next streams, and for the probes the
/// input it read, its branch output and its residual mixing `R`.
pub struct StreamStep {
    pub next: Tensor<4>,
    pub input: Tensor<3>,
    pub branch: Tensor<3>,
    pub residual: Tensor<4>,
}

/// Multiplies by a constant, skipping the pass when it is exactly 1.
fn scaled(x: Tensor<3>, s: f64) -> Tensor<3> {
    if s == 1.0 { x } else { x * s }
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
            hc: None,
            attn_res: None,
            f,
            scales: Scales { skip: plan.skip, residual: plan.residual, input: plan.input_scale },
            gating: plan.gate,
        })
    }

    /// `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))`, or the recipe's own update
    /// rule (nGPT's normalized step, [`crate::model::residual::normalized_step`]) on the same branch output.
    ///
    /// `variance`: the block's statistic for an input norm that takes one (BHyT's and
    /// RMSNorm-Approx's, see [`crate::model::bhyt`]); other input norms measure their own. `f`: the
    /// branch `F_l`. `shared_gate`: the layer's gate when the layer owns it (ReZero).
    /// `keep_sum`: return `z_l` (the probes or the regulariser read it). `k`: the norms'
    /// kernels.
    pub fn forward(
        &self,
        x: Tensor<3>,
        variance: Option<Tensor<3>>,
        f: impl FnOnce(&F, Tensor<3>) -> Tensor<3>,
        shared_gate: Option<Tensor<1>>,
        keep_sum: bool,
        k: Kernels,
    ) -> SublayerOut {
        // branch = N_out(F(s·N_in(X)))
        let branch = self.branch(x.clone(), variance, f, k);
        let gate = self.gate_value(shared_gate);
        match (self.gating.map(|g| g.on), gate) {
            // nGPT, in place of the sum: X̂ = N_outer(X), X_{l+1} = N_outer(X̂ + |α| ⊙ (branch − X̂)).
            (Some(GateOn::Interpolate), Some(alpha)) => {
                let (next, sum) = normalized_step(&self.outer_norm, x, branch.clone(), alpha.abs(), k);
                SublayerOut { next, sum: Some(sum), branch }
            }
            // z = a·X + c·branch (g on the skip or the branch), X_{l+1} = N_outer(z).
            (on, gate) => self.residual_step(x, branch, on.zip(gate), k, keep_sum),
        }
    }

    /// The branch `N_out(F_l(s·N_in(X)))`.
    pub(super) fn branch(
        &self,
        x: Tensor<3>,
        variance: Option<Tensor<3>>,
        f: impl FnOnce(&F, Tensor<3>) -> Tensor<3>,
        k: Kernels,
    ) -> Tensor<3> {
        // s·N_in(X)
        let h = scaled(input_norm(&self.input_norm, x, variance, k), self.scales.input);
        // F(·): a half-precision output joins the f32 residual stream here (and N_out, if any,
        // normalises it in f32).
        let f_out = widen(f(&self.f, h));
        // N_out(·)
        maybe_norm(&self.output_norm, f_out, k)
    }

    /// With `n` residual streams `h` `[B, T, n, d]`: read `x_l`, run the branch on it, write it
    /// back (the streams' own step, [`crate::model::residual::stream_mix`]). Panics without a stream mixing (the
    /// model builds one for every sublayer of a stream recipe).
    pub fn stream_step(&self, h: Tensor<4>, f: impl FnOnce(&F, Tensor<3>) -> Tensor<3>, k: Kernels) -> StreamStep {
        let read = self.hc.as_ref().expect("a stream recipe's sublayer has its mixing").read(h);
        let input = read.input.clone();
        let residual = read.residual.clone();
        let branch = self.branch(input.clone(), None, f, k);
        StreamStep { next: read.write(branch.clone()), input, branch, residual }
    }

    /// The gate `g` `[1, 1, 1]` or `[1, 1, d]` at its used value (`stored · factor`): this
    /// sublayer's, else the layer's shared one.
    fn gate_value(&self, shared_gate: Option<Tensor<1>>) -> Option<Tensor<3>> {
        let g = self.gate.as_ref().map(Param::val).or(shared_gate)?;
        let factor = self.gating.map_or(1.0, |plan| plan.factor);
        Some(if factor == 1.0 { g } else { g * factor }.unsqueeze::<3>())
    }

    /// The residual step `z_l = a·(g ⊙ X_l) + c·(g ⊙ branch)` (the gate on the skip or on the
    /// branch, when there is one), `X_{l+1} = N_outer(z_l)`.
    fn residual_step(
        &self,
        mut x: Tensor<3>,
        mut branch: Tensor<3>,
        gate: Option<(GateOn, Tensor<3>)>,
        k: Kernels,
        keep_sum: bool,
    ) -> SublayerOut {
        match gate {
            Some((GateOn::Skip, g)) => x = x * g,
            Some((_, g)) => branch = branch * g,
            None => {}
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

    /// The input norm when its kind takes an approximated variance (BHyT, RMSNorm-Approx).
    pub fn approximating_input(&self) -> Option<&Norm> {
        self.input_norm.as_ref().filter(|n| n.approximates())
    }
}

/// A gate parameter `{prefix}.gate` of `g`'s shape (`[1]` or `[d]`) at its initial value.
pub fn gate(g: Gate, d: usize, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Param<Tensor<1>>> {
    let len = if g.shape == GateShape::Channel { d } else { 1 };
    b.vector(&child(prefix, crate::model::base::names::GATE), len, Init::Constant(g.stored))
}
