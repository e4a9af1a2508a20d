//! Real held-out pairs: the English text-normalisation test pairs that ship in the PyPI
//! package `wetextprocessing==1.2.0` (`tn/english/test/data/*.txt`, 15 files, 111 pairs,
//! `written => spoken`, Apache-2.0), one category per file. They are never trained on.
//!
//! The wheel is fetched once with the ordinary pip client (`pip download --no-deps`), its
//! SHA-256 checked against the value below, and the files unpacked into the cache; `--file`
//! takes a copy of the same wheel instead (offline machines).

use super::{Pair, PairFormat, parse};
use anyhow::{Context, bail, ensure};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const PACKAGE: &str = "wetextprocessing==1.2.0";
pub const WHEEL: &str = "wetextprocessing-1.2.0-py3-none-any.whl";
/// SHA-256 of the wheel (`pip download --no-deps wetextprocessing==1.2.0`).
pub const SHA256: &str = "2c7c1e048ede69b67e8a0921093c08a591bc9d7566ad70f5343686196f97aea9";
pub const NAME: &str = "wetext-1.2.0-en-test";
const PREFIX: &str = "tn/english/test/data/";
const N_FILES: usize = 15;

/// The held-out pairs, category = file stem (`cardinal`, `date`, …), fetching them when they
/// are not cached.
pub fn load(cache: &Path) -> anyhow::Result<Vec<Pair>> {
    let dir = fetch(cache, None)?;
    let files = super::super::cache::text_files(&dir)?;
    ensure!(
        files.len() == N_FILES,
        "the cached held-out set {} has {} files, expected {N_FILES}; delete it and run `normlab data fetch-wetext`",
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

/// Fetches (or, with `wheel`, takes) the wheel, checks it and unpacks the test files.
pub fn fetch(cache: &Path, wheel: Option<&Path>) -> anyhow::Result<PathBuf> {
    super::super::cache::publish(&cache.join("corpora"), NAME, wheel.is_some(), |work| {
        let whl = match wheel {
            Some(w) => w.to_path_buf(),
            None => pip_download(work)?,
        };
        let bytes = std::fs::read(&whl).with_context(|| format!("cannot read {}", whl.display()))?;
        let sum = super::super::cache::sha256_hex(&bytes);
        ensure!(
            sum == SHA256,
            "{} has SHA-256 {sum}, expected {SHA256}: it is not {PACKAGE} (corrupt download or another version)",
            whl.display()
        );
        unpack(&bytes, &work.join("data"))
    })
}

/// Writes the wheel's `tn/english/test/data/*.txt` into `out`.
fn unpack(wheel: &[u8], out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(wheel)).context("the wheel is not a zip archive")?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i)?;
        let name = entry.name()?.to_string();
        let Some(file) = name.strip_prefix(PREFIX).filter(|f| f.ends_with(".txt") && !f.contains('/')) else {
            continue;
        };
        let mut text = String::new();
        entry.read_to_string(&mut text).with_context(|| format!("{name} in the wheel is not UTF-8 text"))?;
        crate::io::write_atomic(&out.join(file), text.as_bytes())?;
        n += 1;
    }
    ensure!(n == N_FILES, "the wheel holds {n} English test files, expected {N_FILES}");
    Ok(())
}

fn pip_download(work: &Path) -> anyhow::Result<PathBuf> {
    let mut tried = Vec::new();
    for (exe, pre) in [("pip", &[][..]), ("pip3", &[][..]), ("python3", &["-m", "pip"][..])] {
        let out =
            Command::new(exe).args(pre).args(["download", "--no-deps", "--quiet", PACKAGE, "-d"]).arg(work).output();
        match out {
            Ok(o) if o.status.success() => {
                let whl = work.join(WHEEL);
                ensure!(whl.is_file(), "pip download did not write {}", whl.display());
                return Ok(whl);
            }
            Ok(o) => {
                tried.push(format!("`{exe}` failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr).trim()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => tried.push(format!("cannot run {exe}: {e}")),
        }
    }
    if tried.is_empty() {
        bail!(
            "the held-out pairs are downloaded with pip, which is not installed: install it (Debian/Ubuntu: `sudo \
                apt-get install python3-pip`), or copy {WHEEL} here and run `normlab data fetch-wetext --file WHEEL`, \
                or set data.heldout = \"none\""
        );
    }
    bail!(
        "`pip download {PACKAGE}` failed: {}; check the network or pip's index settings, or copy {WHEEL} here and run \
            `normlab data fetch-wetext --file WHEEL`",
        tried.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture is a zip written by Python's `zipfile` (deflate), shaped like the wheel: 15
    /// English test files, a rules file, another language's test file and a deeper file.
    #[test]
    fn unpack_keeps_exactly_the_english_test_files_and_fetch_checks_the_checksum() {
        let root = crate::testutil::temp_dir("wetext");
        let zip = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pairs/mini-wheel.zip")).unwrap();
        unpack(&zip, &root.join("out")).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(root.join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 15);
        assert_eq!((names[0].as_str(), names[14].as_str()), ("a.txt", "o.txt"));
        let c = std::fs::read_to_string(root.join("out/c.txt")).unwrap();
        assert_eq!(c, "2 => c number 2\n");
        // A wheel with a file missing is refused.
        let err = unpack(b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", &root.join("empty")).unwrap_err();
        assert!(format!("{err:#}").contains("0 English test files"), "{err:#}");
        // A file that is not this wheel is refused by its checksum, naming the expected one.
        let fake = root.join("fake.whl");
        std::fs::write(&fake, &zip).unwrap();
        let err = fetch(&root.join("cache"), Some(&fake)).unwrap_err();
        assert!(format!("{err:#}").contains(SHA256), "{err:#}");
        assert!(!root.join("cache/corpora").join(NAME).exists(), "nothing published");
    }

    /// The real wheel, fetched with pip as a user's first run does: 111 pairs in 15 categories,
    /// counted with `grep -c "=>"` on the unzipped wheel's files.
    #[test]
    fn the_real_held_out_set_is_fetched_with_pip_and_read_per_category() {
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
