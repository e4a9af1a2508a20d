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
        file.set_len(keep_bytes)?;
        let mut w = Self { path: path.to_path_buf(), file };
        w.file.seek(std::io::SeekFrom::End(0))?;
        Ok(w)
    }

    pub fn write<T: Serialize>(&mut self, record: &T) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line).with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Current length in bytes; saved in checkpoints.
    pub fn bytes_written(&mut self) -> anyhow::Result<u64> {
        self.file.flush()?;
        Ok(self.file.metadata()?.len())
    }
}

/// Every record of a JSON-lines file, through its type.
pub fn read<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{} line {} is corrupt", path.display(), i + 1)))
        .collect()
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
