//! Backend selection, the GPU's failures as error lines, its stated peak, and the machine
//! description. The default build runs on burn's `flex` CPU
//! backend; `--features wgpu`, `--features vulkan` or `--features cuda` add GPU devices.

use burn::tensor::Device;
use std::sync::atomic::{AtomicUsize, Ordering};

pub mod cuda;
pub mod failure;
pub mod peak;

/// The device named on the command line: `cpu` (flex), `wgpu`, `vulkan`, `cuda` / `cuda:N`.
/// `wgpu` and `vulkan` mean this process's GPU: see [`set_local_gpu`]. A CUDA device is first
/// asked of the driver ([`cuda::probe`]), so a missing driver or device is an error here
/// rather than a panic in burn's engine thread; a GPU device is recorded for
/// [`failure::line`].
pub fn parse(name: &str) -> anyhow::Result<Device> {
    if matches!(name, "cpu" | "flex") {
        return Ok(Device::flex());
    }
    let device = gpu(name)?;
    failure::record(name);
    Ok(device)
}

/// The GPU device `name`, where this build has its backend.
fn gpu(name: &str) -> anyhow::Result<Device> {
    match name {
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(Device::wgpu(gpu_kind())),
        #[cfg(feature = "vulkan")]
        "vulkan" => Ok(Device::vulkan(gpu_kind())),
        #[cfg(feature = "cuda")]
        n if n == "cuda" || n.starts_with("cuda:") => Ok(Device::cuda(cuda::probe(cuda_index(n)?)?.index)),
        other => anyhow::bail!(
            "unknown device `{other}`: use `cpu`{}{}{}",
            if cfg!(feature = "wgpu") { ", `wgpu`" } else { " (rebuild with --features wgpu for `wgpu`)" },
            if cfg!(feature = "vulkan") { ", `vulkan`" } else { " (rebuild with --features vulkan for `vulkan`)" },
            if cfg!(feature = "cuda") { ", `cuda:N`" } else { " (rebuild with --features cuda for `cuda`)" }
        ),
    }
}

/// N of `cuda:N` (`cuda` is `cuda:0`).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn cuda_index(name: &str) -> anyhow::Result<usize> {
    let n = name.strip_prefix("cuda").unwrap_or(name);
    match n.strip_prefix(':') {
        None if n.is_empty() => Ok(0),
        Some(i) => {
            i.parse().map_err(|_| anyhow::anyhow!("device `{name}`: write `cuda` or `cuda:N`, N the device's index"))
        }
        None => anyhow::bail!("device `{name}`: write `cuda` or `cuda:N`, N the device's index"),
    }
}

/// The GPU of this process on its node, when it is one of several ranks there (`usize::MAX`:
/// the default device).
static LOCAL_GPU: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Makes `wgpu` and `vulkan` mean the node's `index`-th discrete GPU: each rank of a job on a
/// node takes its own (its index among the node's ranks). `CUBECL_WGPU_DEFAULT_DEVICE`, when
/// set, chooses for every rank instead (e.g. `Cpu`: a software Vulkan device for all).
pub fn set_local_gpu(index: usize) {
    LOCAL_GPU.store(index, Ordering::Relaxed);
}

#[cfg(feature = "wgpu")]
fn gpu_kind() -> burn::tensor::DeviceKind {
    match LOCAL_GPU.load(Ordering::Relaxed) {
        i if i != usize::MAX && std::env::var_os("CUBECL_WGPU_DEFAULT_DEVICE").is_none() => {
            burn::tensor::DeviceKind::DiscreteGpu(i)
        }
        _ => burn::tensor::DeviceKind::DefaultDevice,
    }
}

/// Makes this thread flush denormal floats to zero (x86-64: MXCSR's flush-to-zero and
/// denormals-are-zero bits); a no-op elsewhere.
pub fn flush_denormals_here() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: setting two MXCSR mode bits changes only how this thread rounds tiny results.
    #[allow(deprecated)]
    unsafe {
        use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
        _mm_setcsr(_mm_getcsr() | 0x8040);
    }
}

/// Whether this thread flushes denormals to zero.
pub fn flushes_denormals() -> bool {
    #[cfg(target_arch = "x86_64")]
    #[allow(deprecated)]
    // SAFETY: reading MXCSR has no effect.
    unsafe {
        std::arch::x86_64::_mm_getcsr() & 0x8040 == 0x8040
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Flushes denormals to zero on this thread and on every thread of the global rayon pool, on
/// which the CPU backend computes. Denormals (|x| < 1.2e-38 in f32) take a slow microcode
/// path: post-norm runs at high learning rates, whose gradients underflow, ran 5–10× slower
/// than the others in `normlab compare`. Call before any tensor work. Returns whether the pool
/// was set up here (it can be only once).
pub fn flush_denormals(threads: Option<usize>) -> bool {
    flush_denormals_here();
    pool(true, threads)
}

/// Stack of each pool thread: the whole command runs on one ([`on_pool`]), so it gets a main
/// thread's room (only the pages touched are ever mapped).
const POOL_STACK: usize = 64 << 20;

/// Sets up the global rayon pool (`threads`, else `RAYON_NUM_THREADS`, else one per core), its
/// threads flushing denormals when `flush`. Returns whether it was set up here.
pub fn pool(flush: bool, threads: Option<usize>) -> bool {
    let builder = rayon::ThreadPoolBuilder::new().stack_size(POOL_STACK).num_threads(threads.unwrap_or(0));
    let builder = if flush { builder.start_handler(|_| flush_denormals_here()) } else { builder };
    builder.build_global().is_ok()
}

/// Runs `f` on a thread of the global pool and waits for it. Every parallel operation `f`
/// starts is then split between the threads with the caller taking a share, as work-stealing
/// intends, instead of being handed from an outside thread to the pool and back: on 2 cores
/// that outside thread made three runnable threads for two cores, and two hand-offs per
/// operation.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| f())
}

/// Has glibc's allocator keep freed memory for reuse instead of handing it back to the kernel:
/// blocks up to 32 MiB (its ceiling for this setting) come from the heap rather than from a
/// fresh `mmap` each, and the heap's top is trimmed only above 1 GiB free. A train step frees
/// and reallocates the same activation sizes every step; with glibc's defaults each came back
/// as new pages, zeroed by the kernel on first touch. Measured on the reference model (`bench
/// --recipes pre`, 14 train and 8 forward steps): 382–430 k minor page faults down to 80 k, the
/// same peak RSS (327 MB). All threads share the one (main) heap: the command runs on a pool
/// thread ([`on_pool`]), whose own arena would be a chain of 64 MiB heaps that glibc unmaps as
/// they empty (124 k page faults with per-thread arenas, 111 k with one). Call before any
/// tensor work; a no-op off glibc.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator thresholds; called before other threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    #[test]
    fn cuda_names_give_their_index_or_the_form_to_write() {
        assert_eq!(cuda_index("cuda").unwrap(), 0);
        assert_eq!(cuda_index("cuda:3").unwrap(), 3);
        let e = cuda_index("cuda:x").unwrap_err().to_string();
        assert!(e.contains("`cuda:N`"), "{e}");
    }

    /// 1e-30 × 1e-10 = 1e-40 is below f32's smallest normal (1.18e-38): a denormal under IEEE
    /// rules, 0 once flushed. Run on fresh threads so the other tests keep IEEE behaviour.
    #[test]
    fn flushing_turns_denormal_results_into_zero_on_this_thread_only() {
        let ieee = std::thread::spawn(|| black_box(1e-30f32) * black_box(1e-10f32)).join().unwrap();
        assert!(ieee > 0.0 && ieee < f32::MIN_POSITIVE, "{ieee:e} is a denormal");
        let flushed = std::thread::spawn(|| {
            flush_denormals_here();
            (flushes_denormals(), black_box(1e-30f32) * black_box(1e-10f32))
        })
        .join()
        .unwrap();
        if cfg!(target_arch = "x86_64") {
            assert_eq!(flushed, (true, 0.0));
        }
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).start_handler(|_| flush_denormals_here()).build();
        let in_pool = pool.unwrap().install(|| black_box(1e-30f32) * black_box(1e-10f32));
        if cfg!(target_arch = "x86_64") {
            assert_eq!(in_pool, 0.0, "a pool built like the global one flushes");
        }
    }
}
