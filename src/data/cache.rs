//! Where downloaded corpora, trained tokenizers and token files are cached.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// `$NORMLAB_CACHE`, else `$XDG_CACHE_HOME/normlab`, else `~/.cache/normlab`, else
/// `.normlab-cache` in the working directory.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NORMLAB_CACHE").filter(|s| !s.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(d).join("normlab");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(h).join(".cache").join("normlab");
    }
    PathBuf::from(".normlab-cache")
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(bytes))
}

/// Hex SHA-256 over several parts, each length-prefixed so part boundaries matter.
pub fn sha256_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `parent/name`, filled once by `fill(work)`, which writes the content into `work/data`: the
/// final directory appears by one rename, so an interrupted fetch leaves nothing that looks
/// complete. An existing directory is kept unless `replace`.
///
/// Safe to call from several threads or processes at once: each fills its own directory, and
/// a copy that another caller completed first is kept (both passed the same checks).
pub fn publish(
    parent: &Path,
    name: &str,
    replace: bool,
    fill: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let target = parent.join(name);
    if !replace && target.is_dir() {
        return Ok(target);
    }
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let work = parent.join(format!(".{name}.partial-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let result = fill(&work).and_then(|()| {
        if replace && target.is_dir() {
            std::fs::remove_dir_all(&target).with_context(|| format!("cannot remove {}", target.display()))?;
        }
        match std::fs::rename(work.join("data"), &target) {
            Ok(()) => Ok(()),
            // Another process finished first: its copy is the same verified content.
            Err(_) if target.is_dir() => Ok(()),
            Err(e) => Err(e).with_context(|| format!("cannot move the data into {}", target.display())),
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    result.map(|()| target)
}

/// The `*.txt` files directly in `dir`, sorted by path (a fetched corpus's files).
pub fn text_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    Ok(files)
}
