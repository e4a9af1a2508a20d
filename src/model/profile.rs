//! Admin's profiling pass (Liu et al., 2020, "Understanding the Difficulty of Training
//! Transformers"; the authors' Transformer-Clinic, `--init-type adaptive-profiling`): before
//! training, one forward sets each skip gate ω from the variances it meets, so that every
//! sublayer's skip carries the output change of all the sublayers before it:
//!
//! ```text
//! ω_1 = 1,   ω_{l+1} = √( Var(ω_l ⊙ X_l) + Var(F_l(X_l)) )
//! ```
//!
//! Var over every element of the batch (numpy's `var` of the flattened tensor, as the authors'
//! code), `X_l` the sublayer's input and `F_l(X_l)` its branch output, with `ω_1 … ω_l` already
//! set when sublayer `l` runs.

use crate::kernels::Kernels;
use crate::model::base::context::ForwardContext;
use crate::model::sublayer::Sublayer;
use crate::model::transformer::Transformer;
use burn::tensor::{Int, Tensor};

impl Transformer {
    /// Sets every profiled skip gate (`gate.profile`) by Admin's pass on `tokens` `[B, T]`;
    /// the model's other parameters are unchanged. Returns the ω's it set, in sublayer order.
    pub fn profile_skip_gates(mut self, tokens: Tensor<2, Int>) -> (Self, Vec<f64>) {
        let t = tokens.dims()[1];
        let ctx = ForwardContext::new(t, self.meta.rope, self.meta.compute, &tokens.device());
        let mut x = self.embed(tokens);
        let x0 = x.clone();
        let (mut ratio, mut set) = (1.0, Vec::new());
        for layer in &mut self.layers {
            x = layer.mix_x0(x, &x0);
            let k = ctx.compute.kernels;
            x = profile_one(&mut layer.attn, x, &mut ratio, &mut set, k, |f, h| f.forward(h, &ctx, None));
            x = profile_one(&mut layer.ffn, x, &mut ratio, &mut set, k, |f, h| f.forward(h, &ctx));
        }
        (self, set)
    }
}

/// One sublayer of the pass: sets its gate to the running ratio when profiled, runs it, and
/// updates the ratio; returns the sublayer's output.
fn profile_one<F>(
    s: &mut Sublayer<F>,
    x: Tensor<3>,
    ratio: &mut f64,
    set: &mut Vec<f64>,
    kernels: Kernels,
    f: impl FnOnce(&F, Tensor<3>) -> Tensor<3>,
) -> Tensor<3> {
    let profiled = s.gating.is_some_and(|g| g.profile);
    if profiled {
        let r = *ratio;
        s.gate = s.gate.take().map(|p| p.map(|g| g.zeros_like().add_scalar(r)));
        set.push(r);
    }
    let input = x.clone();
    let out = s.forward(x, None, f, None, false, kernels);
    if profiled {
        let skip = input * *ratio;
        *ratio = (variance(skip) + variance(out.branch.clone())).sqrt();
    }
    out.next
}

/// The population variance of every element.
fn variance(x: Tensor<3>) -> f64 {
    let mean = f64::from(x.clone().mean().into_scalar::<f32>());
    let square = f64::from(x.square().mean().into_scalar::<f32>());
    square - mean * mean
}
