//! Tokenizers: UTF-8 bytes (vocabulary 256), byte-level BPE trained on the training split with
//! HF `tokenizers` (or any `tokenizer.json`), GPT-2's BPE (`r50k_base`) and tiktoken's
//! `cl100k_base` (the Peri-LN paper's DCLM runs) via `tiktoken-rs`, which carries their
//! vocabularies and so works offline.

use super::config::TokenizerKind;
use super::document::Document;
use anyhow::{Context, anyhow};
use std::path::Path;

pub enum Tokenizer {
    Byte,
    Bpe(Box<tokenizers::Tokenizer>),
    Gpt2(&'static tiktoken_rs::CoreBPE),
    Cl100k(&'static tiktoken_rs::CoreBPE),
}

/// GPT-2's vocabulary size (50000 merges + 256 bytes + `<|endoftext|>`).
pub const GPT2_VOCAB: usize = 50_257;
/// `cl100k_base`'s ids: 100256 merges and bytes, then `<|endoftext|>` (100257) … `<|endofprompt|>`
/// (100276).
pub const CL100K_VOCAB: usize = 100_277;

impl Tokenizer {
    /// The fixed tokenizers (`byte`, `gpt2`); BPE needs [`Tokenizer::train_bpe`] or a file.
    pub fn fixed(kind: TokenizerKind) -> Option<Self> {
        match kind {
            TokenizerKind::Byte => Some(Self::Byte),
            TokenizerKind::Gpt2 => Some(Self::Gpt2(tiktoken_rs::r50k_base_singleton())),
            TokenizerKind::Cl100k => Some(Self::Cl100k(tiktoken_rs::cl100k_base_singleton())),
            TokenizerKind::Bpe => None,
        }
    }

    /// Trains a byte-level BPE with `vocab_size` entries on `docs`.
    pub fn train_bpe(docs: &[Document], vocab_size: usize) -> anyhow::Result<Self> {
        use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;
        let byte_level = ByteLevel::new(false, true, true);
        let mut tok = tokenizers::Tokenizer::new(BPE::default());
        tok.with_pre_tokenizer(Some(byte_level));
        tok.with_decoder(Some(byte_level));
        let mut trainer: tokenizers::models::TrainerWrapper = BpeTrainerBuilder::new()
            .vocab_size(vocab_size)
            .min_frequency(2)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build()
            .into();
        tok.train(&mut trainer, docs.iter().map(|d| d.text.as_str()))
            .map_err(|e| anyhow!("training BPE failed: {e}"))?;
        Ok(Self::Bpe(Box::new(tok)))
    }

    /// Loads a `tokenizer.json` written by [`Tokenizer::to_json`].
    pub fn load_bpe(path: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::bpe_from_json(&bytes, &path.display().to_string())
    }

    /// A BPE tokenizer from `tokenizer.json` bytes; `name` is for messages.
    pub fn bpe_from_json(bytes: &[u8], name: &str) -> anyhow::Result<Self> {
        let invalid = |e: String| anyhow!("{name} is not a valid tokenizer.json ({e})");
        // The tokenizers crate panics on some malformed files instead of returning an error.
        let tok = crate::guard::catch(|| tokenizers::Tokenizer::from_bytes(bytes))
            .map_err(invalid)?
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Self::Bpe(Box::new(tok)))
    }

    /// The tokenizer as JSON (BPE only; the others have nothing to save).
    pub fn to_json(&self) -> anyhow::Result<Option<String>> {
        match self {
            Self::Bpe(t) => Ok(Some(t.to_string(false).map_err(|e| anyhow!("cannot serialise the tokenizer: {e}"))?)),
            _ => Ok(None),
        }
    }

    pub fn kind(&self) -> TokenizerKind {
        match self {
            Self::Byte => TokenizerKind::Byte,
            Self::Bpe(_) => TokenizerKind::Bpe,
            Self::Gpt2(_) => TokenizerKind::Gpt2,
            Self::Cl100k(_) => TokenizerKind::Cl100k,
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Self::Byte => 256,
            Self::Bpe(t) => t.get_vocab_size(true),
            Self::Gpt2(_) => GPT2_VOCAB,
            Self::Cl100k(_) => CL100K_VOCAB,
        }
    }

    /// A string that changes whenever the token ids of some text would: the token cache key
    /// and the checkpoint's tokenizer check.
    pub fn fingerprint(&self) -> anyhow::Result<String> {
        Ok(match self {
            Self::Byte => "byte".into(),
            Self::Gpt2(_) => "gpt2-r50k_base".into(),
            Self::Cl100k(_) => "cl100k_base".into(),
            Self::Bpe(_) => format!("bpe-{}", &super::cache::sha256_hex(self.to_json()?.unwrap().as_bytes())[..16]),
        })
    }

    pub fn encode(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        match self {
            Self::Byte => Ok(text.bytes().map(u32::from).collect()),
            Self::Bpe(t) => {
                Ok(t.encode(text, false).map_err(|e| anyhow!("BPE encoding failed: {e}"))?.get_ids().to_vec())
            }
            Self::Gpt2(b) | Self::Cl100k(b) => Ok(b.encode_ordinary(text)),
        }
    }

    /// The vocabulary's spelling of token `id` (`tokenizer.json`'s, GPT-2's `vocab.json`'s: the
    /// token's bytes in the byte-level alphabet, e.g. "ĊĊ" for "\n\n"); `None` for an id
    /// outside the vocabulary.
    pub fn token_string(&self, id: u32) -> Option<String> {
        match self {
            Self::Byte => u8::try_from(id).ok().map(|b| byte_char(b).to_string()),
            Self::Bpe(t) => t.id_to_token(id),
            Self::Gpt2(b) | Self::Cl100k(b) => {
                b.decode_bytes(&[id]).ok().map(|bytes| bytes.into_iter().map(byte_char).collect())
            }
        }
    }

    /// The bytes of text token `id` stands for; `None` for an id outside the vocabulary or a
    /// token that is not a byte sequence (a SentencePiece piece such as `▁the`).
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        match self {
            Self::Byte => u8::try_from(id).ok().map(|b| vec![b]),
            Self::Bpe(t) => t.id_to_token(id)?.chars().map(char_byte).collect(),
            Self::Gpt2(b) | Self::Cl100k(b) => b.decode_bytes(&[id]).ok(),
        }
    }

    /// Text of `ids`; byte sequences that are not valid UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> anyhow::Result<String> {
        match self {
            Self::Byte => {
                let bytes: Vec<u8> = ids.iter().map(|&i| i.min(255) as u8).collect();
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
            Self::Bpe(t) => t.decode(ids, false).map_err(|e| anyhow!("BPE decoding failed: {e}")),
            Self::Gpt2(b) | Self::Cl100k(b) => {
                let bytes: Vec<u8> = b.decode_bytes(ids).map_err(|e| anyhow!("tiktoken decoding failed: {e}"))?;
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
    }
}

/// GPT-2's byte ↔ printable-character map (the ByteLevel alphabet): printable Latin-1 bytes map
/// to themselves, the others to U+0100 onwards in byte order.
pub fn byte_char(b: u8) -> char {
    let printable = |c: u8| (b'!'..=b'~').contains(&c) || (0xA1..=0xAC).contains(&c) || (0xAE..=0xFF).contains(&c);
    if printable(b) {
        return char::from(b);
    }
    let n = (0..b).filter(|&c| !printable(c)).count() as u32;
    char::from_u32(256 + n).expect("below U+0200")
}

/// The byte a byte-level alphabet character stands for ([`byte_char`]'s inverse).
pub fn char_byte(c: char) -> Option<u8> {
    static TABLE: std::sync::OnceLock<Vec<Option<u8>>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = vec![None; 0x200];
        for b in 0..=255u8 {
            t[byte_char(b) as usize] = Some(b);
        }
        t
    });
    table.get(c as usize).copied().flatten()
}

/// The BPE for a corpus: reuse the cached one trained on the same training split and vocabulary
/// size, else (none cached, or the cached file damaged) train and cache it.
pub fn bpe_for(train: &[Document], vocab_size: usize, corpus_hash: &str, cache: &Path) -> anyhow::Result<Tokenizer> {
    let path = cache.join("tokenizers").join(format!("bpe-{vocab_size}-{}.json", &corpus_hash[..16]));
    if let Some(t) = path.is_file().then(|| Tokenizer::load_bpe(&path).ok()).flatten() {
        return Ok(t);
    }
    let tok = Tokenizer::train_bpe(train, vocab_size)?;
    let json = tok.to_json()?.unwrap();
    crate::io::write_atomic(&path, json.as_bytes()).context("caching the trained tokenizer")?;
    Ok(tok)
}
