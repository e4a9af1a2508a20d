//! A test's scratch directory, removed when the test passes.
//!
//! Kept when the test panics, so a failure can be inspected; removed otherwise, so repeated
//! runs (and CI, whose disk is shared) do not pile up runs, checkpoints and corpora in `/tmp`.
//! Shared by the unit tests (`crate::testutil`) and the integration tests (`tests/common`).

use std::path::{Path, PathBuf};

pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh empty directory `<tmp>/normlab-<name>-<pid>`.
    pub fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("normlab-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
