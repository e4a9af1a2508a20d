//! How a forward computes, never what it computes: the run-wide settings that every module of
//! one model reads from one place (the model's [`super::transformer::ModelMeta`]), handed down
//! each forward.

use super::attention::SCORES_LIMIT;
use super::transformer::{GPU_LIMIT, LOGITS_LIMIT};
use crate::kernels::{Kernels, Precision};
use burn::backend::DispatchDevice;
use burn::tensor::Device;

/// The run-wide settings of a forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compute {
    /// Fused kernels or the composite reference (`model.kernels`).
    pub kernels: Kernels,
    /// The matmuls' and activations' type (`train.precision`).
    pub precision: Precision,
    /// The most logits one micro-batch materialises whole ([`LOGITS_LIMIT`]).
    pub logits_limit: usize,
    /// The most attention scores one sublayer materialises whole ([`SCORES_LIMIT`]).
    pub scores_limit: usize,
}

impl Compute {
    /// `kernels` in f32 with the memory limits of `device`: [`GPU_LIMIT`] for both on a GPU
    /// (under every Vulkan driver's storage-buffer binding range), the CPU limits otherwise.
    pub fn for_device(kernels: Kernels, device: &Device) -> Self {
        let gpu = !matches!(device.clone().inner().as_dispatch(), DispatchDevice::Flex(_));
        let (logits_limit, scores_limit) = if gpu { (GPU_LIMIT, GPU_LIMIT) } else { (LOGITS_LIMIT, SCORES_LIMIT) };
        Self { kernels, precision: Precision::F32, logits_limit, scores_limit }
    }
}
