//! Append-only JSON-lines files of one record type (`metrics.jsonl`, `probes.jsonl`,
//! `results.jsonl`). A resumed run truncates its files to the lengths recorded in its
//! checkpoint, so they always match the checkpointed state.

use anyhow::Context;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

pub struct JsonlWriter {
    path: PathBuf,
    file: std::fs::File,
}

impl JsonlWriter {
    /// Opens for appending after truncating to `keep_bytes` (0 for a fresh file).
    pub fn open(path: &Path, keep_bytes: u64) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.set_len(keep_bytes)
            .with_context(|| format!("cannot truncate {} to {keep_bytes} bytes", path.display()))?;
        let mut w = Self { path: path.to_path_buf(), file };
        w.file.seek(std::io::SeekFrom::End(0)).with_context(|| format!("cannot seek in {}", path.display()))?;
        Ok(w)
    }

    pub fn write<T: Serialize>(&mut self, record: &T) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line).with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Current length in bytes; saved in checkpoints.
    pub fn bytes_written(&mut self) -> anyhow::Result<u64> {
        self.file.flush().with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(self.file.metadata().with_context(|| format!("cannot read the length of {}", self.path.display()))?.len())
    }
}

/// Every record of a JSON-lines file, through its type. A record is complete with its newline:
/// a last line without one is a write that was interrupted (the process was killed) and is not
/// a record; any complete line that does not parse is corruption, named by file and line.
pub fn read<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| {
                let shown: String = l.trim().chars().take(120).collect();
                format!("{} line {} is corrupt (two writers, or a damaged disk?): {shown}", path.display(), i + 1)
            })
        })
        .collect()
}

/// Like [`read`], but a missing file is an empty one (a run that has not written it yet); a
/// corrupt record is still an error that names the file and line.
pub fn read_if_exists<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    if path.exists() { read(path) } else { Ok(Vec::new()) }
}

/// Writes all `records` as a new file, atomically.
pub fn write_all<T: Serialize>(path: &Path, records: &[T]) -> anyhow::Result<()> {
    let mut text = Vec::new();
    for r in records {
        serde_json::to_writer(&mut text, r)?;
        text.push(b'\n');
    }
    super::write_atomic(path, &text)
}
