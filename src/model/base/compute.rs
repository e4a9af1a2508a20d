//! How a forward computes, never what it computes: the run-wide settings that every module of
//! one model reads from one place (the model's [`crate::model::transformer::ModelMeta`]), handed down
//! each forward.

use crate::kernels::{Kernels, Precision};
use burn::backend::DispatchDevice;
use burn::tensor::Device;

/// Logits beyond this many values per micro-batch (2²⁶: 256 MiB in f32) are never
/// materialised whole: the loss runs over chunks of `2²⁶ / V` tokens. Every CPU study stays
/// below it (and so unchunked); KiteNorm's Table-1 micro-batch, 32 × 2048
/// tokens × 50257, is 51× above.
pub const LOGITS_LIMIT: usize = 1 << 26;

/// Both limits on GPU devices (2²⁴ values: 64 MiB in f32), under every Vulkan driver's storage
/// buffer binding range (lavapipe's is 128 MiB; NVIDIA's 4 GiB).
pub const GPU_LIMIT: usize = 1 << 24;

/// Attention scores beyond this many values (2²⁶: 256 MiB in f32) are never materialised
/// whole. Every CPU study stays below it; KiteNorm's Table-1 micro-batch, 32 × 8 heads ×
/// 2048², is 16× above (4 GiB in f32: over wgpu's buffer limit).
pub const SCORES_LIMIT: usize = 1 << 26;

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
