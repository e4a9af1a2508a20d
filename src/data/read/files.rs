//! The files a corpus path names and how each is read. A path is a file, a directory (every
//! corpus file under it, recursively, sorted by path; hidden files skipped) or a glob
//! (`fineweb/*.parquet`, `c4/en/c4-train.*.json.gz`). A file's kind comes from its name with
//! the compression suffix (`.gz`, `.zst`) removed.

use anyhow::{Context, bail, ensure};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The callback the readers call with each document's text.
pub type OnText<'a> = dyn FnMut(&str) -> anyhow::Result<ControlFlow<()>> + 'a;

/// How a file's documents are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// The whole file is one document.
    Text,
    /// `.jsonl`, `.ndjson`: one object per line.
    JsonLines,
    /// `.json`: an array of objects when it starts with `[`, else JSON lines (C4 ships JSON
    /// lines as `*.json.gz`); told apart when read.
    Json,
    /// `.parquet`: one row per document.
    Parquet,
}

/// Compression of a file, from its last suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// One file of a corpus.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusFile {
    pub path: PathBuf,
    pub kind: FileKind,
    pub compression: Compression,
    pub size: u64,
}

/// The corpus files `spec` names, sorted by path.
pub fn resolve(spec: &str) -> anyhow::Result<Vec<CorpusFile>> {
    let paths = if spec.contains(['*', '?', '[']) {
        glob_paths(spec)?
    } else {
        let path = Path::new(spec);
        ensure!(path.exists(), "data corpus `{spec}` does not exist; give a file, a directory or a glob of files");
        if path.is_dir() {
            let mut out = Vec::new();
            walk(path, &mut out)?;
            ensure!(!out.is_empty(), "the directory {spec} holds no files");
            out
        } else {
            vec![path.to_path_buf()]
        }
    };
    let mut files = paths.iter().map(|p| describe(p)).collect::<anyhow::Result<Vec<_>>>()?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn glob_paths(spec: &str) -> anyhow::Result<Vec<PathBuf>> {
    let entries = glob::glob(spec).with_context(|| format!("`{spec}` is not a valid glob"))?;
    let mut out = Vec::new();
    for e in entries {
        let p = e.with_context(|| format!("cannot read a match of `{spec}`"))?;
        if p.is_file() {
            out.push(p);
        }
    }
    ensure!(!out.is_empty(), "the glob `{spec}` matches no files");
    Ok(out)
}

/// Every regular, non-hidden file under `dir`, recursively (unsorted), each once: a directory
/// or file reached again through a symbolic link (a loop, or a second name for the same one)
/// is skipped, so no document is read twice and none is held out in one copy and trained on
/// in another.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    seen.insert(identity(dir)?);
    walk_from(dir, out, &mut seen)
}

/// A file's or directory's (device, inode): the same for every path that reaches it.
fn identity(p: &Path) -> anyhow::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok((m.dev(), m.ino()))
}

fn walk_from(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    seen: &mut std::collections::HashSet<(u64, u64)>,
) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        entries.push(e?.path());
    }
    // In name order, so that of two names for one file the first is the one kept.
    entries.sort();
    for p in entries {
        if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        if !(p.is_dir() || p.is_file()) || !seen.insert(identity(&p)?) {
            continue;
        }
        if p.is_dir() {
            walk_from(&p, out, seen)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// A file's kind, compression and size; refuses what is not a regular file.
pub fn describe(path: &Path) -> anyhow::Result<CorpusFile> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file (a FIFO, device or socket); give files of text", path.display());
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_ascii_lowercase();
    let (stem, compression) = match () {
        _ if name.ends_with(".gz") => (&name[..name.len() - 3], Compression::Gzip),
        _ if name.ends_with(".zst") => (&name[..name.len() - 4], Compression::Zstd),
        _ => (name.as_str(), Compression::None),
    };
    let ext = stem.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
    let mut file = CorpusFile { path: path.to_path_buf(), kind: FileKind::Text, compression, size: meta.len() };
    file.kind = match ext {
        "parquet" => FileKind::Parquet,
        "jsonl" | "ndjson" => FileKind::JsonLines,
        "json" => FileKind::Json,
        _ => FileKind::Text,
    };
    ensure!(
        !(file.kind == FileKind::Parquet && compression != Compression::None),
        "{}: parquet compresses its own pages; give the .parquet file uncompressed",
        path.display()
    );
    Ok(file)
}

/// Whether every file is a kind that holds many documents (so the corpus can be streamed and
/// split by document), rather than whole-file texts.
pub fn all_records(files: &[CorpusFile]) -> bool {
    files.iter().all(|f| f.kind != FileKind::Text)
}
