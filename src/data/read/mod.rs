//! Corpora streamed one document at a time, never held whole: plain text, JSON lines and JSON
//! arrays (each optionally gzip- or zstd-compressed), parquet, and many shards of them given as
//! a directory or a glob. A damaged file is one error naming the file and the line (row) where
//! reading stopped.
//!
//! - [`files`]: what a corpus path names (a file, a directory, a glob) and each file's kind
//! - [`decompress`]: `.gz` / `.zst` readers
//! - [`json`]: JSON lines and JSON arrays
//! - [`parquet`]: one string column of a parquet file, row group by row group

pub mod decompress;
pub mod files;
pub mod json;
pub mod parquet;

pub use files::{CorpusFile, FileKind, resolve};

use std::ops::ControlFlow;

/// Calls `f` on every document of `files`, in order, until it says stop; `field` names the
/// text of JSON records and parquet rows. Empty documents are passed too (the caller drops
/// them, so document counts are the files').
pub fn for_each(files: &[CorpusFile], field: &str, f: &mut OnText<'_>) -> anyhow::Result<()> {
    for file in files {
        let flow = match file.kind {
            FileKind::Text => text(file, f)?,
            FileKind::JsonLines => json::lines(file, field, f)?,
            FileKind::Json if json::starts_array(file)? => json::array(file, field, f)?,
            FileKind::Json => json::lines(file, field, f)?,
            FileKind::Parquet => parquet::rows(file, field, f)?,
        };
        if flow.is_break() {
            break;
        }
    }
    Ok(())
}

/// The callback the readers call with each document's text.
pub type OnText<'a> = dyn FnMut(&str) -> anyhow::Result<ControlFlow<()>> + 'a;

/// A whole (decompressed) text file as one document.
fn text(file: &CorpusFile, f: &mut OnText<'_>) -> anyhow::Result<ControlFlow<()>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    decompress::open(file)?.read_to_end(&mut bytes).map_err(|e| decompress::failed(file, None, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not UTF-8 text (invalid byte at offset {}); convert it to UTF-8",
            file.path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    f(&text)
}
