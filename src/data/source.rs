//! What a corpus path names, decided before anything is read: the built-in corpus, a corpus
//! read into memory (one text file, a directory of text files, one plain `.jsonl` file: the
//! small corpora normlab always read), a directory `normlab data prepare` wrote, token shards
//! written by another tool (nanoGPT `.bin`, numpy `.npy`), or documents streamed through a
//! preparation into the cache (parquet, JSON lines and arrays, gzip or zstd compressed, many
//! shards as a directory or a glob).

use super::config::{CorpusFormat, DataConfig};
use super::read::{self, CorpusFile, FileKind, files::Compression};
use super::shards;
use std::path::{Path, PathBuf};

pub enum Source {
    Sotu,
    /// Read whole into memory and tokenized into one cache file per split.
    InMemory,
    /// A prepared directory.
    Prepared(PathBuf),
    /// Token shards: training files and validation files.
    Shards {
        train: Vec<PathBuf>,
        val: Vec<PathBuf>,
    },
    /// Documents streamed through a preparation in the cache.
    Streamed(Vec<CorpusFile>),
}

/// What `corpus` names under `cfg` (its format, its validation shards).
pub fn classify(corpus: &str, cfg: &DataConfig) -> anyhow::Result<Source> {
    if corpus == "sotu" {
        return Ok(Source::Sotu);
    }
    let path = Path::new(corpus);
    if path.join(super::prepare::manifest::FILE).is_file() {
        return Ok(Source::Prepared(path.to_path_buf()));
    }
    if cfg.format != CorpusFormat::Auto || legacy(path) {
        return Ok(Source::InMemory);
    }
    let files = read::resolve(corpus)?;
    if files.iter().all(|f| shards::is_shard_path(&f.path)) {
        return shard_files(files, cfg);
    }
    if path.is_dir() && !read::files::all_records(&files) {
        return Ok(Source::InMemory); // a directory of text files: each one document
    }
    Ok(Source::Streamed(files))
}

/// One uncompressed text or `.jsonl` file: read whole, as normlab always has.
fn legacy(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_ascii_lowercase();
    let other = [".gz", ".zst", ".parquet", ".json", ".ndjson", ".tok", ".bin", ".npy"];
    path.is_file() && !other.iter().any(|e| name.ends_with(e))
}

/// Token shards split into training and validation files: `data.val_corpus` names the
/// validation ones; else files with `val` in their name are (nanoGPT's `fineweb_val_*.bin`).
fn shard_files(files: Vec<CorpusFile>, cfg: &DataConfig) -> anyhow::Result<Source> {
    let paths: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
    let (train, val) = match &cfg.val_corpus {
        Some(v) => (paths, read::resolve(v)?.into_iter().map(|f| f.path).collect()),
        None => paths.into_iter().partition(|p| !is_val_name(p)),
    };
    anyhow::ensure!(
        !train.is_empty() && !val.is_empty(),
        "token shards need training and validation files: name the validation shards with data.val_corpus (or \
         put `val` in their names, as nanoGPT's fineweb_val_*.bin)"
    );
    Ok(Source::Shards { train, val })
}

fn is_val_name(p: &Path) -> bool {
    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_ascii_lowercase();
    n.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "val" || w == "valid" || w == "validation")
}

/// The files in words: how many of each kind, how many compressed.
pub fn describe(files: &[CorpusFile]) -> String {
    let n = |k: FileKind| files.iter().filter(|f| f.kind == k).count();
    let z = files.iter().filter(|f| f.compression != Compression::None).count();
    format!(
        "{} files ({} parquet, {} JSON lines, {} JSON, {} text; {} compressed)",
        files.len(),
        n(FileKind::Parquet),
        n(FileKind::JsonLines),
        n(FileKind::Json),
        n(FileKind::Text),
        z
    )
}
