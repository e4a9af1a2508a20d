//! `manifest.json` of a prepared corpus: what was read, how, and the shards written so far.
//! Rewritten atomically after every shard pair, so a killed preparation resumes from it.

use crate::data::shards::ShardFormat;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file name in a prepared directory.
pub const FILE: &str = "manifest.json";
/// This schema's name; a manifest with another is not read.
pub const SCHEMA: &str = "normlab-prepared-1";

/// Which split a shard holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Val,
}

/// One input file as it was when read (a changed file makes a cached preparation stale).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFile {
    pub path: String,
    pub size: u64,
    /// Modification time, nanoseconds since the epoch (0 where the file system has none).
    pub mtime_ns: u128,
}

/// Everything that decides the shards' bytes: equal settings, byte-identical shards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub files: Vec<InputFile>,
    pub text_field: String,
    pub val_every: usize,
    pub shard_tokens: usize,
    pub shard_format: ShardFormat,
    /// The tokenizer's fingerprint (`byte`, `gpt2-r50k_base`, `bpe-…`).
    pub tokenizer: String,
    pub vocab_size: usize,
    /// The tokens after every document.
    pub separator: Vec<u32>,
}

/// One written shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// Its file name in the directory.
    pub file: String,
    pub split: Split,
    pub tokens: u64,
    pub documents: u64,
    /// UTF-8 bytes of its documents' text.
    pub text_bytes: u64,
    /// SHA-256 over its documents' SHA-256s (each of the length-prefixed text), in order.
    pub text_sha256: String,
}

/// A prepared corpus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema: String,
    /// The corpus as given (a path or glob).
    pub corpus: String,
    pub settings: Settings,
    pub shards: Vec<ShardEntry>,
    /// Documents read so far, empty ones included: where a resumed preparation continues.
    pub documents_read: u64,
    /// Non-empty documents so far (every `val_every`-th of them is validation).
    pub documents_kept: u64,
    pub complete: bool,
}

impl Manifest {
    pub fn new(corpus: String, settings: Settings) -> Self {
        Self {
            schema: SCHEMA.into(),
            corpus,
            settings,
            shards: Vec::new(),
            documents_read: 0,
            documents_kept: 0,
            complete: false,
        }
    }

    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(FILE);
        let m: Self = crate::io::json::read(&path)?;
        anyhow::ensure!(
            m.schema == SCHEMA,
            "{} is a `{}` manifest, not `{SCHEMA}`; prepare the corpus again with this normlab",
            path.display(),
            m.schema
        );
        Ok(m)
    }

    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        crate::io::json::write(&dir.join(FILE), self)
    }

    /// The shards of one split, in order.
    pub fn split(&self, split: Split) -> impl Iterator<Item = &ShardEntry> {
        self.shards.iter().filter(move |s| s.split == split)
    }

    /// (documents, text bytes, tokens) of a split.
    pub fn totals(&self, split: Split) -> (u64, u64, u64) {
        self.split(split).fold((0, 0, 0), |(d, b, t), s| (d + s.documents, b + s.text_bytes, t + s.tokens))
    }

    /// One hash of the whole corpus's text: over the shards' text hashes in order.
    pub fn corpus_sha256(&self) -> String {
        let parts: Vec<&[u8]> = self.shards.iter().map(|s| s.text_sha256.as_bytes()).collect();
        crate::data::cache::sha256_parts(parts)
    }
}
