//! Append-only JSON-lines files of one record type (`metrics.jsonl`, `probes.jsonl`,
//! `results.jsonl`). A checkpoint records each file's length after forcing it to disk
//! ([`JsonlWriter::durable_len`]); a resumed run truncates its files to those lengths, so they
//! always match the checkpointed state. A file shorter than its recorded length (deleted,
//! truncated, or cut by a power loss on a disk that lied) keeps its complete records and
//! continues from there: never padded.

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
    /// Opens for appending after truncating to `keep_bytes` (0 for a fresh file), or, when the
    /// file is shorter than that, to its last complete line.
    pub fn open(path: &Path, keep_bytes: u64) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let len = file.metadata().with_context(|| format!("cannot read the length of {}", path.display()))?.len();
        let keep = if len >= keep_bytes { keep_bytes } else { complete_lines_len(&file, len, path)? };
        file.set_len(keep).with_context(|| format!("cannot truncate {} to {keep} bytes", path.display()))?;
        let mut w = Self { path: path.to_path_buf(), file };
        w.file.seek(std::io::SeekFrom::End(0)).with_context(|| format!("cannot seek in {}", path.display()))?;
        Ok(w)
    }

    pub fn write<T: Serialize>(&mut self, record: &T) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line).with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// The length in bytes written so far (not yet necessarily on disk).
    pub fn position(&mut self) -> anyhow::Result<u64> {
        use std::io::Seek;
        self.file.stream_position().with_context(|| format!("cannot read the length of {}", self.path.display()))
    }

    /// The length in bytes, once everything written is on disk (fsync); saved in checkpoints.
    pub fn durable_len(&mut self) -> anyhow::Result<u64> {
        self.file.flush().with_context(|| format!("cannot write {}", self.path.display()))?;
        self.file.sync_data().with_context(|| format!("cannot flush {} to disk", self.path.display()))?;
        Ok(self.file.metadata().with_context(|| format!("cannot read the length of {}", self.path.display()))?.len())
    }
}

/// The length of the first `len` bytes of `file` up to and including its last newline, with
/// nothing after the first NUL byte (what a disk leaves of unwritten blocks).
fn complete_lines_len(file: &std::fs::File, len: u64, path: &Path) -> anyhow::Result<u64> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(len as usize);
    (&mut &*file).take(len).read_to_end(&mut bytes).with_context(|| format!("cannot read {}", path.display()))?;
    let valid = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(bytes[..valid].iter().rposition(|&b| b == b'\n').map_or(0, |i| i as u64 + 1))
}

/// Every record of a JSON-lines file, through its type. A record is complete with its newline:
/// a last line without one is a write that was interrupted (the process was killed) and is not
/// a record; any complete line that does not parse is corruption, named by file and line.
pub fn read<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// The records of JSON-lines `text` (named `name` in errors), as [`read`] takes them.
pub fn parse<T: DeserializeOwned>(text: &str, name: &str) -> anyhow::Result<Vec<T>> {
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| {
                let shown: String = l.trim().chars().take(120).collect();
                format!("{name} line {} is corrupt (two writers, or a damaged disk?): {shown}", i + 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_shorter_than_its_recorded_length_keeps_its_complete_lines_and_is_never_padded() {
        let dir = std::env::temp_dir().join(format!("normlab-jsonl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m.jsonl");
        // Two complete records (8 bytes each), a cut third, then NULs a lying disk left.
        std::fs::write(&p, b"{\"a\":1}\n{\"a\":2}\n{\"a\":\0\0\0").unwrap();
        let mut w = JsonlWriter::open(&p, 100).unwrap();
        assert_eq!(w.durable_len().unwrap(), 16);
        w.write(&serde_json::json!({"a": 3})).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        // Longer than recorded: cut back to the checkpoint's length.
        let w = JsonlWriter::open(&p, 8).unwrap();
        drop(w);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":1}\n");
        // Deleted: starts empty.
        std::fs::remove_file(&p).unwrap();
        let mut w = JsonlWriter::open(&p, 8).unwrap();
        assert_eq!(w.durable_len().unwrap(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
