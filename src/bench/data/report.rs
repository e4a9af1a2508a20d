//! `bench/data.json`: the corpus generated, both tools' passes over each format, the loader;
//! measured in one run and printed as a table.

use super::loader;
use super::options::DataBenchOptions;
use super::passes::{self, FormatResult};
use serde::{Deserialize, Serialize};

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
