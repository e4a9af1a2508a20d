//! Training: the loop that turns a checked config into a run on disk ([`crate::run`] holds
//! what a run is; this room computes it).
//!
//! - [`setup`]: starting a run (the config checked once, the run directory created in one step)
//!   and resuming one from its newest intact checkpoint
//! - [`trainer`]: the training loop: sample, forward, backward, clip, step, the recipe's
//!   after-step hooks, validate, probe, checkpoint
//! - [`step`]: one optimizer step's gradients over the micro-batches, and its loss terms and
//!   readings combined over them and the ranks by name; [`allreduce`]: summed over the ranks;
//!   [`clip`]: the step's clipping under `[optim.clip]` (the global cap, ZClip);
//!   [`agc`]: AGC's unit-wise clipping
//! - [`optim`]: the optimizers (AdamW, Muon, NorMuon, Lion, AdamH, MuonH) and their parameter groups; [`update`]: the applied update measured (and clipped)
//! - [`finetune`]: a fine-tuning run's start from its parent's weights
//! - [`eval`]: validation loss and perplexity over fixed windows
//! - [`pairs_eval`]: a pairs run's test sets decoded and scored
//! - [`rollback`]: going back to a checkpoint after repeated spikes (`[train.rollback]`)
//! - [`tracking`]: the run sent to its tracking server (`run.track`)
//! - [`memory`]: the memory a step needs, refused before step 1 when it cannot fit
//! - [`engine`]: engine failures as errors
//! - [`ranks`]: a job's start-up over several processes
//! - [`progress`]: the progress line; [`mfu`]: what it needs for MFU

pub mod agc;
pub mod allreduce;
pub mod clip;
pub mod engine;
pub mod eval;
pub mod finetune;
pub mod memory;
pub mod mfu;
pub mod optim;
pub mod pairs_eval;
pub mod progress;
pub mod ranks;
pub mod rollback;
pub mod setup;
pub mod step;
pub mod tracking;
pub mod trainer;
pub mod update;

pub use setup::{ResumeOptions, Resumed, resume, resume_with, start, start_with};
pub use trainer::{Outcome, Trainer};

#[cfg(test)]
mod mixture_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod rollback_tests;
#[cfg(test)]
mod tests;
