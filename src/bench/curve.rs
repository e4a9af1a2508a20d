//! `normlab bench curve`: normlab's training losses beside PyTorch's (`tools/torch_gpu.py`,
//! the `pre` twin) from the same initial weights on the same batch: normlab writes its seeded
//! initial weights (f32 safetensors, its own names), the script loads them into its modules and
//! both take AdamW(1e-3, 0.9/0.95, ε 1e-8, wd 0.1) steps on the benchmark's LCG batch. The
//! worst per-step relative gap is held against a bound per precision ([`bound`]): agreement
//! within the precision's tolerance, or an error naming the step where the curves part.

use super::step::{Case, StepEnd, Timing, build, train_steps};
use super::{Dims, torch};
use crate::device::DeviceName;
use crate::kernels::{Kernels, Precision};
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What `bench curve` compares.
#[derive(Clone, Debug)]
pub struct CurveOptions {
    pub device: DeviceName,
    pub dims: Dims,
    pub kernels: Kernels,
    pub precision: Precision,
    pub steps: usize,
    /// PyTorch's Python and `torch_gpu.py`.
    pub torch: (String, String),
    pub out: PathBuf,
}

/// `bench/curve.json`: both curves and how far apart they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurveReport {
    pub machine: crate::device::Machine,
    pub device: String,
    /// PyTorch's device: `cuda` beside a CUDA device, else `cpu`.
    pub torch_device: String,
    pub kernels: Kernels,
    pub precision: Precision,
    pub dims: Dims,
    pub normlab: Vec<f64>,
    pub torch: Vec<f64>,
    /// The largest `|normlab − torch| / |torch|` over the steps, and its step (from 1).
    pub worst_gap: f64,
    pub worst_step: usize,
    pub bound: f64,
    pub agree: bool,
}

/// The largest relative loss gap two runs of `p` may show and still agree. f32: TF32 products
/// on one side, IEEE f32 on the other (PyTorch's default) leave ≈1e-3 over tens of steps;
/// half precision rounds every product's operands (bf16: 8 mantissa bits, 2⁻⁸ ≈ 4e-3 per
/// rounding), and the steps compound it.
pub fn bound(p: Precision) -> f64 {
    match p {
        Precision::F32 => 5e-3,
        _ => 5e-2,
    }
}

/// PyTorch's `--dtype` for `p`: the twin has f32 and bf16 autocast.
fn torch_dtype(p: Precision) -> anyhow::Result<&'static str> {
    match p {
        Precision::F32 => Ok("f32"),
        Precision::Bf16 => Ok("bf16"),
        other => anyhow::bail!(
            "bench curve: PyTorch's twin trains in f32 or bf16 autocast, not {other:?}; use --precision f32 or bf16"
        ),
    }
}

/// Writes the initial weights, runs both, writes `o.out`; an error when the curves part.
pub fn run(o: &CurveOptions) -> anyhow::Result<CurveReport> {
    let dtype = torch_dtype(o.precision)?;
    ensure!(o.dims.n_kv_heads.is_none(), "bench curve: PyTorch's twin has no grouped-query attention");
    let device = o.device.open(&super::kernel_cache::kernel_cache())?;
    crate::run::checked::check_precision(&device, &o.device.to_string(), o.precision)?;
    o.kernels.check_on(&device)?;
    let case = Case { recipe: "pre".into(), kernels: o.kernels, precision: o.precision };
    let scratch = std::env::temp_dir().join(format!("normlab-curve-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let init = scratch.join("init.safetensors");
    let weights = crate::model::base::params::named_values(&build(&case, &o.dims, &device)?);
    crate::io::tensors::write(&init, &weights.into_iter().collect::<BTreeMap<_, _>>(), &BTreeMap::new())?;
    let torch_device = if matches!(o.device, DeviceName::Cuda(_)) { "cuda" } else { "cpu" };
    let torch = torch_curve(o, &init, torch_device, dtype);
    let _ = std::fs::remove_dir_all(&scratch);
    let torch = torch?;
    let timing = Timing { warmup: 0, steps: o.steps, fwd_steps: 0 };
    let normlab = train_steps(&case, &o.dims, &device, timing, StepEnd::LossRead)?.losses;
    let report = compare(o, normlab, torch, torch_device);
    crate::io::json::write(&o.out, &report)?;
    ensure!(
        report.agree,
        "bench curve: normlab's loss leaves PyTorch's by {:.1e} (relative) at step {}, beyond the {:?} bound {:.0e} \
         ({} written)",
        report.worst_gap,
        report.worst_step,
        o.precision,
        report.bound,
        o.out.display()
    );
    Ok(report)
}

#[derive(Deserialize)]
struct TorchCurve {
    losses: Vec<f64>,
}

/// `torch_gpu.py --curve` from the weights at `init` on the LCG batch.
fn torch_curve(o: &CurveOptions, init: &std::path::Path, on: &str, dtype: &str) -> anyhow::Result<Vec<f64>> {
    let mut args: Vec<String> = ["--device", on, "--dtype", dtype, "--lcg", "--curve"].map(String::from).to_vec();
    args.push(o.steps.to_string());
    args.extend(["--init".to_string(), init.display().to_string()]);
    args.extend(o.dims.torch_args());
    let c: TorchCurve = torch::run_json(&o.torch.0, &o.torch.1, &args)?;
    ensure!(c.losses.len() == o.steps, "torch_gpu.py --curve returned {} losses for {} steps", c.losses.len(), o.steps);
    Ok(c.losses)
}

/// Both curves, the worst relative gap and the verdict.
fn compare(o: &CurveOptions, normlab: Vec<f64>, torch: Vec<f64>, torch_device: &str) -> CurveReport {
    let (worst_gap, worst_step) = worst_gap(&normlab, &torch);
    let bound = bound(o.precision);
    CurveReport {
        machine: crate::device::machine(),
        device: o.device.to_string(),
        torch_device: torch_device.into(),
        kernels: o.kernels,
        precision: o.precision,
        dims: o.dims,
        normlab,
        torch,
        worst_gap,
        worst_step,
        bound,
        agree: worst_gap <= bound,
    }
}

/// `max_s |a_s − b_s| / |b_s|` and its step (from 1); a non-finite loss on either side is the
/// worst gap there is.
pub fn worst_gap(a: &[f64], b: &[f64]) -> (f64, usize) {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| gap(x, y))
        .enumerate()
        .fold((0.0, 0), |(w, s), (i, g)| if g > w { (g, i + 1) } else { (w, s) })
}

/// `|x − y| / |y|`, infinite where either loss is not finite.
fn gap(x: f64, y: f64) -> f64 {
    if x.is_finite() && y.is_finite() { (x - y).abs() / y.abs().max(f64::MIN_POSITIVE) } else { f64::INFINITY }
}

/// One line per tenth of the steps: both losses and their gap.
pub fn table(r: &CurveReport) -> String {
    let every = (r.normlab.len() / 10).max(1);
    let mut s = format!("step  normlab {:<6} PyTorch {:<4}  gap\n", r.device, r.torch_device);
    for (i, (a, b)) in r.normlab.iter().zip(&r.torch).enumerate().filter(|(i, _)| (i + 1) % every == 0 || *i == 0) {
        s += &format!("{:>4}  {a:>14.6} {b:>12.6}  {:.1e}\n", i + 1, gap(*a, *b));
    }
    s + &format!(
        "worst gap {:.1e} at step {} (bound {:.0e} for {:?}): {}",
        r.worst_gap,
        r.worst_step,
        r.bound,
        r.precision,
        if r.agree { "agree" } else { "apart" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_gap_is_relative_to_pytorch_and_a_nan_is_infinitely_far() {
        // Gaps 0, |10.5 − 10| / 10 = 0.05 and |2.2 − 2| / 2 = 0.1: the third step's.
        let (gap, step) = worst_gap(&[1.0, 10.5, 2.2], &[1.0, 10.0, 2.0]);
        assert!((gap - 0.1).abs() < 1e-12 && step == 3, "{gap} at {step}");
        assert_eq!(worst_gap(&[1.0, f64::NAN], &[1.0, 1.0]).0, f64::INFINITY);
        assert_eq!(worst_gap(&[3.0], &[3.0]), (0.0, 0));
    }
}
