//! A shard pair being filled: the training and validation tokens of consecutive documents,
//! closed when the training side reaches the shard size. Both sides close together, so the
//! point a killed preparation resumes from is one document index.

use super::manifest::{Manifest, ShardEntry, Split};
use crate::data::shards::ShardFormat;
use sha2::{Digest, Sha256};
use std::path::Path;

/// One side (split) of the pair.
struct Side {
    tokens: Vec<u32>,
    documents: u64,
    text_bytes: u64,
    sha: Sha256,
}

impl Default for Side {
    fn default() -> Self {
        Self { tokens: Vec::new(), documents: 0, text_bytes: 0, sha: Sha256::new() }
    }
}

/// A tokenized document with its split and its place in the input.
pub struct Tokenized {
    /// Index among all documents read (empty ones included).
    pub index: u64,
    pub split: Split,
    pub text_bytes: u64,
    pub text_sha_part: [u8; 32],
    pub tokens: Vec<u32>,
}

#[derive(Default)]
pub struct Chunk {
    train: Side,
    val: Side,
    /// Documents read up to the last one added.
    read: u64,
    kept: u64,
}

impl Chunk {
    pub fn add(&mut self, d: Tokenized) {
        let side = match d.split {
            Split::Train => &mut self.train,
            Split::Val => &mut self.val,
        };
        side.tokens.extend_from_slice(&d.tokens);
        side.documents += 1;
        side.text_bytes += d.text_bytes;
        side.sha.update(d.text_sha_part);
        self.read = d.index + 1;
        self.kept += 1;
    }

    pub fn train_tokens(&self) -> usize {
        self.train.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept == 0
    }

    /// Writes the pair's shards (each atomically), then the manifest that lists them: a kill
    /// between the two leaves shards the manifest does not name, removed on resume.
    pub fn close(self, dir: &Path, format: ShardFormat, m: &mut Manifest) -> anyhow::Result<()> {
        let k = m.split(Split::Train).count();
        for (split, side) in [(Split::Train, self.train), (Split::Val, self.val)] {
            if side.documents == 0 {
                continue;
            }
            let name = shard_name(split, k, format);
            crate::io::write_atomic(&dir.join(&name), &format.encode(&side.tokens)?)?;
            m.shards.push(ShardEntry {
                file: name,
                split,
                tokens: side.tokens.len() as u64,
                documents: side.documents,
                text_bytes: side.text_bytes,
                text_sha256: hex(&side.sha.finalize()),
            });
        }
        m.documents_read = self.read;
        m.documents_kept += self.kept;
        m.save(dir)
    }
}

/// `train-000003.tok`, `val-000003.bin`, …
pub fn shard_name(split: Split, k: usize, format: ShardFormat) -> String {
    let s = match split {
        Split::Train => "train",
        Split::Val => "val",
    };
    format!("{s}-{k:06}.{}", format.extension())
}

/// Whether a file name is one a preparation writes (a shard or its temporary file).
pub fn is_ours(name: &str) -> bool {
    let n = name.trim_start_matches('.');
    n.starts_with("train-") || n.starts_with("val-") || n.starts_with("manifest.json.")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
