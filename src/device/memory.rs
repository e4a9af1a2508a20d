//! Peak resident memory, of this process and of the children it waited for (Linux).

/// Resets this process's peak resident memory (Linux: `5` into `/proc/self/clear_refs`), so
/// that [`peak_rss_mb`] then reports the peak since this call. Returns whether it could.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// This process's peak resident memory (MB): `VmHWM` of `/proc/self/status`, Linux only.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The largest peak resident memory (MB) of the child processes waited for so far
/// (`getrusage(RUSAGE_CHILDREN)`; Linux reports kilobytes).
pub fn children_peak_rss_mb() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes one plain struct that we own.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } == 0;
        ok.then(|| usage.ru_maxrss as f64 / 1024.0)
    }
    #[cfg(not(target_os = "linux"))]
    None
}
