//! The `[data]` section of a run config.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use super::shards::TokenDtype;

/// One corpus of a mixture (`[[data.sources]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// A corpus as `data.corpus` takes it (path, directory, glob, prepared directory, shards).
    pub path: String,
    /// Relative sampling weight (> 0); weights are normalised over the sources.
    pub weight: f64,
    /// The name its losses are reported under; default: the path's file name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its text field, where it differs from `data.text_field`.
    #[serde(default)]
    pub text_field: Option<String>,
}

impl SourceSpec {
    /// The name losses are reported under.
    pub fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let p = std::path::Path::new(self.path.trim_end_matches('/'));
            let stem = p.file_name().and_then(|n| n.to_str()).unwrap_or(&self.path);
            stem.split(['*', '?', '[']).next().unwrap_or(stem).trim_end_matches(['.', '_', '-']).to_string()
        })
    }
}

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
    /// tiktoken's `cl100k_base` (vocabulary 100277), built in: the Peri-LN paper's tokenizer.
    Cl100k,
}

impl TokenizerKind {
    /// The name configs use (`data.tokenizer`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Byte => "byte",
            Self::Bpe => "bpe",
            Self::Gpt2 => "gpt2",
            Self::Cl100k => "cl100k",
        }
    }
}

/// What the model learns from the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Next-token prediction on running text (every token is a target).
    #[default]
    Lm,
    /// Sequence to sequence on a decoder-only model: each example is `source <sep> target
    /// <end>`, one per row, and only the target tokens (with `<end>`) count in the loss.
    Pairs,
    /// Supervised fine-tuning on conversations: each rendered by the chat template, one per
    /// row, and only the assistant turns count in the loss.
    Chat,
}

/// How a pair file is read (`data.task = "pairs"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PairFileFormat {
    /// From the name: `*.tsv` → `tsv`, `*.jsonl` → `jsonl`, anything else → `arrow`.
    #[default]
    Auto,
    /// `source<TAB>target` per line.
    Tsv,
    /// `source => target` per line.
    Arrow,
    /// One JSON object per line; fields `source_field`, `target_field`, `category_field`.
    Jsonl,
}

/// Corpus, split and tokenizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// `lm` (running text), `pairs` (source → target examples, target-only loss) or `chat`
    /// (conversations, assistant-only loss).
    pub task: Task,
    /// `lm`: `sotu` (the built-in corpus: 233 State of the Union addresses, 1790–2021) or a
    /// path to a text file, a directory of text files, or a JSONL file. `pairs`: `textnorm-en`
    /// (the built-in English text-normalisation generator) or a path to a pair file.
    pub corpus: String,
    /// How to read a corpus path.
    pub format: CorpusFormat,
    /// JSON records and parquet rows: the field (column) that holds the text.
    pub text_field: String,
    /// Token shards (nanoGPT `.bin`, numpy `.npy`): the validation shards (a file, directory
    /// or glob). Without it, shards with `val` in their name are the validation split.
    pub val_corpus: Option<String>,
    /// Header-less `.npy` token files (OLMo-core's memmaps): `uint16`, `uint32`, or `auto`
    /// (uint16 when the vocabulary fits).
    pub token_dtype: TokenDtype,
    /// Streamed corpora: training tokens per shard of the preparation (its memory: about 6
    /// bytes per token).
    pub shard_tokens: usize,
    /// `bpe` on a streamed corpus: training text the BPE learns from (the first documents of
    /// the training split, up to this many bytes).
    pub bpe_sample_bytes: usize,
    /// A mixture: several corpora sampled by weight (`[[data.sources]]` with `path`, `weight`
    /// and optionally `name` and `text_field`), each with its own validation split and loss.
    /// Replaces `corpus` when given.
    pub sources: Vec<SourceSpec>,
    /// User corpora with several documents: every `val_every`-th document (the 10th, 20th, …)
    /// is held out for validation. The built-in corpus holds out the addresses of years ending
    /// in 0 instead.
    pub val_every: usize,
    /// A corpus that is a single document has no boundaries to split at: its last
    /// `val_fraction` (cut at a line break) is held out.
    pub val_fraction: f64,
    /// `byte`, `bpe`, `gpt2` or `cl100k`.
    pub tokenizer: TokenizerKind,
    /// `chat`: how a conversation record is laid out (`auto`, `messages`, `conversations`,
    /// `alpaca`).
    pub chat_layout: crate::data::chat::layouts::ChatLayout,
    /// `chat`: the chat template: `chatml`, a `.jinja` file, or a `tokenizer_config.json`
    /// whose `chat_template` to use.
    pub chat_template: String,
    /// Pair files: their format and, for JSONL, the field names (the category is optional).
    pub pair_format: PairFileFormat,
    pub source_field: String,
    pub target_field: String,
    pub category_field: String,
    /// `textnorm-en`: training pairs generated (seeded by `pairs_seed`), and pairs in the
    /// generated test split (another seed stream, never trained on; also the validation set).
    pub pairs_train: usize,
    pub pairs_test: usize,
    pub pairs_seed: u64,
    /// Real held-out pairs scored after training: `wetext` (the English test pairs of the PyPI
    /// package `wetextprocessing==1.2.0`, fetched with pip and cached; the default for
    /// `textnorm-en`), a path to a pair file, or `none`.
    pub heldout: String,
    /// BPE: target vocabulary size (4096).
    pub bpe_vocab_size: usize,
    /// Cache for the downloaded corpus, trained tokenizers and token files; default
    /// `$NORMLAB_CACHE`, `$XDG_CACHE_HOME/normlab` or `~/.cache/normlab`.
    pub cache_dir: Option<PathBuf>,
    /// The window a run fits each example into (`train.seq_len + 1`), set when the run's config
    /// is checked (never written): a conversation's turns past it are not prepared.
    #[serde(skip)]
    pub context_tokens: Option<usize>,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            task: Task::Lm,
            corpus: "sotu".into(),
            format: CorpusFormat::Auto,
            text_field: "text".into(),
            val_corpus: None,
            token_dtype: TokenDtype::Auto,
            shard_tokens: 50_000_000,
            bpe_sample_bytes: 64 << 20,
            sources: Vec::new(),
            val_every: 10,
            val_fraction: 0.1,
            tokenizer: TokenizerKind::Byte,
            chat_layout: Default::default(),
            chat_template: "chatml".into(),
            pair_format: PairFileFormat::Auto,
            source_field: "source".into(),
            target_field: "target".into(),
            category_field: "category".into(),
            pairs_train: 20_000,
            pairs_test: 300,
            pairs_seed: 4,
            heldout: "auto".into(),
            context_tokens: None,
            bpe_vocab_size: 4096,
            cache_dir: None,
        }
    }
}

impl DataConfig {
    /// The real held-out pairs to score: `auto` is `wetext` for the built-in generator and
    /// `none` otherwise.
    pub fn heldout(&self) -> &str {
        match self.heldout.as_str() {
            "auto" if self.corpus == super::pairs::english::NAME => "wetext",
            "auto" => "none",
            h => h,
        }
    }

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
        anyhow::ensure!(
            self.shard_tokens >= 1024,
            "data.shard_tokens must be ≥ 1024 (got {}); 50000000 keeps a preparation near 300 MB of memory",
            self.shard_tokens
        );
        self.validate_sources()?;
        anyhow::ensure!(
            self.task != Task::Chat || self.sources.is_empty() && self.corpus != "sotu",
            "data.task = \"chat\" needs conversations: set data.corpus to `instructions` (built in) or a .jsonl, \
             .json or .parquet file of OpenAI messages, ShareGPT/LIMA conversations or Alpaca records"
        );
        if self.task == Task::Pairs {
            anyhow::ensure!(
                self.corpus != "sotu",
                "data.task = \"pairs\" needs pairs: set data.corpus to `textnorm-en` or a pair file (TSV, `=>` \
                    lines or JSONL)"
            );
            anyhow::ensure!(
                self.pairs_train >= 1 && self.pairs_test >= 1,
                "data.pairs_train and data.pairs_test must be ≥ 1 (got {} and {})",
                self.pairs_train,
                self.pairs_test
            );
            anyhow::ensure!(
                !self.source_field.is_empty() && !self.target_field.is_empty(),
                "data.source_field and data.target_field must name the JSONL fields of a pair"
            );
        }
        Ok(())
    }
}

impl DataConfig {
    fn validate_sources(&self) -> anyhow::Result<()> {
        if self.sources.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(self.task == Task::Lm, "data.sources (a mixture) is for data.task = \"lm\"");
        let mut names = std::collections::BTreeSet::new();
        for s in &self.sources {
            anyhow::ensure!(
                s.weight.is_finite() && s.weight > 0.0,
                "data.sources: `{}` has weight {}; give every source a weight > 0",
                s.path,
                s.weight
            );
            anyhow::ensure!(
                names.insert(s.name()),
                "data.sources: two sources are named `{}`; give each a distinct `name`",
                s.name()
            );
        }
        Ok(())
    }
}
