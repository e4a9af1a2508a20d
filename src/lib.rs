//! normlab: train decoder-only Transformers with any normalization scheme, and see layer by
//! layer why it trains stably or not.
//!
//! The rooms, each a module; a room imports only rooms on a lower floor. Their floors and
//! imports are described once, in `docs/architecture.md` (checked by `tests/architecture.rs`).
//!
//! - [`norm`]: normalization layers (LayerNorm, RMSNorm, scalarised LN, DyT, BHyT*, BHyT)
//! - [`recipe`]: placements — which norm sits where, with which scales (every preset in
//!   [`recipe::presets`])
//! - [`model`]: the decoder-only Transformer
//! - [`data`]: corpora (the shipped ones included), tokenizers, token cache, batch sampler,
//!   evaluation windows
//! - [`decode`]: the one decoding path (generate, pairs evaluation, serve), sampling, scoring
//! - [`tasks`]: downstream evaluation (multiple choice, cloze, bits per byte) as lm-eval scores it
//! - [`probe`]: stability probes (hidden-state statistics, gradient norms, spikes)
//! - [`run`]: the run on disk: its checked config, directory, records, checkpoints, opening a
//!   saved run
//! - [`track`]: runs and sweeps in an MLflow tracking server (its REST API)
//! - [`train`]: the training loop, starting and resuming runs, validation, a job's start-up
//!   over several ranks
//! - [`sweep`]: grids of runs, their results and aggregation
//! - [`hf`]: Hugging Face checkpoints: import as a run, export for `transformers`
//! - [`serve`]: a trained run behind an OpenAI-compatible HTTP server
//! - [`report`]: figures, findings and the HTML/markdown report
//! - [`bench`]: throughput against the PyTorch reference
//! - [`commands`]: what each `normlab` command does and prints (the binary parses and calls)
//! - [`kernels`]: fused CPU operations (norms, SwiGLU, RoPE, causal softmax) with hand-written
//!   backward passes, and the `model.kernels` switch
//! - [`dist`]: one run over several processes (MPI data parallelism, `mpirun`/`srun`)
//! - [`fuzzing`]: the fuzz targets' entry points
//! - bottom: [`init`] (named, seeded parameters), [`io`] (file formats, locks, printing),
//!   [`rng`], [`stats`], [`device`] (backends, GPU failures as errors, MFU, the machine),
//!   [`guard`] (third-party panics as errors), [`stop`] (SIGINT and SIGTERM
//!   as requests to stop at a step's end)

pub mod bench;
pub mod commands;
pub mod data;
pub mod decode;
pub mod device;
pub mod dist;
#[doc(hidden)]
pub mod fuzzing;
pub mod guard;
pub mod hf;
pub mod init;
pub mod io;
pub mod kernels;
pub mod model;
pub mod norm;
pub mod probe;
pub mod recipe;
pub mod report;
pub mod rng;
pub mod run;
pub mod serve;
pub mod stats;
pub mod stop;
pub mod sweep;
pub mod tasks;
pub mod track;
pub mod train;

#[cfg(test)]
pub(crate) mod testutil;
