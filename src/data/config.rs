//! The `[data]` section of a run config.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How a corpus path is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusFormat {
    /// From the path: a directory → `dir`, `*.jsonl` → `jsonl`, anything else → `text`.
    #[default]
    Auto,
    /// One UTF-8 text file; it is one document.
    Text,
    /// Every regular, non-hidden file under the directory (recursively, sorted by path) is one
    /// document.
    Dir,
    /// One JSON object per line; the string field `text_field` is one document.
    Jsonl,
}

/// Tokenizer choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenizerKind {
    /// UTF-8 bytes, vocabulary 256. Needs no training and no files.
    #[default]
    Byte,
    /// Byte-level BPE trained on the training split (HF `tokenizers`), saved as
    /// `tokenizer.json` in the run directory.
    Bpe,
    /// GPT-2's BPE (`r50k_base`, vocabulary 50257), built in.
    Gpt2,
}

/// Corpus, split and tokenizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// `sotu` (the built-in corpus: 233 State of the Union addresses, 1790–2021) or a path to a
    /// text file, a directory of text files, or a JSONL file.
    pub corpus: String,
    /// How to read a corpus path.
    pub format: CorpusFormat,
    /// JSONL: the field that holds the text.
    pub text_field: String,
    /// User corpora with several documents: every `val_every`-th document (the 10th, 20th, …)
    /// is held out for validation. The built-in corpus holds out the addresses of years ending
    /// in 0 instead.
    pub val_every: usize,
    /// A corpus that is a single document has no boundaries to split at: its last
    /// `val_fraction` (cut at a line break) is held out.
    pub val_fraction: f64,
    /// `byte`, `bpe` or `gpt2`.
    pub tokenizer: TokenizerKind,
    /// BPE: target vocabulary size (4096).
    pub bpe_vocab_size: usize,
    /// Cache for the downloaded corpus, trained tokenizers and token files; default
    /// `$NORMLAB_CACHE`, `$XDG_CACHE_HOME/normlab` or `~/.cache/normlab`.
    pub cache_dir: Option<PathBuf>,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            corpus: "sotu".into(),
            format: CorpusFormat::Auto,
            text_field: "text".into(),
            val_every: 10,
            val_fraction: 0.1,
            tokenizer: TokenizerKind::Byte,
            bpe_vocab_size: 4096,
            cache_dir: None,
        }
    }
}

impl DataConfig {
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(super::cache::default_dir)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.corpus.trim().is_empty(),
            "data.corpus is empty; set it to `sotu` or a path to your text"
        );
        anyhow::ensure!(
            self.val_every >= 2,
            "data.val_every must be ≥ 2 (got {}); 10 holds out every 10th document",
            self.val_every
        );
        anyhow::ensure!(
            self.val_fraction > 0.0 && self.val_fraction < 0.5,
            "data.val_fraction must be in (0, 0.5) (got {})",
            self.val_fraction
        );
        anyhow::ensure!(
            self.bpe_vocab_size >= 300 && self.bpe_vocab_size <= 1 << 20,
            "data.bpe_vocab_size must be between 300 and 1048576 (got {})",
            self.bpe_vocab_size
        );
        anyhow::ensure!(!self.text_field.is_empty(), "data.text_field is empty; name the JSONL field holding the text");
        Ok(())
    }
}
