//! Readers for plain, gzip (`.gz`, multi-member as `gzip` writes them) and zstd (`.zst`)
//! files, buffered.

use super::files::{Compression, CorpusFile};
use anyhow::Context;
use std::io::{BufRead, BufReader};

/// The file's decompressed bytes as a buffered reader.
pub fn open(file: &CorpusFile) -> anyhow::Result<Box<dyn BufRead>> {
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
    let what = match file.compression {
        Compression::None => "cannot read it".to_string(),
        Compression::Gzip => "its gzip data is damaged or cut short".to_string(),
        Compression::Zstd => "its zstd data is damaged or cut short".to_string(),
    };
    anyhow::anyhow!("{}{at}: {what} ({e}); replace the file with a complete copy", file.path.display())
}
