//! Where burn's GPU runtimes keep what they learn about a card: cubecl's environment, one
//! database holding the compiled kernels (PTX, SPIR-V) and the autotune results (which matmul
//! and reduction variant is fastest at each shape). cubecl's default keeps only the autotune
//! results, under the outermost Cargo project's `target/environment` (or the user cache
//! outside one); normlab puts the database under the run's cache, `<data.cache_dir>/kernels`
//! (`~/.cache/normlab/kernels` unless `NORMLAB_CACHE` or `data.cache_dir` say otherwise), and
//! turns the compiled-kernel cache on, so a second run, every run of a sweep, and a copy of
//! the directory carried to another machine with the same card skip both the compilation and
//! the autotuning (≈ 90 s before the first f32 step at KiteNorm's Table-1 sizes on `cuda`).
//! cubecl scopes autotune results by the device's identity and compiled kernels by the
//! compilation target (CUDA: the compute capability), so one directory serves several cards.
//!
//! The setting is process-wide and taken once, before the first GPU device opens.

use std::path::Path;

/// Puts cubecl's environment under `dir` with compiled kernels cached, unless the process has
/// already chosen (an earlier call, or a GPU device already opened): the first choice stays.
/// A build without a GPU backend has nothing to set.
pub fn use_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        anyhow::anyhow!(
            "kernel cache {}: {e}; point data.cache_dir (or NORMLAB_CACHE) at a writable directory",
            dir.display()
        )
    })?;
    set(dir);
    Ok(())
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn set(dir: &Path) {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
    // A `cubecl.toml` in the working directory and the CUBECL_* variables still apply; only
    // the place and the compiled-kernel switch are normlab's.
    let mut c = CubeClRuntimeConfig::from_current_dir().override_from_env();
    c.environment.path = CacheConfig::Directory(dir.to_path_buf());
    c.compilation.cache = true;
    CubeClRuntimeConfig::try_set(c);
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn set(_: &Path) {}
