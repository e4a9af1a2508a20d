//! Files: every format normlab reads or writes, with no knowledge of what the records mean.
//!
//! - [`atomic`]: writes that appear whole or not at all
//! - [`json`]: one typed JSON document per file (read back through the same type)
//! - [`jsonl`]: append-only typed JSON lines, truncatable to a checkpointed length
//! - [`lock`]: exclusive locks on run and sweep directories
//! - [`term`]: printing that a closed pipe cannot turn into a crash
//! - [`tensors`]: named tensors as safetensors
//! - [`tensorboard`]: TensorBoard scalar event files
//! - [`text`]: a user's text file read whole, refused when it cannot be one

pub mod atomic;
pub mod json;
pub mod jsonl;
pub mod lock;
pub mod tensorboard;
pub mod tensors;
pub mod term;
pub mod text;

pub use atomic::write_atomic;
pub use text::read_text;
