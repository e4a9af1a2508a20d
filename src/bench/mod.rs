//! Benchmarks, each a `normlab bench` subcommand writing one JSON file, measured against the
//! reference tool in the same invocation (medians over interleaved rounds where the machine
//! drifts).
//!
//! - [`model`]: the reference model (or KiteNorm's Table-1 model) per recipe, precision and
//!   kernel setting beside its PyTorch twin (`bench/model.json`)
//! - [`step`]: one measurement of a model's train steps and forwards, and of the training loop
//! - [`dims`]: the sizes a benchmark runs at
//! - [`kernel_cache`]: where a benchmark's GPU device keeps its compiled kernels
//! - [`torch`]: the PyTorch twins run in the same invocation
//! - [`gpu`]: the GPU side by side with `torch_gpu.py`
//! - [`curve`]: `pre`'s training losses beside `torch_gpu.py`'s from the same initial weights
//!   (`bench/curve.json`)
//! - [`rounds`]: paired rounds against PyTorch on the CPU
//! - [`gemm`]: each matmul of a train step (`bench/gemm.json`)
//! - [`profile`], [`profile_parts`], [`ceilings`]: where a train step's time goes on a device,
//!   piece by piece against the device's measured ceilings (`bench/profile.json`)
//! - [`allreduce`]: the gradient all-reduce under `mpirun` (`bench/allreduce.json`)
//! - [`serve`], [`serve_load`]: request latency of `normlab serve` under loads
//!   (`bench/serve.json`)
//! - [`data`]: how fast a corpus becomes training tokens (`bench/data.json`)
//! - [`optimizers`]: a train step under each optimizer beside AdamW's (`bench/optimizers.json`)
//! - [`speed`], [`speed_claims`]: the BHyT paper's efficiency protocol (`bench/speed.json`)

pub mod allreduce;
pub mod ceilings;
pub mod curve;
pub mod data;
pub mod dims;
pub mod gemm;
pub mod gpu;
pub mod kernel_cache;
pub mod model;
pub mod optimizers;
pub mod profile;
pub mod profile_parts;
pub mod rounds;
pub mod serve;
pub mod serve_load;
pub mod speed;
pub mod speed_claims;
pub mod step;
pub mod torch;

pub use dims::{Dims, DimsChoice};
pub use kernel_cache::kernel_cache;
pub use model::{BenchOptions, BenchReport, run};
pub use step::{Case, RecipeBench, Timing, TrainerBench, bench_recipe, bench_trainer, bench_trainer_on};
pub use torch::{TorchBench, run_torch, run_torch_gpu};
