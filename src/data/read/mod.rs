//! Corpora streamed one document at a time, never held whole: plain text, JSON lines and JSON
//! arrays (each optionally gzip- or zstd-compressed), parquet, and many shards of them given as
//! a directory or a glob. A damaged file is one error naming the file and the line (row) where
//! reading stopped.
//!
//! - [`files`]: what a corpus path names (a file, a directory, a glob), each file's kind, and
//!   the callback every reader hands each text to
//! - [`each`]: every document of a list of files, in order
//! - [`decompress`]: `.gz` / `.zst` readers
//! - [`json`]: JSON lines and JSON arrays
//! - [`parquet`]: one string column of a parquet file, row group by row group
//! - [`records`]: a file's records whole, as JSON values (task files, conversations)

pub mod decompress;
pub mod each;
pub mod files;
pub mod json;
pub mod parquet;
pub mod records;

pub use each::for_each;
pub use files::{CorpusFile, FileKind, OnText, resolve};
