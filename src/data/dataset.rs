//! A corpus, its tokenizer and both splits as token files: everything training reads.

use super::cache::sha256_parts;
use super::chat::load::{ChatCorpus, ChatInfo};
use super::config::{DataConfig, Task};
use super::corpus;
use super::document::{Corpus, Document};
use super::example::{self, Example, Fitted};
use super::pairs::load::{PairCorpus, TestSet};
use super::pairs::render;
use super::shards::TokenFile;
use super::tokenizer::{Tokenizer, bpe_for};
use anyhow::ensure;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Tokens per split the unigram baseline counts at most.
const UNIGRAM_TOKENS: usize = 1 << 27;

/// Documents are joined with this separator before tokenizing.
pub const DOC_SEPARATOR: &str = "\n\n";

pub struct Dataset {
    pub tokenizer: Tokenizer,
    /// The token streams (for pairs: the rendered examples, for the unigram baseline, offline
    /// probes and `normlab perplexity --data`).
    pub train: TokenFile,
    pub val: TokenFile,
    pub info: DataInfo,
    /// `data.task = "pairs"` or `"chat"`: the tokenized examples batches are made of.
    pub examples: Option<Examples>,
    /// `data.sources`: where each source lies in `train` and `val`, and its weight.
    pub mixture: Option<super::mixture::Mixture>,
}

/// Supervised examples: tokenized pairs or conversations, one per row.
pub struct Examples {
    pub train: Vec<Example>,
    pub val: Vec<Example>,
    /// Pairs: scored with exact match and F1 after training (the first is the validation
    /// pairs). Conversations: none.
    pub tests: Vec<TestSet>,
    /// Padding (masked, so any id does): pairs' `<end>`, a conversation run's boundary token.
    pub pad: u32,
}

impl Examples {
    /// The corpus's pairs in `tokenizer`'s tokens, each answer closed by `<end>`.
    fn pairs(tokenizer: &Tokenizer, pc: PairCorpus) -> anyhow::Result<Self> {
        let end = render::end_id(tokenizer)?;
        let train = render::encode_all(tokenizer, &pc.train, end)?;
        let val = render::encode_all(tokenizer, &pc.val, end)?;
        Ok(Self { train, val, tests: pc.tests, pad: end })
    }

    /// The counts `data.json` records for pairs.
    fn pair_info(&self) -> PairInfo {
        PairInfo {
            train_pairs: self.train.len(),
            val_pairs: self.val.len(),
            tests: self.tests.iter().map(|t| (t.name.clone(), t.pairs.len())).collect(),
        }
    }

    /// Fits every example into `max_tokens` ([`example::fit`]); returns what fitting did to
    /// the training and the validation split.
    fn fit(&mut self, max_tokens: usize) -> [FitCounts; 2] {
        [&mut self.train, &mut self.val].map(|split| {
            let mut counts = FitCounts::default();
            *split = std::mem::take(split)
                .into_iter()
                .filter_map(|e| match example::fit(e, max_tokens) {
                    Fitted::Whole(e) => Some(e),
                    Fitted::Truncated(e, dropped) => {
                        (counts.truncated, counts.dropped) = (counts.truncated + 1, counts.dropped + dropped);
                        Some(e)
                    }
                    Fitted::LeftOut => {
                        counts.left_out += 1;
                        None
                    }
                })
                .collect();
            counts
        })
    }
}

/// The supervised corpus a run reads, before tokenizing.
enum Supervised {
    Pairs(PairCorpus),
    Chat(ChatCorpus),
}

impl Supervised {
    /// The corpus tokenized into examples, and what `data.json` records of it.
    fn examples(
        self,
        tokenizer: &Tokenizer,
        log: &dyn Fn(&str),
    ) -> anyhow::Result<(Option<Examples>, Option<PairInfo>, Option<ChatInfo>)> {
        Ok(match self {
            Supervised::Pairs(pc) => {
                let e = Examples::pairs(tokenizer, pc)?;
                let info = e.pair_info();
                (Some(e), Some(info), None)
            }
            Supervised::Chat(cc) => {
                let (train, val, info) = super::chat::load::examples(tokenizer, &cc, log)?;
                // The document boundary's token (masked: any id in the vocabulary does).
                let pad = tokenizer.encode(DOC_SEPARATOR)?.last().copied().unwrap_or(0);
                (Some(Examples { train, val, tests: Vec::new(), pad }), None, Some(info))
            }
        })
    }
}

/// What fitting one split into the context did.
#[derive(Clone, Copy, Debug, Default)]
struct FitCounts {
    truncated: usize,
    dropped: usize,
    left_out: usize,
}

/// What the run directory records about its pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairInfo {
    pub train_pairs: usize,
    pub val_pairs: usize,
    /// `(name, pairs)` of every test set.
    pub tests: Vec<(String, usize)>,
}

/// What the run directory records about its data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataInfo {
    pub corpus: String,
    pub corpus_sha256: String,
    pub split_rule: String,
    pub train_documents: usize,
    pub val_documents: usize,
    pub train_chars: usize,
    pub val_chars: usize,
    pub tokenizer: String,
    pub vocab_size: usize,
    pub train_tokens: usize,
    pub val_tokens: usize,
    pub train_token_file: PathBuf,
    pub val_token_file: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<PairInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatInfo>,
}

impl Dataset {
    /// The validation cross-entropy (nats/token) of predicting every token by its frequency in
    /// the training split (add-one smoothed): the loss of a model that learned nothing but the
    /// unigram distribution, the level a stalled run sits at.
    /// For pairs: over the target tokens only, as the loss counts them.
    pub fn unigram_loss(&self, vocab_size: usize) -> f64 {
        if let Some(p) = &self.examples {
            let targets = |es: &[Example]| es.iter().flat_map(Example::learned_tokens).collect::<Vec<_>>();
            return unigram(targets(&p.train).into_iter(), targets(&p.val).into_iter(), vocab_size);
        }
        // At most the first UNIGRAM_TOKENS of each split: an estimate that stays seconds long on a
        // corpus of billions of tokens.
        unigram(self.train.iter().take(UNIGRAM_TOKENS), self.val.iter().take(UNIGRAM_TOKENS), vocab_size)
    }

    /// The corpus read whole, tokenized into one cached token file per split.
    pub(super) fn in_memory(cfg: &DataConfig, given: Option<Tokenizer>, log: &dyn Fn(&str)) -> anyhow::Result<Self> {
        let supervised = match cfg.task {
            Task::Pairs => Some(Supervised::Pairs(super::pairs::load::load(cfg)?)),
            Task::Chat => Some(Supervised::Chat(super::chat::load::load(cfg)?)),
            Task::Lm => None,
        };
        let corpus = match &supervised {
            Some(Supervised::Pairs(p)) => p.documents(),
            Some(Supervised::Chat(c)) => c.documents()?,
            None => corpus::load(cfg)?,
        };
        ensure!(
            !corpus.train.is_empty() && !corpus.val.is_empty(),
            "the corpus must have training and validation text"
        );
        let corpus_hash = hash_docs(&corpus);
        let cache = cfg.cache_dir();
        let tokenizer = match given.or_else(|| Tokenizer::fixed(cfg.tokenizer)) {
            Some(t) => t,
            None => {
                log(&format!(
                    "training a BPE of up to {} entries on the training split (cached for later runs)",
                    cfg.bpe_vocab_size
                ));
                let t = bpe_for(&corpus.train, cfg.bpe_vocab_size, &corpus_hash, &cache)?;
                if t.vocab_size() < cfg.bpe_vocab_size {
                    log(&format!(
                        "the BPE has {} entries: the training split has no more merges worth learning than that \
                         (data.bpe_vocab_size = {})",
                        t.vocab_size(),
                        cfg.bpe_vocab_size
                    ));
                }
                t
            }
        };
        let fp = tokenizer.fingerprint()?;
        let key = &sha256_parts([corpus_hash.as_bytes(), fp.as_bytes()])[..20];
        let dir = cache.join("tokens");
        let paths = [dir.join(format!("{key}-train.bin")), dir.join(format!("{key}-val.bin"))];
        let train = cached_tokens(&tokenizer, &corpus.train, &paths[0], log)?;
        let val = cached_tokens(&tokenizer, &corpus.val, &paths[1], log)?;
        let (examples, pairs, chat) = match supervised {
            Some(s) => s.examples(&tokenizer, log)?,
            None => (None, None, None),
        };
        let tokens =
            Tokens { train: &train, val: &val, files: paths, tokenizer: fp, vocab_size: tokenizer.vocab_size() };
        let mut info = DataInfo::of(&corpus, corpus_hash, tokens, pairs);
        info.chat = chat;
        Ok(Self { tokenizer, train, val, info, examples, mixture: None })
    }

    /// Pairs and conversations: fits every example into a window of `seq_len + 1` tokens
    /// ([`example::fit`]: a conversation is cut after its last assistant turn that fits, an
    /// example whose first learned range does not fit is left out), says what it did in `log`
    /// and records the counts in `data.json`'s record. Nothing for running text.
    pub fn fit_examples(&mut self, seq_len: usize, log: &dyn Fn(&str)) -> anyhow::Result<()> {
        let Some(p) = self.examples.as_mut() else { return Ok(()) };
        let [t, v] = p.fit(seq_len + 1);
        ensure!(
            !p.train.is_empty() && !p.val.is_empty(),
            "no example's first answer fits in train.seq_len + 1 = {} tokens; raise train.seq_len",
            seq_len + 1
        );
        if t.left_out + v.left_out + t.truncated + v.truncated > 0 {
            log(&format!(
                "longer than train.seq_len + 1 = {} tokens: {} training and {} validation examples left out, {} and \
                 {} cut after their last answer that fits ({} answers dropped)",
                seq_len + 1,
                t.left_out,
                v.left_out,
                t.truncated,
                v.truncated,
                t.dropped + v.dropped
            ));
        }
        if let Some(info) = self.info.pairs.as_mut() {
            (info.train_pairs, info.val_pairs) = (p.train.len(), p.val.len());
        }
        if let Some(info) = self.info.chat.as_mut() {
            (info.train_conversations, info.val_conversations) = (p.train.len(), p.val.len());
            (info.truncated, info.dropped_turns) = (t.truncated + v.truncated, t.dropped + v.dropped);
            info.left_out = t.left_out + v.left_out;
        }
        Ok(())
    }

    /// Both splits must hold at least one window of `seq_len + 1` tokens (running text; pairs
    /// and conversations are read as examples, one per row).
    pub fn check_seq_len(&self, seq_len: usize) -> anyhow::Result<()> {
        if self.examples.is_some() {
            return Ok(());
        }
        if let Some(m) = &self.mixture {
            return m.check_seq_len(seq_len);
        }
        for (name, n) in [("training", self.train.len()), ("validation", self.val.len())] {
            ensure!(
                n > seq_len,
                "the {name} split has {n} tokens, fewer than one window of train.seq_len + 1 = {}; lower \
                    train.seq_len or give more text",
                seq_len + 1
            );
        }
        Ok(())
    }
}

/// Cross-entropy of `val` under add-one smoothed frequencies of `train`.
fn unigram(train: impl Iterator<Item = u32>, val: impl Iterator<Item = u32>, vocab_size: usize) -> f64 {
    let mut counts = vec![1.0f64; vocab_size];
    for t in train {
        if let Some(c) = counts.get_mut(t as usize) {
            *c += 1.0;
        }
    }
    let total: f64 = counts.iter().sum();
    let (mut sum, mut n) = (0.0, 0usize);
    for t in val {
        sum += -(counts.get(t as usize).unwrap_or(&1.0) / total).ln();
        n += 1;
    }
    sum / n.max(1) as f64
}

fn hash_docs(c: &Corpus) -> String {
    let mut parts: Vec<&[u8]> = Vec::new();
    for (tag, docs) in [(b"train" as &[u8], &c.train), (b"val", &c.val)] {
        parts.push(tag);
        for d in docs.iter() {
            parts.push(d.text.as_bytes());
        }
    }
    sha256_parts(parts)
}

/// Tokenizes documents in parallel (one chunk per core), each followed by [`DOC_SEPARATOR`]:
/// the token stream training and evaluation read.
pub fn tokenize(tok: &Tokenizer, docs: &[Document]) -> anyhow::Result<Vec<u32>> {
    let threads = crate::device::available_threads();
    let chunk = docs.len().div_ceil(threads).max(1);
    let parts: Vec<anyhow::Result<Vec<u32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = docs
            .chunks(chunk)
            .map(|c| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for d in c {
                        out.extend(tok.encode(&d.text)?);
                        out.extend(tok.encode(DOC_SEPARATOR)?);
                    }
                    Ok(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("tokenizer thread panicked")).collect()
    });
    let mut all = Vec::new();
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

/// The tokenized corpus, as [`DataInfo`] records it.
struct Tokens<'a> {
    train: &'a TokenFile,
    val: &'a TokenFile,
    files: [PathBuf; 2],
    tokenizer: String,
    vocab_size: usize,
}

impl DataInfo {
    fn of(corpus: &Corpus, corpus_sha256: String, t: Tokens<'_>, pairs: Option<PairInfo>) -> Self {
        let (train_chars, val_chars) = corpus.sizes();
        let [train_token_file, val_token_file] = t.files;
        DataInfo {
            corpus: corpus.name.clone(),
            corpus_sha256,
            split_rule: corpus.split_rule.clone(),
            train_documents: corpus.train.len(),
            val_documents: corpus.val.len(),
            train_chars,
            val_chars,
            tokenizer: t.tokenizer,
            vocab_size: t.vocab_size,
            train_tokens: t.train.len(),
            val_tokens: t.val.len(),
            train_token_file,
            val_token_file,
            pairs,
            chat: None,
        }
    }
}

/// The token file of `docs` at `path`: opened when it is there and sound, else written by
/// tokenizing `docs` (a damaged file is said in `log` and replaced).
fn cached_tokens(
    tokenizer: &Tokenizer,
    docs: &[Document],
    path: &Path,
    log: &dyn Fn(&str),
) -> anyhow::Result<TokenFile> {
    if path.is_file() {
        match TokenFile::open(path) {
            Ok(f) => return Ok(f),
            Err(e) => log(&format!("{e:#}: tokenizing again")),
        }
    }
    let fp = tokenizer.fingerprint()?;
    log(&format!("tokenizing {} documents with {fp} → {}", docs.len(), path.display()));
    TokenFile::write(path, &tokenize(tokenizer, docs)?)?;
    TokenFile::open(path)
}
