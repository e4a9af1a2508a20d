//! The two ways a norm's forward reads its parameters: an optional parameter's value, and a
//! per-feature or scalar parameter broadcast against the input.

use burn::module::Param;
use burn::tensor::Tensor;

/// Broadcasts a per-feature (`[d]`) or scalar (`[1]`) parameter against a `D`-rank input whose
/// last axis is the feature axis.
pub(crate) fn broadcast<const D: usize>(param: Tensor<1>) -> Tensor<D> {
    param.unsqueeze::<D>()
}

/// A parameter's value, when the slot has it.
pub(crate) fn value(p: &Option<Param<Tensor<1>>>) -> Option<Tensor<1>> {
    p.as_ref().map(Param::val)
}
