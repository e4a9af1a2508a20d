//! Every document of a corpus's files, in order, each file read by the reader of its kind.

use super::files::{CorpusFile, FileKind, OnText};
use super::{decompress, json, parquet};
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
