//! Which GPU a process takes when several ranks share a node: `wgpu` and `vulkan` mean the
//! node's `index`-th discrete GPU for the rank that is `index`-th there.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The GPU of this process on its node, when it is one of several ranks there (`usize::MAX`:
/// the default device).
static LOCAL_GPU: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Makes `wgpu` and `vulkan` mean the node's `index`-th discrete GPU: each rank of a job on a
/// node takes its own (its index among the node's ranks). `CUBECL_WGPU_DEFAULT_DEVICE`, when
/// set, chooses for every rank instead (e.g. `Cpu`: a software Vulkan device for all).
pub fn set_local_gpu(index: usize) {
    LOCAL_GPU.store(index, Ordering::Relaxed);
}

#[cfg(feature = "wgpu")]
pub(super) fn gpu_kind() -> burn::tensor::DeviceKind {
    match LOCAL_GPU.load(Ordering::Relaxed) {
        i if i != usize::MAX && std::env::var_os("CUBECL_WGPU_DEFAULT_DEVICE").is_none() => {
            burn::tensor::DeviceKind::DiscreteGpu(i)
        }
        _ => burn::tensor::DeviceKind::DefaultDevice,
    }
}
