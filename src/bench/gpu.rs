//! The GPU side by side: `torch_gpu.py` (PyTorch eager on CUDA; on the CPU where PyTorch sees
//! no CUDA, as beside lavapipe) in f32 and in bf16 autocast at the benchmark's sizes, run
//! before normlab's measurements in the same invocation (so a benchmark cut short still holds
//! them), and the ratio of normlab's `pre` in each of its precisions over both.

use super::torch::{TorchBench, run_torch_gpu};
use super::{Dims, RecipeBench, Timing};
use crate::kernels::Precision;
use serde::{Deserialize, Serialize};

/// PyTorch's two runs and the ratios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuComparison {
    pub torch_f32: TorchBench,
    pub torch_bf16: TorchBench,
    pub ratios: Vec<GpuRatio>,
}

/// normlab's `pre` (fused setting, which is composite on a GPU) in one precision over PyTorch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuRatio {
    pub precision: Precision,
    pub train_vs_torch_f32: f64,
    pub train_vs_torch_bf16: f64,
    pub fwd_vs_torch_f32: f64,
    pub fwd_vs_torch_bf16: f64,
}

/// Runs `torch_gpu.py` in f32 and in bf16 autocast.
pub fn run_twins(python: &str, script: &str, dims: &Dims, timing: Timing) -> anyhow::Result<(TorchBench, TorchBench)> {
    let torch_f32 = run_torch_gpu(python, script, dims, "f32", timing.warmup, timing.steps)?;
    let torch_bf16 = run_torch_gpu(python, script, dims, "bf16", timing.warmup, timing.steps)?;
    let on = torch_f32.other.get("cfg").and_then(|c| c.get("device")).and_then(|d| d.as_str()).unwrap_or("?");
    crate::io::term::err(format_args!(
        "PyTorch eager on {on}: f32 train {:.0} tok/s, bf16 autocast train {:.0} tok/s",
        torch_f32.train_tok_s, torch_bf16.train_tok_s
    ));
    Ok((torch_f32, torch_bf16))
}

/// PyTorch's two runs beside `results`' `pre` entries.
pub fn compare((torch_f32, torch_bf16): &(TorchBench, TorchBench), results: &[RecipeBench]) -> GpuComparison {
    let ratios = ratios(results, torch_f32, torch_bf16);
    GpuComparison { torch_f32: torch_f32.clone(), torch_bf16: torch_bf16.clone(), ratios }
}

/// Prints each ratio of `c`.
pub fn print(c: &GpuComparison) {
    for r in &c.ratios {
        crate::io::term::err(format_args!(
            "pre {:?}: train {:.2}× PyTorch f32, {:.2}× PyTorch bf16 autocast",
            r.precision, r.train_vs_torch_f32, r.train_vs_torch_bf16
        ));
    }
}

fn ratios(results: &[RecipeBench], f32: &TorchBench, bf16: &TorchBench) -> Vec<GpuRatio> {
    let mut out: Vec<GpuRatio> = Vec::new();
    for b in results.iter().filter(|b| b.recipe == "pre") {
        if out.iter().any(|r| r.precision == b.precision) {
            continue;
        }
        out.push(GpuRatio {
            precision: b.precision,
            train_vs_torch_f32: b.train_tok_s / f32.train_tok_s,
            train_vs_torch_bf16: b.train_tok_s / bf16.train_tok_s,
            fwd_vs_torch_f32: b.fwd_tok_s / f32.fwd_tok_s,
            fwd_vs_torch_bf16: b.fwd_tok_s / bf16.fwd_tok_s,
        });
    }
    out
}
