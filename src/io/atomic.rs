//! Atomic file writes: a reader (a report, a resumed run, a sweep collecting results) never
//! sees a half-written file, whatever kills the writer.

use anyhow::Context;
use std::path::Path;

/// Writes `bytes` to `path` via a temp file in the same directory, fsync, rename and fsync of
/// the directory, so a reader never sees a half-written file and the new name survives a power
/// loss once this returns. An error names the file and the operation, and the
/// temp file is removed (a full disk is not filled further by leftovers).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Unique per process and call: concurrent writers (sweep runs sharing a token cache) must
    // not share a temp file; the last rename wins with a complete file either way.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(bytes).with_context(|| format!("cannot write {} ({} bytes)", path.display(), bytes.len()))?;
        f.sync_all().with_context(|| format!("cannot flush {} to disk", path.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        sync_dir(dir)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Forces `dir`'s entries (a rename into it) to disk.
pub fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot flush the directory {} to disk", dir.display()))?;
    Ok(())
}
