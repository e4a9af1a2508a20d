//! `normlab bench data`: how fast a corpus becomes training tokens. A generated corpus of at
//! least a gigabyte (`tools/make_data_bench_corpus.py`: pyarrow parquet and zstandard JSON
//! lines) is prepared by `normlab data prepare` and tokenized by the Hugging Face `tokenizers`
//! Python package (`tools/bench_tokenizers.py`, `encode_batch`) with the same `tokenizer.json`
//! and thread count, interleaved in one invocation; then the loader's time per batch beside a
//! training step on the prepared shards. Results in `bench/data.json`.
//!
//! - [`passes`]: one tokenizing pass of each tool, with its time, tokens and peak memory
//! - [`loader`]: batches drawn from the prepared shards, and a training step on them
//! - [`options`]: what to measure
//! - [`report`]: the measurement run and `bench/data.json`

pub mod loader;
pub mod options;
pub mod passes;
pub mod report;

pub use options::DataBenchOptions;
pub use report::{DataBenchReport, run, table};
