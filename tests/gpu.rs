//! The GPU code path without a GPU: with `--features wgpu` and a Vulkan driver —
//! Debian's `mesa-vulkan-drivers` gives lavapipe, a software Vulkan device on the CPU — the same
//! tiny language-model run trains on `run.device = cpu` (fused kernels) and on `wgpu` (burn's
//! cubecl kernels and normlab's fused GPU norms and attention, validation and probes included). Per-step training losses
//! must agree within 1e-5 relative in f32 (the two backends sum in different orders; measured
//! ≈3e-7), and an f16 run on the GPU must track the CPU's f32 curve within the f16 bound of
//! `train::precision_tests` (5e-3). `.ci/run` runs it; the pairs task (masked loss, padded
//! batches, KV-cache decoding) on the GPU is `tools/wgpu-smoke.sh`, kept out of CI because its
//! varying batch lengths compile kernels per shape (≈ 4.5 min per run on lavapipe). The fused
//! GPU kernels (`kernels::gpu`: every norm kind, causal attention) are checked against their
//! composite formulas on the same device, outputs and gradients (`gpu/norms.rs`,
//! `gpu/attention.rs`), the chunked loss's fused cross-entropy against the composite chunk
//! (`gpu/loss.rs`), and the product op cuBLAS computes on `cuda` against burn's matmul of the
//! transposed operands (`gpu/gemm.rs`).
//!
//! Without a Vulkan driver the test fails, naming the package that gives one (`.ci/run` installs
//! it): it never passes without having run.
#![cfg(feature = "wgpu")]

#[path = "gpu/attention.rs"]
mod attention;
mod common;
#[path = "gpu/gemm.rs"]
mod gemm;
#[path = "gpu/loss.rs"]
mod loss;
#[path = "gpu/norms.rs"]
mod norms;

use std::path::Path;
use std::process::Command;

/// Whether a Vulkan driver (ICD) is installed or named by the environment.
fn vulkan_driver() -> bool {
    let named = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"].iter().any(|v| std::env::var_os(v).is_some());
    let installed = ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "json"));
    named || installed
}

fn temp(name: &str) -> common::Scratch {
    common::Scratch::new(&format!("gpu-{name}"))
}

/// Trains a 2-layer d = 32 language model for 8 steps on `device` in `precision`; returns the
/// training losses and, with `eval`, the validation losses (a forward no gradient flows
/// through: burn's fused attention on a GPU, the CPU's fused kernel). With `eval` false it skips validation and probes: a GPU process at this size spends
/// most of its time compiling kernels and running burn's host side unoptimised (≈ 100 s on
/// lavapipe), and those add their own kernels.
fn losses(root: &Path, device: &str, precision: &str, eval: bool) -> (Vec<f64>, Vec<f64>) {
    let started = std::time::Instant::now();
    let dir = root.join(format!("{device}-{precision}"));
    let every = if eval { "4" } else { "1000" };
    let mut args: Vec<String> = [
        "train",
        "--quiet",
        "--force",
        "--set",
        "model.d_model=32",
        "--set",
        "model.n_layers=2",
        "--set",
        "model.n_heads=2",
        "--set",
        "train.steps=8",
        "--set",
        "train.seq_len=32",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (k, v) in [
        ("run.eval_every", every.into()),
        ("probe.every", every.into()),
        ("run.dir", dir.display().to_string()),
        ("run.device", device.into()),
        ("train.precision", precision.into()),
        ("data.cache_dir", root.join("cache").display().to_string()),
        ("data.corpus", root.join("text.txt").display().to_string()),
        ("train.batch_size", "4".into()),
    ] {
        args.extend(["--set".into(), format!("{k}={v}")]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_normlab")).args(&args).output().unwrap();
    assert!(out.status.success(), "{device} in {precision}: {}", String::from_utf8_lossy(&out.stderr));
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = metrics.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    eprintln!("{device} in {precision}: {:.0} s", started.elapsed().as_secs_f64());
    let of = |kind: &str, key: &str| -> Vec<f64> {
        records.iter().filter(|r| r["type"] == kind).map(|r| r[key].as_f64().unwrap()).collect()
    };
    (of("train", "loss"), of("eval", "val_loss"))
}

fn worst_gap(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / y.abs()).fold(0.0, f64::max)
}

/// A scratch directory holding the tiny run's corpus.
fn corpus(name: &str) -> common::Scratch {
    let root = temp(name);
    std::fs::write(root.join("text.txt"), "Fellow citizens of the Senate and House of Representatives. ".repeat(400))
        .unwrap();
    root
}

#[test]
fn a_tiny_run_on_the_gpu_path_tracks_the_cpu_in_f32() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = corpus("track");
    let (cpu, cpu_val) = losses(&root, "cpu", "f32", true);
    let (gpu, gpu_val) = losses(&root, "wgpu", "f32", true);
    // The GPU run kept its compiled kernels and autotune results under the run's cache
    // (`data.cache_dir`/kernels, one cubecl environment database), where the next run finds them.
    let kept: Vec<_> = std::fs::read_dir(root.join("cache/kernels"))
        .expect("a kernel cache under data.cache_dir")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "db") && e.metadata().unwrap().len() > 0)
        .collect();
    assert!(!kept.is_empty(), "no kernel database under {}", root.join("cache/kernels").display());
    let gap = worst_gap(&gpu, &cpu);
    eprintln!("lm: wgpu f32 vs cpu f32, largest relative loss gap {gap:.1e}");
    assert!(gap < 1e-5, "lm: wgpu f32 leaves the CPU curve by {gap:.1e}");
    assert_eq!(cpu_val.len(), 2, "validation at steps 4 and 8");
    let gap = worst_gap(&gpu_val, &cpu_val);
    eprintln!("lm: validation (fused attention) wgpu f32 vs cpu f32, largest relative gap {gap:.1e}");
    assert!(gap < 1e-5, "lm: wgpu validation loss leaves the CPU's by {gap:.1e}");
}

/// The f16 run apart from the f32 one, so that the two (the longest GPU tests) run side by side.
#[test]
fn a_tiny_run_on_the_gpu_path_in_f16_tracks_the_cpu_in_f32() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = corpus("half");
    let (cpu, _) = losses(&root, "cpu", "f32", false);
    let (half, _) = losses(&root, "wgpu", "f16", false);
    let gap = worst_gap(&half, &cpu);
    eprintln!("lm: wgpu f16 vs cpu f32, largest relative loss gap {gap:.1e}");
    assert!(gap < 5e-3 && gap > 0.0, "lm: wgpu f16 vs cpu f32 gap {gap:.1e}");
}

/// `normlab bench profile` on the GPU path: the step and every piece measured on the device,
/// written as `bench/profile.json`'s type, rows for each group.
#[test]
fn a_train_step_is_profiled_on_the_gpu_path() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = temp("profile");
    let out = root.join("profile.json");
    let args = ["bench", "profile", "--device", "wgpu", "--dims", "tiny", "--warmup", "1", "--steps", "2"];
    let run = Command::new(env!("CARGO_BIN_EXE_normlab"))
        .args(args)
        .args(["--ceiling-gemm", "128", "--ceiling-len", "65536", "--out"])
        .arg(&out)
        .env("NORMLAB_CACHE", root.join("cache"))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let r: normlab::bench::profile::ProfileReport =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r.device, "wgpu");
    let rows: Vec<&str> = r.rows.iter().map(|r| r.what.as_str()).collect();
    for want in ["matmuls (layers)", "attention core", "norms", "output head and loss", "optimizer", "other"] {
        assert!(rows.contains(&want), "{want} missing from {rows:?}");
    }
    assert!(r.step_ms > 0.0 && r.parts.iter().all(|p| p.ms.is_finite() && p.ms >= 0.0), "{:?}", r.parts);
    assert!(root.join("cache/kernels").is_dir(), "the benchmark's kernel cache under NORMLAB_CACHE");
    let table = String::from_utf8_lossy(&run.stdout);
    assert!(table.contains("ceilings (burn): GEMM 128³"), "{table}");
}

/// Every norm kind's fused GPU kernel, forward and backward, against its composite formula
/// on the same device (`tests/gpu/norms.rs`).
#[test]
fn every_norm_kind_has_a_fused_gpu_kernel_matching_its_formula() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = temp("norms");
    let device = normlab::device::DeviceName::Wgpu.open(&root.join("kernels")).unwrap().autodiff();
    for d in [48, 300] {
        norms::check_every_kind(&device, d);
    }
}

/// The fused GPU attention, forward and backward, against the composite formula on the same
/// device (`tests/gpu/attention.rs`).
#[test]
fn fused_gpu_attention_matches_its_formula() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = temp("attention");
    let device = normlab::device::DeviceName::Wgpu.open(&root.join("kernels")).unwrap().autodiff();
    attention::check(&device);
}

/// The GPU product op (`kernels::gpu::gemm`, cuBLAS's on `cuda`) with its hand-written
/// backward, against burn's matmul on the same device (`tests/gpu/gemm.rs`).
#[test]
fn the_gpu_product_op_matches_the_matmul_of_its_transposed_operands() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = temp("gemm");
    let device = normlab::device::DeviceName::Wgpu.open(&root.join("kernels")).unwrap().autodiff();
    gemm::check(&device);
}

/// The chunked loss's fused GPU cross-entropy, values and gradients, against the composite
/// chunk on the same device (`tests/gpu/loss.rs`).
#[test]
fn the_fused_gpu_cross_entropy_matches_the_composite_chunk() {
    assert!(vulkan_driver(), "no Vulkan driver: apt-get install mesa-vulkan-drivers (lavapipe; tools/lavapipe.sh)");
    let root = temp("loss");
    let device = normlab::device::DeviceName::Wgpu.open(&root.join("kernels")).unwrap().autodiff();
    loss::check(&device);
}
