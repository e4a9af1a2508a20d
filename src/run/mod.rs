//! The run on disk: what a run is before, during and after training, read and written through
//! one type each. Training (`crate::train`) writes runs; the server, the reports, sweeps,
//! Hugging Face export and the benchmarks read them through this room alone.
//!
//! - [`config`]: `config.toml`'s type, [`RunConfig`], its sections and their defaults
//! - [`edit`]: `--set key=value` edits and where in the file a config error is
//! - [`checked`]: [`CheckedConfig`], a config checked once (every section, the recipe resolved,
//!   the tasks expanded) and the only form commands compute from
//! - [`budget`]: the training budget (steps, tokens, tokens per parameter)
//! - [`optim`]: `[optim]`, the optimizer and its settings; [`clip_rule`]: `[optim.clip]`, the
//!   rule that clips a step's gradients (global, ZClip, AGC)
//! - [`schedule`]: learning-rate schedules as pure functions of the step
//! - [`layout`]: the run directory (where each file is, its lock, creating and claiming it),
//!   `run.json` ([`layout::RunInfo`]) and `status.json` ([`layout::Status`])
//! - [`metrics`]: `metrics.jsonl`'s records
//! - [`pairs_eval`]: `pairs_eval.json`'s record
//! - [`checkpoint`]: a checkpoint's weights, optimizer state and `state.json` (the trainer state)
//! - [`divergence`], [`skip`], [`loss_scale`], [`zclip`]: the rules whose state a checkpoint keeps
//! - [`spike_score`]: OLMo-core's SpikeScore; [`rollback`]: going back to a checkpoint on spikes
//! - [`track_target`]: `run.track`, the tracking server a run is also sent to
//! - [`finetune`]: `[finetune]`, the parent run a fine-tuning run starts from and its digest
//! - [`saved`]: opening a saved run and verifying its weights ([`SavedRun`])

pub mod budget;
pub mod checked;
pub mod checkpoint;
pub mod clip_rule;
pub mod config;
pub mod divergence;
pub mod edit;
pub mod finetune;
pub mod layout;
pub mod loss_scale;
pub mod metrics;
pub mod optim;
pub mod pairs_eval;
pub mod rollback;
pub mod saved;
pub mod schedule;
pub mod skip;
pub mod spike_score;
pub mod track_target;
pub mod zclip;

pub use checked::CheckedConfig;
pub use config::{OptimConfig, RunConfig, RunSection, TrainSection};
pub use layout::EXIT_DIVERGED;
pub use saved::{SavedRun, load_run};
pub use schedule::{ScheduleConfig, ScheduleKind};
