//! The machine a run or benchmark ran on, recorded in `run.json` and benchmark results.

/// The machine a run or benchmark ran on, recorded in `run.json` and benchmark results.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub threads: usize,
    pub avx512f: bool,
    pub os: String,
    pub normlab: String,
}

/// A short description of this machine's CPU.
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    Machine {
        cpu,
        threads: available_threads(),
        avx512f: cpuinfo.contains("avx512f"),
        os: std::env::consts::OS.into(),
        normlab: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Hardware threads available to this process.
pub fn available_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
