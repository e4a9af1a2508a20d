//! Training: config, AdamW with decay groups, LR schedules, global-norm clipping, gradient
//! accumulation, the variance regulariser's logging, divergence detection, skip-step, checkpoints and
//! resumption, evaluation, sampling and probing saved runs.

pub mod allreduce;
pub mod clip;
pub mod engine;
pub mod eval;
pub mod memory;
pub mod mfu;
pub mod optimizer;
pub mod pairs_eval;
pub mod progress;
pub mod qk_clip;
pub mod ranks;
pub mod setup;
pub mod step;
pub mod trainer;

pub use setup::{ResumeOptions, Resumed, resume, resume_with, start, start_with};
pub use trainer::{Outcome, Trainer};

#[cfg(test)]
mod mixture_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod tests;
