//! Exclusive locks on directories (a run being trained, a sweep being run).
//!
//! The lock is `flock(2)` on the directory itself, held on an open descriptor for the holder's
//! life and released by the kernel however the holder ends (kill -9 included). Because it sits
//! on the directory's inode, deleting a file cannot free it, and a directory locked under a
//! temporary name keeps its lock when renamed into place. The refusal names the holder: the
//! kernel's own record (`/proc/locks`, by the directory's inode) where there is one, else the
//! pid published in `DIR/.lock` (written atomically once the lock is held).

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Held while the directory is in use; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct DirLock {
    _dir: std::fs::File,
}

/// Who holds a directory's lock: the pid published in `DIR/.lock`, when it names a live process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(p) => write!(f, "pid {p}"),
            None => write!(f, "a process whose pid is not published yet"),
        }
    }
}

/// The file that names the holder.
pub fn pid_file(dir: &Path) -> PathBuf {
    dir.join(".lock")
}

/// Takes the lock on `dir` (which must exist), or says who holds it.
pub fn try_lock(dir: &Path) -> anyhow::Result<Result<DirLock, Holder>> {
    let file = std::fs::File::open(dir).with_context(|| format!("cannot open {} to lock it", dir.display()))?;
    if !flock(&file) {
        return Ok(Err(holder(dir)));
    }
    let pid = std::process::id().to_string();
    super::write_atomic(&pid_file(dir), pid.as_bytes())?;
    Ok(Ok(DirLock { _dir: file }))
}

/// Whether another process (or another descriptor of this one) holds the lock on `dir` now.
pub fn is_locked(dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(dir) else { return false };
    !flock(&file)
}

/// The holder of a held lock: the kernel's record of it, else the published pid. A holder
/// publishes its pid just after taking the lock, so a missing or dead pid is read again for up
/// to a second before it is reported unknown.
fn holder(dir: &Path) -> Holder {
    if let Some(pid) = kernel_holder(dir) {
        return Holder { pid: Some(pid) };
    }
    for _ in 0..20 {
        let pid = std::fs::read_to_string(pid_file(dir)).ok().and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(p) = pid.filter(|p| alive(*p)) {
            return Holder { pid: Some(p) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Holder { pid: None }
}

/// The pid that `/proc/locks` gives for the flock on `dir`'s inode (Linux), when it is not
/// this process (whose own second descriptor conflicts too).
#[cfg(target_os = "linux")]
fn kernel_holder(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(dir).ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 12345 fd:01:123456 0 EOF`: pid, then MAJOR:MINOR:INODE.
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let kind = f.get(1)?;
        let pid = f.get(4)?;
        let id = f.get(5)?;
        let on_dir = *kind == "FLOCK" && id.rsplit(':').next()?.parse::<u64>().ok()? == ino;
        pid.parse::<u32>().ok().filter(|p| on_dir && *p != std::process::id())
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel_holder(_: &Path) -> Option<u32> {
    None
}

/// Whether process `pid` exists.
#[cfg(target_os = "linux")]
pub fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(not(target_os = "linux"))]
pub fn alive(_: u32) -> bool {
    true
}

#[cfg(unix)]
fn flock(file: &std::fs::File) -> bool {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor we own; no memory is shared.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(not(unix))]
fn flock(_: &std::fs::File) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory, removed when the test ends.
    struct Tmp(PathBuf);
    impl Tmp {
        fn new(name: &str) -> Self {
            let d = std::env::temp_dir().join(format!("normlab-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Tmp(d)
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_held_lock_survives_deleting_its_pid_file_and_names_its_holder() {
        let tmp = Tmp::new("dirlock");
        let dir = tmp.0.clone();
        let held = try_lock(&dir).unwrap().expect("free");
        assert_eq!(std::fs::read_to_string(pid_file(&dir)).unwrap(), std::process::id().to_string());
        // flock conflicts between two open descriptors, even in one process.
        assert_eq!(try_lock(&dir).unwrap().unwrap_err(), Holder { pid: Some(std::process::id()) });
        std::fs::remove_file(pid_file(&dir)).unwrap();
        assert!(is_locked(&dir), "deleting .lock frees nothing");
        assert_eq!(try_lock(&dir).unwrap().unwrap_err(), Holder { pid: None });
        drop(held);
        assert!(!is_locked(&dir));
        assert!(try_lock(&dir).unwrap().is_ok());
    }

    #[test]
    fn the_lock_moves_with_a_renamed_directory() {
        let scratch = Tmp::new("dirlock-rename");
        let root = scratch.0.clone();
        let (tmp, dest) = (root.join(".tmp"), root.join("run"));
        std::fs::create_dir(&tmp).unwrap();
        let _held = try_lock(&tmp).unwrap().unwrap();
        std::fs::rename(&tmp, &dest).unwrap();
        assert!(is_locked(&dest));
    }
}
