//! Training: config, AdamW with decay groups, LR schedules, global-norm clipping, gradient
//! accumulation, the variance regulariser's logging, divergence detection, skip-step, checkpoints and
//! resumption, evaluation, sampling and probing saved runs.

pub mod allreduce;
pub mod budget;
pub mod checkpoint;
pub mod clip;
pub mod config;
pub mod divergence;
pub mod engine;
pub mod eval;
pub mod evaluate;
pub mod loss_scale;
pub mod memory;
pub mod metrics;
pub mod mfu;
pub mod optimizer;
pub mod pairs_eval;
pub mod progress;
pub mod qk_clip;
pub mod ranks;
pub mod run_dir;
pub mod saved;
pub mod schedule;
pub mod setup;
pub mod skip;
pub mod step;
pub mod trainer;

pub use config::{OptimConfig, RunConfig, RunSection, TrainSection};
pub use schedule::{ScheduleConfig, ScheduleKind};
pub use setup::{ResumeOptions, Resumed, load_run, resume, resume_with, start, start_with};
pub use trainer::{Outcome, Trainer};

/// Exit status of `normlab train` when the run diverged (errors exit with 2).
pub const EXIT_DIVERGED: i32 = 3;

#[cfg(test)]
mod mixture_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod tests;
