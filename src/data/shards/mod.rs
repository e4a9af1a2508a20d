//! Token shards: the formats tokens are kept in on disk, and [`TokenFile`], the token stream
//! training reads, which concatenates any number of shards of any of them, each memory-mapped.
//!
//! - [`normlab`]: normlab's own layout (`NLTOK002`: header with the token width, count and a
//!   CRC-32 of the tokens)
//! - [`nanogpt`]: nanoGPT / modded-nanogpt / llm.c `.bin` shards (256 × int32 header, then
//!   uint16 tokens; llm.c's uint32 variant)
//! - [`npy`]: numpy `.npy` arrays (`np.save`, a 1-D unsigned array) and the header-less
//!   `np.memmap` files OLMo-core and Dolma name `.npy`
//! - [`stream`]: the concatenation

pub mod nanogpt;
pub mod normlab;
pub mod npy;
pub mod stream;

pub use stream::TokenFile;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A file format token shards are written in (`normlab data prepare --shard-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ShardFormat {
    /// `NLTOK002`, checksummed.
    #[default]
    Normlab,
    /// nanoGPT / modded-nanogpt `.bin`.
    Nanogpt,
    /// numpy `.npy` (`np.load` reads it).
    Npy,
}

impl ShardFormat {
    /// The file extension shards of this format get.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Normlab => "tok",
            Self::Nanogpt => "bin",
            Self::Npy => "npy",
        }
    }

    /// The file's bytes for `tokens`.
    pub fn encode(self, tokens: &[u32]) -> anyhow::Result<Vec<u8>> {
        match self {
            Self::Normlab => Ok(normlab::encode(tokens)),
            Self::Nanogpt => nanogpt::encode(tokens),
            Self::Npy => Ok(npy::encode(tokens)),
        }
    }
}

/// How wide the tokens of a header-less `.npy` memmap are (`data.token_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenDtype {
    /// uint16 when the tokenizer's vocabulary fits, else uint32 (OLMo-core's rule).
    #[default]
    Auto,
    Uint16,
    Uint32,
}

impl TokenDtype {
    /// Bytes per token for a vocabulary of `vocab` entries.
    pub fn width(self, vocab: usize) -> usize {
        match self {
            Self::Auto if vocab <= 1 << 16 => 2,
            Self::Auto | Self::Uint32 => 4,
            Self::Uint16 => 2,
        }
    }
}

/// A whole token shard, its format read from its first bytes: normlab's magic, nanoGPT's header
/// magic, numpy's `\x93NUMPY`; else a `.npy` file is a header-less memmap of `raw_width`-byte
/// tokens.
pub fn open(path: &Path, raw_width: usize) -> anyhow::Result<TokenFile> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open token shard {}", path.display()))?;
    // SAFETY: shards are only read; a file changed underneath is caught by the size checks of
    // each format at opening, and normlab's by its checksum.
    let map = unsafe { memmap2::Mmap::map(&f) }.with_context(|| format!("cannot map {}", path.display()))?;
    let name = path.display().to_string();
    let store = stream::Store::Map(map);
    let shard = if store.starts_with(normlab::MAGIC) {
        normlab::shard(store, &name)?
    } else if nanogpt::is_nanogpt(&store) {
        nanogpt::shard(store, &name)?
    } else if store.starts_with(npy::MAGIC) {
        npy::shard(store, &name)?
    } else if path.extension().is_some_and(|e| e == "npy") {
        npy::raw_shard(store, raw_width, &name)?
    } else {
        bail!(
            "{name} is not a token shard normlab reads (normlab's, nanoGPT's .bin, numpy's .npy or a header-less \
             .npy memmap); prepare text with `normlab data prepare`"
        )
    };
    Ok(TokenFile::from_shards(vec![shard]))
}

/// Whether `path` names a token shard by its extension (`.tok`, `.bin`, `.npy`).
pub fn is_shard_path(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "tok" | "bin" | "npy"))
}
