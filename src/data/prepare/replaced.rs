//! Input files replaced since a preparation started (a damaged file swapped for a complete
//! copy, as the damaged file's error line advises): the preparation continues when the
//! documents already in its shards are still the ones the files hold. That is checked, not
//! assumed: the files are read again up to the point the preparation reached (read, not
//! tokenized) and every closed shard's text hash computed again.

use super::manifest::{Manifest, Settings, Split};
use crate::data::read::{self, CorpusFile};
use sha2::{Digest, Sha256};
use std::ops::ControlFlow;

/// Whether `now` differs from `was` in the input files' sizes or modification times alone
/// (the same files, in the same order, every other setting equal).
pub fn only_files_changed(was: &Settings, now: &Settings) -> bool {
    let same_paths =
        was.files.len() == now.files.len() && was.files.iter().zip(&now.files).all(|(a, b)| a.path == b.path);
    let rest = |s: &Settings| Settings { files: Vec::new(), ..s.clone() };
    same_paths && rest(was) == rest(now)
}

/// One split's closed shards: each one's document count and text hash, in order.
struct Expected<'a> {
    shards: Vec<(u64, &'a str)>,
    /// The shard being checked, its documents so far and their running hash.
    at: usize,
    documents: u64,
    sha: Sha256,
    matches: bool,
}

impl<'a> Expected<'a> {
    fn of(m: &'a Manifest, split: Split) -> Self {
        let shards = m.split(split).map(|s| (s.documents, s.text_sha256.as_str())).collect();
        Self { shards, at: 0, documents: 0, sha: Sha256::new(), matches: true }
    }

    fn add(&mut self, text: &str) {
        let Some(&(documents, want)) = self.shards.get(self.at) else { return };
        let mut part = Sha256::new();
        part.update((text.len() as u64).to_le_bytes());
        part.update(text.as_bytes());
        self.sha.update(part.finalize());
        self.documents += 1;
        if self.documents == documents {
            let got: String = std::mem::take(&mut self.sha).finalize().iter().map(|b| format!("{b:02x}")).collect();
            self.matches &= got == want;
            self.at += 1;
            self.documents = 0;
        }
    }
}

/// Whether `files` (field `field`) still hold the documents of `m`'s shards.
pub fn same_documents(m: &Manifest, files: &[CorpusFile], field: &str) -> anyhow::Result<bool> {
    let val_every = m.settings.val_every as u64;
    let (mut train, mut val) = (Expected::of(m, Split::Train), Expected::of(m, Split::Val));
    let (mut index, mut kept) = (0u64, 0u64);
    read::for_each(files, field, &mut |text| {
        if index >= m.documents_read {
            return Ok(ControlFlow::Break(()));
        }
        index += 1;
        if !text.trim().is_empty() {
            kept += 1;
            if kept.is_multiple_of(val_every) { val.add(text) } else { train.add(text) }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let all_read = |e: &Expected| e.at == e.shards.len();
    Ok(index == m.documents_read && train.matches && val.matches && all_read(&train) && all_read(&val))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::prepare::manifest::{InputFile, ShardEntry};

    fn settings(size: u64) -> Settings {
        Settings {
            files: vec![InputFile { path: "a.jsonl".into(), size, mtime_ns: 1 }],
            text_field: "text".into(),
            val_every: 2,
            shard_tokens: 10,
            shard_format: crate::data::shards::ShardFormat::Normlab,
            tokenizer: "byte".into(),
            vocab_size: 256,
            separator: vec![10],
        }
    }

    /// The shard hashes by hand: SHA-256 over each document's SHA-256 of its length (8 bytes,
    /// little-endian) and text, for documents "a", "bb" (training: 1st and 3rd kept) and "c"
    /// (validation: 2nd kept, with val_every = 2).
    #[test]
    fn the_documents_in_the_shards_are_recognised_and_a_change_is_seen() {
        let dir = crate::testutil::temp_dir("prepare-replaced");
        let file = dir.join("a.jsonl");
        std::fs::write(&file, "{\"text\": \"a\"}\n{\"text\": \"c\"}\n{\"text\": \"bb\"}\n{\"text\": \"d\"}\n").unwrap();
        let hash = |docs: &[&str]| {
            let mut s = Sha256::new();
            for d in docs {
                let mut p = Sha256::new();
                p.update((d.len() as u64).to_le_bytes());
                p.update(d.as_bytes());
                s.update(p.finalize());
            }
            s.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        let shard = |split, documents, docs: &[&str]| ShardEntry {
            file: String::new(),
            split,
            tokens: 0,
            documents,
            text_bytes: 0,
            text_sha256: hash(docs),
        };
        let mut m = Manifest::new("a.jsonl".into(), settings(4));
        m.shards = vec![shard(Split::Train, 2, &["a", "bb"]), shard(Split::Val, 1, &["c"])];
        m.documents_read = 3;
        let files = crate::data::read::resolve(&file.display().to_string()).unwrap();
        assert!(same_documents(&m, &files, "text").unwrap());
        std::fs::write(&file, "{\"text\": \"a\"}\n{\"text\": \"C\"}\n{\"text\": \"bb\"}\n").unwrap();
        assert!(!same_documents(&m, &files, "text").unwrap(), "a changed document is seen");
        assert!(only_files_changed(&settings(4), &settings(5)));
        let other = Settings { val_every: 3, ..settings(5) };
        assert!(!only_files_changed(&settings(4), &other));
    }
}
