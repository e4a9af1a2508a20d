//! Real held-out pairs: the English text-normalisation test pairs of the PyPI package
//! `wetextprocessing==1.2.0` (`tn/english/test/data/*.txt`, 15 files, 111 pairs,
//! `written => spoken`, Apache-2.0), one category per file, shipped with its licence as
//! `corpora/wetext-1.2.0-en-test.tar.gz` ([`crate::data::shipped`]). They are never trained on.

use super::{Pair, PairFormat, parse};
use crate::data::shipped::{self, Archive};
use anyhow::{Context, ensure};
use std::path::{Path, PathBuf};

/// Where the pairs come from.
pub const PACKAGE: &str = "wetextprocessing==1.2.0";
pub const NAME: &str = "wetext-1.2.0-en-test";
const N_FILES: usize = 15;
const ARCHIVE: Archive = Archive {
    name: "corpora/wetext-1.2.0-en-test.tar.gz",
    bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/corpora/wetext-1.2.0-en-test.tar.gz")),
    sha256: "32cceb5e24ddea5718c94bf082e34a104824e1a158739b72a750420bcdfc63d4",
    prefix: "tn/english/test/data",
    files: N_FILES,
};

/// The held-out pairs, category = file stem (`cardinal`, `date`, …), unpacked into the cache
/// on first use.
pub fn load(cache: &Path) -> anyhow::Result<Vec<Pair>> {
    let dir = unpack(cache)?;
    let files = super::super::cache::text_files(&dir)?;
    ensure!(
        files.len() == N_FILES,
        "the cached held-out set {} has {} files, expected {N_FILES}; delete it (normlab unpacks it again)",
        dir.display(),
        files.len()
    );
    let mut out = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        let category = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        out.extend(parse(&text, &PairFormat::Arrow, &f.display().to_string(), Some(&category))?);
    }
    Ok(out)
}

/// Unpacks the shipped pairs into the cache (once).
pub fn unpack(cache: &Path) -> anyhow::Result<PathBuf> {
    crate::data::cache::publish(&cache.join("corpora"), NAME, false, |work| {
        shipped::unpack(&ARCHIVE, &work.join("data"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped set as a user's first run unpacks it: 111 pairs in 15 categories, counted
    /// with `grep -c "=>"` on the files of the published wheel.
    #[test]
    fn the_real_held_out_set_is_unpacked_and_read_per_category() {
        let root = crate::testutil::temp_dir("wetext-real");
        let pairs = load(&root).unwrap();
        assert_eq!(pairs.len(), 111);
        let count = |c: &str| pairs.iter().filter(|p| p.category.as_deref() == Some(c)).count();
        let want = [("cardinal", 27), ("date", 14), ("decimal", 3), ("electronic", 1), ("fraction", 7), ("measure", 7)];
        for (c, n) in want.into_iter().chain([("money", 8), ("normalizer", 8), ("ordinal", 11), ("range", 1)]) {
            assert_eq!(count(c), n, "{c}");
        }
        for (c, n) in [("roman", 1), ("telephone", 2), ("time", 9), ("whitelist", 6), ("word", 6)] {
            assert_eq!(count(c), n, "{c}");
        }
        let first = pairs.iter().find(|p| p.category.as_deref() == Some("cardinal")).unwrap();
        assert_eq!((first.source.as_str(), first.target.as_str()), ("-23", "negative twenty three"));
    }
}
