//! `normlab bench --data`: how fast a corpus becomes training tokens. A generated corpus of at
//! least a gigabyte (`tools/make_data_bench_corpus.py`: pyarrow parquet and zstandard JSON
//! lines) is prepared by `normlab data prepare` and tokenized by the Hugging Face `tokenizers`
//! Python package (`tools/bench_tokenizers.py`, `encode_batch`) with the same `tokenizer.json`
//! and thread count, interleaved in one invocation; then the loader's time per batch beside a
//! training step on the prepared shards. Results in `bench/data.json`.
//!
//! - [`passes`]: one tokenizing pass of each tool, with its time, tokens and peak memory
//! - [`loader`]: batches drawn from the prepared shards, and a training step on them

pub mod loader;
pub mod passes;

use passes::Pass;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What to measure.
pub struct DataBenchOptions {
    /// Where the corpus, its tokenizer and the prepared shards go.
    pub dir: PathBuf,
    /// Gigabytes of text in the generated corpus.
    pub gb: f64,
    /// Interleaved rounds (medians are reported).
    pub rounds: usize,
    pub python: String,
    pub out: PathBuf,
    /// Training steps timed on the prepared shards.
    pub trainer_steps: usize,
}

/// One format's passes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatResult {
    /// `parquet` or `jsonl.zst`.
    pub format: String,
    pub file_bytes: u64,
    /// The medians over rounds.
    pub normlab: Pass,
    pub tokenizers: Pass,
    /// normlab's tokens/s (reading, decompressing, tokenizing, writing shards) over
    /// `tokenizers`' (reading and `encode_batch`).
    pub ratio: f64,
    /// normlab's tokens/s over `tokenizers`' `encode_batch` alone (its reading not counted).
    pub ratio_vs_encode_only: f64,
    /// Both tools counted the same tokens (normlab's without its document separators).
    pub same_tokens: bool,
    /// (normlab, tokenizers) tokens/s of every round.
    pub rounds: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataBenchReport {
    pub machine: crate::device::Machine,
    pub threads: usize,
    pub documents: u64,
    pub text_bytes: u64,
    pub tokenizer_vocab: usize,
    pub formats: Vec<FormatResult>,
    pub loader: loader::LoaderResult,
}

/// Generates what is missing, measures, writes the JSON.
pub fn run(o: &DataBenchOptions) -> anyhow::Result<DataBenchReport> {
    let corpus = passes::corpus(o)?;
    let tokenizer = passes::tokenizer(&o.dir)?;
    let mut formats = Vec::new();
    for (format, file) in [("parquet", "corpus.parquet"), ("jsonl.zst", "corpus.jsonl.zst")] {
        formats.push(passes::compare(o, format, &o.dir.join(file), &tokenizer)?);
    }
    let loader = loader::measure(&o.dir.join("prepared-parquet"), o.trainer_steps)?;
    let report = DataBenchReport {
        machine: crate::device::machine(),
        threads: crate::device::available_threads(),
        documents: corpus.documents,
        text_bytes: corpus.text_bytes,
        tokenizer_vocab: crate::data::Tokenizer::load_bpe(&tokenizer)?.vocab_size(),
        formats,
        loader,
    };
    crate::io::json::write(&o.out, &report)?;
    Ok(report)
}

/// The results as a markdown table.
pub fn table(r: &DataBenchReport) -> String {
    let mut t = String::from(
        "| format | normlab MB/s | normlab tok/s | per core | peak RSS | tokenizers tok/s | its encode-only | ratio | \
         vs encode-only |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for f in &r.formats {
        let (n, p) = (&f.normlab, &f.tokenizers);
        t += &format!(
            "| {} | {:.1} | {:.0} | {:.0} | {:.0} MB | {:.0} (RSS {:.0} MB) | {:.0} | {:.2} | {:.2} |\n",
            f.format,
            n.mb_per_s,
            n.tokens_per_s,
            n.tokens_per_s / r.threads as f64,
            n.peak_rss_mb,
            p.tokens_per_s,
            p.peak_rss_mb,
            p.encode_tokens_per_s.unwrap_or(f64::NAN),
            f.ratio,
            f.ratio_vs_encode_only
        );
    }
    t + &loader::table(&r.loader)
}
