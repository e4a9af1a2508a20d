//! A user's text file (a config, a sweep file, a task list) read whole, refused with one clear
//! line when it cannot be one: a directory, a FIFO or a device (`/dev/zero` would never end),
//! a file past [`MAX_TEXT_BYTES`], or text that is not UTF-8.

use anyhow::{Context, bail};
use std::io::Read;
use std::path::Path;

/// The largest text file read whole (a config is a few kilobytes).
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// The text of `path`; `what` names the file in errors ("config", "sweep file").
pub fn read_text(path: &Path, what: &str) -> anyhow::Result<String> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {what} {}; check the path", path.display()))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "not a regular file (a FIFO or device)" };
        bail!("{what} {} is {kind}; give a TOML file", path.display());
    }
    let mut bytes = Vec::new();
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {what} {}", path.display()))?;
    f.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        bail!("{what} {} is larger than {} MiB; it cannot be a config", path.display(), MAX_TEXT_BYTES >> 20);
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{what} {} is not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_other_bytes_are_refused() {
        let e = read_text(Path::new("/dev/zero"), "config").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_text(Path::new("/"), "config").unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("normlab-io-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bad.toml"), b"a = \xff").unwrap();
        let e = read_text(&dir.join("bad.toml"), "config").unwrap_err().to_string();
        assert!(e.contains("not UTF-8 text (invalid byte at offset 4)"), "{e}");
        std::fs::write(dir.join("ok.toml"), "a = 1\n").unwrap();
        assert_eq!(read_text(&dir.join("ok.toml"), "config").unwrap(), "a = 1\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
