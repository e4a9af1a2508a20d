//! Pretrained checkpoints of the Llama, Qwen2, Qwen3 and OLMo-2 families and of the
//! mixture-of-experts Mixtral, Qwen3-MoE and OLMoE: import into a run
//! (under their own recipe or any other placement) and export back to Hugging Face's layout.
//!
//! - [`family`]: the checkpoint families and the recipe and QK-norm each one has
//! - [`config`]: `config.json` and the normlab model and recipe it maps to
//! - [`weights`]: tensor names and orientation both ways; sharded checkpoints
//! - [`moe`]: the MoE families' `config.json` fields ↔ `[model.moe]`
//! - [`shapes`]: `config.json` checked against the tensors present before anything is built
//! - [`import`]: a checkpoint as a run at step 0, with what the placement change added and removed
//! - [`export`]: a run as a checkpoint directory `transformers` loads
//! - [`lora`]: a LoRA run's adapters merged, or as a `peft` adapter directory
//! - [`remote`]: for recipes without a family layout, `modeling_normlab.py` and its config
//! - [`special`]: `tokenizer_config.json`, `special_tokens_map.json` and the special-token ids

pub mod config;
pub mod export;
pub mod family;
pub mod import;
pub mod lora;
pub mod moe;
pub mod remote;
pub mod shapes;
pub mod special;
pub mod weights;

#[cfg(test)]
mod tests;
