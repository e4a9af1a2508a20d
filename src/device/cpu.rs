//! The CPU as the fused kernels need it: denormals flushed to zero on every computing thread,
//! one global rayon pool the whole command runs on, and glibc's allocator told to keep freed
//! memory for the next step.

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

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
