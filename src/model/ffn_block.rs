//! A sublayer's feed-forward function `F_l`: a dense block of the kinds in
//! [`super::ffn_kinds`], or a mixture of experts of that kind ([`super::moe`], `[model.moe]`).

use super::compute::Compute;
use super::ffn::FeedForward;
use super::moe::Moe;
use super::moe_balance::RouterRecord;
use burn::module::Module;
use burn::tensor::Tensor;
use std::cell::RefCell;

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
    /// `[B, T, d]` → `[B, T, d]`; a MoE block appends its routing to `record` when given.
    pub fn forward(&self, x: Tensor<3>, c: &Compute, record: Option<&RefCell<Vec<RouterRecord>>>) -> Tensor<3> {
        match self {
            Ffn::Dense(f) => f.forward(x, c),
            Ffn::Moe(m) => m.forward(x, c, record),
        }
    }
}
