//! Readers for plain, gzip (`.gz`, multi-member as `gzip` writes them) and zstd (`.zst`)
//! files, buffered.

use super::files::{Compression, CorpusFile};
use anyhow::Context;
use std::io::{BufRead, BufReader};

/// The file's decompressed bytes as a buffered reader, a leading UTF-8 byte-order mark
/// (which Windows tools write) skipped.
pub fn open(file: &CorpusFile) -> anyhow::Result<Box<dyn BufRead>> {
    let mut r = open_raw(file)?;
    let start = r.fill_buf().map_err(|e| failed(file, Some(1), e))?;
    if start.starts_with(b"\xEF\xBB\xBF") {
        r.consume(3);
    }
    Ok(r)
}

fn open_raw(file: &CorpusFile) -> anyhow::Result<Box<dyn BufRead>> {
    let f = std::fs::File::open(&file.path).with_context(|| format!("cannot open {}", file.path.display()))?;
    const BUF: usize = 1 << 20;
    Ok(match file.compression {
        Compression::None => Box::new(BufReader::with_capacity(BUF, f)),
        Compression::Gzip => Box::new(BufReader::with_capacity(BUF, flate2::read::MultiGzDecoder::new(f))),
        Compression::Zstd => Box::new(BufReader::with_capacity(
            BUF,
            zstd::stream::read::Decoder::new(f)
                .with_context(|| format!("cannot start reading {}", file.path.display()))?,
        )),
    })
}

/// A read error as one line naming the file, the line it stopped at and the likely cause.
pub fn failed(file: &CorpusFile, line: Option<usize>, e: std::io::Error) -> anyhow::Error {
    let at = line.map(|l| format!(" at line {l}")).unwrap_or_default();
    // `read_line` reports text that is not UTF-8 as InvalidData: the file is whole, its
    // encoding is not (a damaged stream is reported by the decompressor as another kind).
    if e.kind() == std::io::ErrorKind::InvalidData && e.to_string().contains("UTF-8") {
        return anyhow::anyhow!(
            "{}{at}: the text is not UTF-8 ({e}); convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
            file.path.display()
        );
    }
    let what = match file.compression {
        Compression::None => "cannot read it".to_string(),
        Compression::Gzip => "its gzip data is damaged or cut short".to_string(),
        Compression::Zstd => "its zstd data is damaged or cut short".to_string(),
    };
    anyhow::anyhow!("{}{at}: {what} ({e}); replace the file with a complete copy", file.path.display())
}

/// Reads what is left of `r` to the end; the decompressor's error, if the stream is damaged
/// past this point (a JSON error on a line of a compressed file may be the damage's garbage).
pub fn damage_after(file: &CorpusFile, mut r: impl BufRead, line: usize) -> Option<anyhow::Error> {
    if file.compression == Compression::None {
        return None;
    }
    std::io::copy(&mut r, &mut std::io::sink()).err().map(|e| failed(file, Some(line), e))
}
