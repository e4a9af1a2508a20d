//! Where downloaded corpora, trained tokenizers and token files are cached.

use std::path::PathBuf;

/// `$NORMLAB_CACHE`, else `$XDG_CACHE_HOME/normlab`, else `~/.cache/normlab`, else
/// `.normlab-cache` in the working directory.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NORMLAB_CACHE").filter(|s| !s.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(d).join("normlab");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(h).join(".cache").join("normlab");
    }
    PathBuf::from(".normlab-cache")
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(bytes))
}

/// Hex SHA-256 over several parts, each length-prefixed so part boundaries matter.
pub fn sha256_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
