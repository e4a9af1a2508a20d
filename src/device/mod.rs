//! Devices: backend selection, the GPU's failures as error lines, its stated peak, the CPU's
//! set-up and the machine description. The default build runs on burn's `flex` CPU backend;
//! `--features wgpu`, `--features vulkan` or `--features cuda` add GPU devices.
//!
//! - [`name`]: [`DeviceName`], the device `run.device` names, checked when read, opened once
//! - [`cuda`]: the CUDA driver, asked directly before burn touches it
//! - [`failure`]: a GPU engine's failures as one `error:` line
//! - [`peak`]: stated peaks and model FLOPs utilisation
//! - [`gpu`]: which GPU each rank of a node takes
//! - [`kernel_cache`]: where burn's GPU runtimes keep compiled kernels and autotune results
//! - [`cpu`]: denormals flushed, the global pool, the allocator's thresholds
//! - [`memory`]: peak resident memory
//! - [`machine`]: the [`Machine`] record

mod cpu;
pub mod cuda;
pub mod failure;
mod gpu;
pub mod kernel_cache;
mod machine;
mod memory;
mod name;
pub mod peak;

pub use cpu::{flush_denormals, flush_denormals_here, flushes_denormals, keep_freed_memory, on_pool, pool};
pub use gpu::set_local_gpu;
pub use machine::{Machine, available_threads, machine};
pub use memory::{children_peak_rss_mb, peak_rss_mb, reset_peak_rss};
pub use name::DeviceName;
