//! `normlab data prepare`: a corpus tokenized once into token shards, with bounded memory, in
//! parallel over documents, resumable after a kill and deterministic (same input, tokenizer and
//! settings → byte-identical shards). Every `val_every`-th non-empty document goes to the
//! validation shards; each document is followed by the run's document separator. Training
//! reads the result (`data.corpus = DIR`) by memory map.
//!
//! - [`manifest`]: `manifest.json`, the settings and the shards written so far
//! - [`chunk`]: the shard pair being filled
//! - [`pipeline`]: the reader thread and the parallel tokenizer
//! - [`meter`]: the progress line (documents, MB and tokens per second)
//! - [`job`]: one preparation run, resumed where a manifest says, and opening its result
//! - [`replaced`]: continuing after input files were replaced, when they still hold the
//!   prepared documents

pub mod chunk;
pub mod job;
pub mod manifest;
pub mod meter;
pub mod pipeline;
pub mod replaced;

pub use job::{Job, open, run};
pub use manifest::Manifest;
pub use meter::{Meter, Step};
