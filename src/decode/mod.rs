//! Decoding from a trained model: the one path `normlab generate`, the pairs evaluation and
//! `normlab serve` share.
//!
//! - [`rows`]: the rows decoded together, their KV cache, joins and leaves, each row at its own
//!   positions and within its window of the context
//! - [`run`]: a fixed batch of prompts decoded to their stop token or length
//! - [`sampling`]: the next token from a position's logits (greedy, temperature, top-k, top-p)
//! - [`logprobs`]: log-probabilities of a position's tokens, the most likely ones
//! - [`generate`]: text from a prompt, shown as it grows
//! - [`score`]: log-likelihoods of every token of a batch of sequences in one forward (the
//!   server's `echo`/`logprobs`, downstream evaluation)
//! - [`shared`]: several continuations of one context scored with the context run once

pub mod generate;
pub mod logprobs;
pub mod rows;
pub mod run;
pub mod sampling;
pub mod score;
pub mod shared;

pub use generate::{SampleOptions, generate};
pub use rows::{Decoder, Rows};
pub use run::{DecodeOptions, decode, greedy};
pub use sampling::{Sampling, argmax, sample};

#[cfg(test)]
mod tests;
