//! Where a benchmark's GPU device keeps its compiled kernels and autotune results.

/// The default cache's `kernels` (`~/.cache/normlab/kernels`, or under `NORMLAB_CACHE`), which
/// runs with the default `data.cache_dir` share ([`crate::device::kernel_cache`]).
pub fn kernel_cache() -> std::path::PathBuf {
    crate::data::cache::default_dir().join("kernels")
}
