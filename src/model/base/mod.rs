//! What every part of the model reads:
//!
//! - [`context`]: one forward's context: positions, masks, compute, what passes between layers, records
//! - [`records`]: what a forward collects beside its output, by kind
//! - [`terms`]: a training forward's loss terms and readings, by name, and a step's combined readings
//! - [`compute`]: the run-wide settings a forward reads (kernels, precision, memory limits)
//! - [`names`]: the parameter naming scheme
//! - [`params`]: parameters by name (checkpoints, fixtures, gradient tests)
//! - [`linear`]: bias-free projection
//! - [`lora`]: LoRA adapters on the projections (`[model.lora]`), the base frozen
//! - [`rope`]: rotary position embeddings
//! - [`softcap`]: soft-capping `c·tanh(x/c)` of attention and output logits (Gemma 2)

pub mod compute;
pub mod context;
pub mod linear;
pub mod lora;
pub mod names;
pub mod params;
pub mod records;
pub mod rope;
pub mod softcap;
pub mod terms;
