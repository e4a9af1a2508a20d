//! `normlab bench gemm`: the f32 matmuls of one reference-model train step, one by one, in
//! burn's CPU backend (the `Tensor::matmul` normlab calls, operands as the autodiff backward
//! passes them: transposed views, not copies) and in PyTorch (`tools/torch_gemm.py`, same
//! shapes, same threads) in the same invocation, and through the strided gemm normlab's fused
//! kernels now call instead ([`crate::kernels::matmul`]). It answers whether the gap to PyTorch is the
//! matrix multiply itself or everything around it: the sum over the step's matmuls, weighted by
//! how often each occurs, is the least time a step can take with this gemm.
//!
//! Forward `Y = A B` gives backward `dA = dY Bᵀ` and `dB = Aᵀ dY`; the reference model
//! ([`Dims::REFERENCE`]: d 256, 6 layers, 4 heads of 64, GLU 688, byte vocabulary, 8 × 256
//! tokens) has q, k, v, o at d × d, the output projection at d × 256, two GLU inputs at d × 688, one GLU output at 688 × d, and per
//! layer 32 (batch × heads) score and value products of 256 × 64 × 256.

use super::Dims;
use burn::tensor::{Device, Distribution, Tensor};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One matmul shape: `batch` products `[m, k] · [k, n]`, with `a` (or `b`) read through a
/// transposed view when `ta` (`tb`); `count` is how many a train step runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmCase {
    pub name: String,
    pub batch: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub ta: bool,
    pub tb: bool,
    pub count: usize,
}

/// A case's timings: medians over the timed repetitions; `ms` through burn's `matmul`,
/// `strided_ms` through [`crate::kernels::matmul`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmResult {
    pub case: GemmCase,
    pub ms: f64,
    pub gflops: f64,
    pub strided_ms: f64,
    pub strided_gflops: f64,
    pub torch_ms: Option<f64>,
    pub torch_gflops: Option<f64>,
}

/// `bench/gemm.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmReport {
    pub machine: crate::device::Machine,
    pub threads: usize,
    pub results: Vec<GemmResult>,
    /// Σ count × ms over the cases: the step's matmul time, burn's `matmul`, normlab's strided
    /// gemm and PyTorch.
    pub step_ms: f64,
    pub strided_step_ms: f64,
    pub torch_step_ms: Option<f64>,
    /// PyTorch's step matmul time over burn's `matmul`'s (> 1: burn's is faster).
    pub ratio: Option<f64>,
    /// PyTorch's step matmul time over the strided gemm's: what the fused model path gets.
    pub strided_ratio: Option<f64>,
    /// The PyTorch script's report.
    pub torch: Option<TorchGemm>,
}

/// How a product reads its operands (the transposed one as a view).
#[derive(Clone, Copy)]
enum Reads {
    /// `A·B`.
    Plain,
    /// `A·Bᵀ`.
    BTransposed,
    /// `Aᵀ·B`.
    ATransposed,
}

/// `count` products per step of `[m, k]·[k, n]`, `batch` at a time, read as `reads` says.
fn case(name: &str, batch: usize, [m, k, n]: [usize; 3], reads: Reads, count: usize) -> GemmCase {
    let (ta, tb) = (matches!(reads, Reads::ATransposed), matches!(reads, Reads::BTransposed));
    GemmCase { name: name.into(), batch, m, k, n, ta, tb, count }
}

/// Every matmul of a reference-model train step (forward and both backward products).
pub fn reference_step() -> Vec<GemmCase> {
    let Dims { vocab, d_model: d, n_layers: layers, n_heads, d_ff: glu, batch, seq: t, .. } = Dims::REFERENCE;
    let tokens = batch * t;
    let heads = batch * n_heads;
    let h = d / n_heads;
    let mut cases = Vec::new();
    // (name, A·B forward shape, how many per step)
    let linears = [
        ("d×d", d, d, 4 * layers),
        ("glu in", d, glu, 2 * layers),
        ("glu out", glu, d, layers),
        ("logits", d, vocab, 1),
    ];
    for (name, k, n, count) in linears {
        cases.push(case(&format!("{name} fwd"), 1, [tokens, k, n], Reads::Plain, count));
        cases.push(case(&format!("{name} dX"), 1, [tokens, n, k], Reads::BTransposed, count));
        cases.push(case(&format!("{name} dW"), 1, [k, tokens, n], Reads::ATransposed, count));
    }
    // Scores S = Q Kᵀ and output O = P V, per (sequence, head).
    cases.push(case("QKᵀ fwd", heads, [t, h, t], Reads::BTransposed, layers));
    cases.push(case("QKᵀ dQ", heads, [t, t, h], Reads::Plain, layers));
    cases.push(case("QKᵀ dK", heads, [t, t, h], Reads::ATransposed, layers));
    cases.push(case("PV fwd", heads, [t, t, h], Reads::Plain, layers));
    cases.push(case("PV dP", heads, [t, h, t], Reads::BTransposed, layers));
    cases.push(case("PV dV", heads, [t, t, h], Reads::ATransposed, layers));
    cases
}

/// `[batch, rows, cols]`, read transposed (a view) when `t`.
fn operand(batch: usize, rows: usize, cols: usize, t: bool, device: &Device) -> Tensor<3> {
    let d = Distribution::Uniform(-1.0, 1.0);
    if t {
        Tensor::random([batch, cols, rows], d, device).swap_dims(1, 2)
    } else {
        Tensor::random([batch, rows, cols], d, device)
    }
}

/// Median milliseconds of `reps` products after `warmup` (the CPU backend computes eagerly).
/// `strided`: through [`crate::kernels::matmul`] instead of `Tensor::matmul`.
pub fn time_case(c: &GemmCase, warmup: usize, reps: usize, device: &Device, strided: bool) -> f64 {
    let a = operand(c.batch, c.m, c.k, c.ta, device);
    let b = operand(c.batch, c.k, c.n, c.tb, device);
    let run = || {
        let y = if strided {
            crate::kernels::matmul(a.clone(), b.clone())
        } else if c.batch == 1 {
            let [m, k, n] = [c.m, c.k, c.n];
            let a2: Tensor<2> = a.clone().reshape([m, k]);
            a2.matmul(b.clone().reshape([k, n])).unsqueeze::<3>()
        } else {
            a.clone().matmul(b.clone())
        };
        drop(y)
    };
    (0..warmup).for_each(|_| run());
    let ms: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    crate::stats::median(&ms)
}

fn gflops(c: &GemmCase, ms: f64) -> f64 {
    2.0 * (c.batch * c.m * c.k * c.n) as f64 / (ms * 1e6)
}

/// Times every case here and, with `torch`, in PyTorch; the report.
pub fn run(torch: Option<(&str, &str)>, warmup: usize, reps: usize) -> anyhow::Result<GemmReport> {
    let cases = reference_step();
    let device = burn::tensor::Device::flex();
    let threads = crate::device::available_threads();
    let torch = match torch {
        Some((py, script)) => Some(run_torch(py, script, &cases, threads, warmup, reps)?),
        None => None,
    };
    let mut results = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let ms = time_case(c, warmup, reps, &device, false);
        let strided_ms = time_case(c, warmup, reps, &device, true);
        let torch_ms = torch.as_ref().map(|t| t.ms[i]);
        let r = GemmResult {
            case: c.clone(),
            ms,
            gflops: gflops(c, ms),
            strided_ms,
            strided_gflops: gflops(c, strided_ms),
            torch_ms,
            torch_gflops: torch_ms.map(|t| gflops(c, t)),
        };
        crate::io::term::err(format_args!(
            "{:<12} {:>3} × {:>4}×{:>4}×{:>4}  burn {:>7.2} ms {:>6.1} GFLOP/s   strided {:>6.1} GFLOP/s   PyTorch {}",
            c.name,
            c.batch,
            c.m,
            c.k,
            c.n,
            ms,
            r.gflops,
            r.strided_gflops,
            r.torch_gflops.map_or("-".into(), |g| format!("{g:.1} GFLOP/s"))
        ));
        results.push(r);
    }
    let step_ms = results.iter().map(|r| r.ms * r.case.count as f64).sum();
    let strided_step_ms = results.iter().map(|r| r.strided_ms * r.case.count as f64).sum();
    let torch_step_ms = torch.as_ref().map(|t| cases.iter().zip(&t.ms).map(|(c, ms)| ms * c.count as f64).sum());
    let ratio = torch_step_ms.map(|t: f64| t / step_ms);
    let strided_ratio = torch_step_ms.map(|t: f64| t / strided_step_ms);
    let machine = crate::device::machine();
    Ok(GemmReport { machine, threads, results, step_ms, strided_step_ms, torch_step_ms, ratio, strided_ratio, torch })
}

/// [`run`], then writes the report to `out`.
pub fn write(
    torch: Option<(&str, &str)>,
    warmup: usize,
    reps: usize,
    out: &std::path::Path,
) -> anyhow::Result<GemmReport> {
    let report = run(torch, warmup, reps)?;
    if let Some(r) = report.ratio {
        crate::io::term::err(format_args!(
            "a step's matmuls: burn {:.0} ms (ratio {r:.2}), strided {:.0} ms (ratio {:.2}), PyTorch {:.0} ms",
            report.step_ms,
            report.strided_step_ms,
            report.strided_ratio.unwrap_or(f64::NAN),
            report.torch_step_ms.unwrap_or(f64::NAN)
        ));
    } else {
        crate::io::term::err(format_args!(
            "a step's matmuls: burn {:.0} ms, strided {:.0} ms",
            report.step_ms, report.strided_step_ms
        ));
    }
    crate::io::json::write(out, &report)?;
    crate::io::term::err(format_args!("wrote {}", out.display()));
    Ok(report)
}

/// What `tools/torch_gemm.py` prints: its version and threads, and each case's median ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchGemm {
    pub torch: String,
    pub threads: usize,
    pub ms: Vec<f64>,
}

/// `tools/torch_gemm.py` with the cases as JSON on its standard input.
fn run_torch(
    python: &str,
    script: &str,
    cases: &[GemmCase],
    threads: usize,
    warmup: usize,
    reps: usize,
) -> anyhow::Result<TorchGemm> {
    let spec = serde_json::json!({ "threads": threads, "warmup": warmup, "reps": reps, "cases": cases });
    let t: TorchGemm = super::torch::run_with_input(python, script, &spec.to_string())?;
    anyhow::ensure!(t.ms.len() == cases.len(), "{script} timed {} cases of {}", t.ms.len(), cases.len());
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step's matmul FLOPs, counted by hand from the model: 6 layers × (4 d² + 3 d·688)
    /// weights plus the d × 256 output projection, 2 FLOPs per weight per token, three products
    /// (forward, dX, dW) over 2048 tokens; attention 2 × 32 × 256² × 64 per product, 6 products
    /// per layer.
    #[test]
    fn the_reference_step_has_the_models_matmul_flops() {
        let flops: usize = reference_step().iter().map(|c| 2 * c.batch * c.m * c.k * c.n * c.count).sum();
        let weights = 6 * (4 * 256 * 256 + 3 * 256 * 688) + 256 * 256;
        let attention = 6 * 6 * 2 * 32 * 256 * 256 * 64;
        assert_eq!(flops, 3 * 2 * weights * 2048 + attention);
    }
}
