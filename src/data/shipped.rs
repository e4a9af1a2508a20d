//! The corpora that ship with normlab (`corpora/*.tar.gz` in the repository, compiled into the
//! binary): checked against their SHA-256 and unpacked into the cache on first use, so that
//! training on them needs no network and no other tool. `corpora/README.md` gives where each
//! comes from and its licence; `tools/make_corpora.sh` rebuilds them byte for byte from the
//! published packages.

use anyhow::{Context, ensure};
use std::path::Path;

/// A shipped archive.
pub struct Archive {
    pub name: &'static str,
    pub bytes: &'static [u8],
    pub sha256: &'static str,
    /// The directory inside the archive whose `*.txt` files are the data.
    pub prefix: &'static str,
    /// How many such files it holds.
    pub files: usize,
}

/// Checks `a` and writes its data files into `out`, flat.
pub fn unpack(a: &Archive, out: &Path) -> anyhow::Result<()> {
    let sum = super::cache::sha256_hex(a.bytes);
    ensure!(
        sum == a.sha256,
        "the built-in archive {} has SHA-256 {sum}, expected {}: this normlab binary is damaged; rebuild it",
        a.name,
        a.sha256
    );
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(a.bytes));
    let mut n = 0;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let Ok(rest) = path.strip_prefix(a.prefix) else { continue };
        let file = rest.file_name().filter(|f| rest.components().count() == 1 && f.to_string_lossy().ends_with(".txt"));
        if let Some(file) = file {
            entry.unpack(out.join(file)).with_context(|| format!("cannot write into {}", out.display()))?;
            n += 1;
        }
    }
    ensure!(n == a.files, "the built-in archive {} holds {n} data files, expected {}", a.name, a.files);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cache::sha256_hex;

    /// A tar.gz written by Python's `tarfile` (gzip): `d/a.txt`, `d/b.txt`, `d/deep/c.txt`,
    /// `d/e.json` and `top.txt`; only `d`'s own text files are data.
    const FIXTURE: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shipped.tar.gz"));

    fn archive(sha256: &'static str, files: usize) -> Archive {
        Archive { name: "fixture", bytes: FIXTURE, sha256, prefix: "d", files }
    }

    #[test]
    fn only_the_prefixs_own_text_files_are_unpacked_and_a_wrong_archive_is_refused() {
        let root = crate::testutil::temp_dir("shipped");
        let sha: &'static str = Box::leak(sha256_hex(FIXTURE).into_boxed_str());
        unpack(&archive(sha, 2), &root.join("out")).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(root.join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "b.txt"]);
        assert_eq!(std::fs::read_to_string(root.join("out/b.txt")).unwrap(), "beta\n");
        let e = unpack(&archive(sha, 3), &root.join("three")).unwrap_err();
        assert!(format!("{e:#}").contains("holds 2 data files, expected 3"), "{e:#}");
        let e = unpack(&archive("00", 2), &root.join("bad")).unwrap_err();
        assert!(format!("{e:#}").contains("damaged"), "{e:#}");
    }
}
