//! normlab's token shard: a flat binary file read through `memmap2`, so a second run starts
//! without tokenizing again and without reading the file into memory.
//!
//! Layout (little-endian): magic `NLTOK002`, `u32` bytes per token (2 or 4), `u32` CRC-32 of
//! the token bytes, `u64` token count, then the tokens. The checksum is verified on opening: a
//! cache file changed on disk (same size, other bytes) is refused, and the dataset rebuilds it.

use super::stream::{Shard, Store, TokenFile};
use anyhow::{Context, bail, ensure};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"NLTOK002";
const HEADER: usize = 24;

impl TokenFile {
    /// Writes `tokens` atomically; 2 bytes per token when every id fits.
    pub fn write(path: &Path, tokens: &[u32]) -> anyhow::Result<()> {
        crate::io::write_atomic(path, &encode(tokens))
    }

    /// An in-memory token stream (e.g. `normlab perplexity --data` on text that is not cached).
    pub fn from_tokens(tokens: &[u32]) -> Self {
        let bytes = encode(tokens);
        let width = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        Self::from_shards(vec![Shard::new(Store::Mem(bytes), HEADER, width, tokens.len())])
    }

    /// A normlab token file (checksum verified).
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let f = std::fs::File::open(path).with_context(|| format!("cannot open token file {}", path.display()))?;
        // SAFETY: token files are written once by rename and never modified in place.
        let map = unsafe { memmap2::Mmap::map(&f) }.with_context(|| format!("cannot map {}", path.display()))?;
        Ok(Self::from_shards(vec![shard(Store::Map(map), &path.display().to_string())?]))
    }

    /// A token file held in memory (as read from anywhere); checked like [`TokenFile::open`].
    pub fn from_bytes(bytes: Vec<u8>, name: &str) -> anyhow::Result<Self> {
        Ok(Self::from_shards(vec![shard(Store::Mem(bytes), name)?]))
    }
}

/// The shard of a normlab token file's bytes, checked.
pub fn shard(bytes: Store, name: &str) -> anyhow::Result<Shard> {
    let (width, len) = check(&bytes, name)?;
    Ok(Shard::new(bytes, HEADER, width, len))
}

/// The header's token width and count, refusing a file whose size does not match them exactly
/// (the count comes from the file: the size is computed without overflow).
fn check(bytes: &[u8], name: &str) -> anyhow::Result<(usize, usize)> {
    ensure!(
        bytes.len() >= HEADER,
        "{name} is {} bytes, shorter than a token file's {HEADER}-byte header: it was cut short",
        bytes.len()
    );
    ensure!(&bytes[..8] == MAGIC, "{name} is not a token file of this normlab version (magic {MAGIC:?})");
    let width = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let size = usize::try_from(len).ok().and_then(|n| n.checked_mul(width)).and_then(|b| b.checked_add(HEADER));
    if !(width == 2 || width == 4) || size != Some(bytes.len()) {
        bail!("token file {name} is truncated or corrupt (its size does not match its header)");
    }
    ensure!(crc32(&bytes[HEADER..]) == crc, "token file {name} is corrupt (its tokens do not match their checksum)");
    Ok((width, len as usize))
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(bytes);
    c.sum()
}

/// The file's bytes: header then tokens.
pub fn encode(tokens: &[u32]) -> Vec<u8> {
    let width = if tokens.iter().all(|&t| t <= u16::MAX as u32) { 2 } else { 4 };
    let mut bytes = Vec::with_capacity(HEADER + tokens.len() * width);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(width as u32).to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
    for &t in tokens {
        if width == 2 {
            bytes.extend_from_slice(&(t as u16).to_le_bytes());
        } else {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
    }
    let crc = crc32(&bytes[HEADER..]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    bytes
}
