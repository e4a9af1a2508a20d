//! A sublayer's feed-forward function `F_l`: a dense block of the kinds in
//! [`crate::model::ffn::kinds`], or a mixture of experts of that kind ([`crate::model::ffn::moe::block`], `[model.moe]`).

use crate::model::base::context::ForwardContext;
use crate::model::ffn::dense::DenseFfn;
use crate::model::ffn::moe::block::Moe;
use burn::module::Module;
use burn::tensor::Tensor;

/// The feed-forward function of one layer. (A layer holds one; burn's `Module` has no `Box`,
/// so the larger variant stays inline.)
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum FfnBlock {
    /// One FFN every token passes through.
    Dense(DenseFfn),
    /// Routed experts (and shared ones).
    Moe(Moe),
}

impl FfnBlock {
    /// `[B, T, d]` → `[B, T, d]`; a MoE block records its routing in `ctx`.
    pub fn forward(&self, x: Tensor<3>, ctx: &ForwardContext) -> Tensor<3> {
        match self {
            FfnBlock::Dense(f) => f.forward(x, &ctx.compute),
            FfnBlock::Moe(m) => m.forward(x, &ctx.compute, &ctx.records),
        }
    }
}
