//! A sublayer's feed-forward function `F_l`: a dense block of the kinds in
//! [`super::ffn_kinds`], or a mixture of experts of that kind ([`super::moe`], `[model.moe]`).

use super::context::ForwardContext;
use super::ffn::FeedForward;
use super::moe::Moe;
use burn::module::Module;
use burn::tensor::Tensor;

/// The feed-forward function of one layer. (A layer holds one; burn's `Module` has no `Box`,
/// so the larger variant stays inline.)
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Ffn {
    /// One FFN every token passes through.
    Dense(FeedForward),
    /// Routed experts (and shared ones).
    Moe(Moe),
}

impl Ffn {
    /// `[B, T, d]` → `[B, T, d]`; a MoE block records its routing in `ctx`.
    pub fn forward(&self, x: Tensor<3>, ctx: &ForwardContext) -> Tensor<3> {
        match self {
            Ffn::Dense(f) => f.forward(x, &ctx.compute),
            Ffn::Moe(m) => m.forward(x, &ctx.compute, &ctx.records),
        }
    }
}
