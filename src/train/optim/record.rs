//! Optimizer states in burn's record (`burn::optim::RecordState`), written by hand: burn's
//! derive names paths inside `burn-optim` only.

use burn::optim::{StateSink, StateSource};
use burn::tensor::{Device, Tensor};

pub fn put<const D: usize>(out: &mut StateSink, prefix: &str, leaf: &str, t: &Tensor<D>) {
    out.push_tensor(prefix, leaf, t.clone().into_data());
}

pub fn take<const D: usize>(src: &mut StateSource, prefix: &str, leaf: &str, device: &Device) -> Option<Tensor<D>> {
    Some(Tensor::from_data(src.take_tensor(prefix, leaf)?, device))
}
