//! `normlab bench model`: throughput of the reference model (tools/torch_reference.py): byte vocab
//! 256, d = 256, 6 layers, 4 heads, RoPE, GLU 688, no biases, untied embeddings, batch 8 × 256,
//! f32, one fixed batch from the same 64-bit LCG, AdamW(1e-3, 0.9/0.95, wd 0.1); or, with
//! `--dims table1`, KiteNorm's Table-1 model (see [`dims`]).
//!
//! For each recipe, kernel setting and precision: forward tokens/s (no autodiff) and train
//! tokens/s (forward, backward and an AdamW step), the same work the PyTorch scripts time.
//! The PyTorch script runs in the same invocation so the ratio is measured on the same machine
//! at the same time: `torch_reference.py` on the CPU, `torch_gpu.py` (f32 and bf16 autocast)
//! when the device is a GPU.

use super::dims::Dims;
use super::step::{Case, RecipeBench, Timing, TrainerBench, bench_recipe, bench_trainer};
use super::torch::{TorchBench, run_torch};
use super::{gpu, rounds};
use crate::device::{DeviceName, Machine};
use crate::kernels::{Kernels, Precision};
use crate::recipe::PRESET_NAMES;
use anyhow::Context;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The training loop with and without the activation probes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerComparison {
    pub with_probes: TrainerBench,
    pub without_probes: TrainerBench,
    /// `overall(without) / overall(with) − 1`.
    pub probe_overhead: f64,
}

/// normlab's `pre` over PyTorch eager, measured in the same invocation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// `pre` with the fused kernels.
    pub pre_train_vs_torch_eager: Option<f64>,
    pub pre_fwd_vs_torch_eager: Option<f64>,
    /// `pre` with `model.kernels = "composite"`, measured in the same invocation.
    #[serde(default)]
    pub pre_composite_train_vs_torch_eager: Option<f64>,
    #[serde(default)]
    pub pre_composite_fwd_vs_torch_eager: Option<f64>,
    pub pre_trainer_vs_torch_eager: Option<f64>,
    /// Peak RSS of normlab's process during `pre`'s fused train steps over the PyTorch
    /// process's peak RSS (both whole processes).
    #[serde(default)]
    pub pre_peak_rss_vs_torch: Option<f64>,
}

/// `bench/model.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub benchmark: String,
    pub machine: Machine,
    /// `run.device` the results were measured on (`cpu` for files written before it existed).
    #[serde(default = "cpu_name")]
    pub device: String,
    /// The sizes (`--dims`; the reference model for older files).
    #[serde(default = "reference_dims")]
    pub dims: Dims,
    pub results: Vec<RecipeBench>,
    pub trainer: Option<TrainerComparison>,
    pub torch_reference: Option<TorchBench>,
    pub ratios: Option<Ratios>,
    /// On a GPU: `torch_gpu.py` in f32 and bf16 autocast, and normlab's `pre` over each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<gpu::GpuComparison>,
    /// `--rounds`: `pre` and PyTorch back to back, every round and the median ratios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<rounds::Rounds>,
}

fn cpu_name() -> String {
    "cpu".into()
}

fn reference_dims() -> Dims {
    Dims::REFERENCE
}

/// What `normlab bench` measures.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Recipes to measure (empty: every preset).
    pub recipes: Vec<String>,
    pub warmup: usize,
    pub steps: usize,
    pub fwd_steps: usize,
    pub device: DeviceName,
    pub dims: Dims,
    /// Each recipe is measured in each of these (`train.precision`).
    pub precisions: Vec<Precision>,
    /// `(python, script)` of the PyTorch reference, run in the same invocation:
    /// `torch_reference.py` on the CPU, `torch_gpu.py` on a GPU device.
    pub torch: Option<(String, String)>,
    /// Steps of the full training loop to time (0: none).
    pub trainer_steps: usize,
    pub out: PathBuf,
    /// Each recipe is measured once per setting, in this order.
    pub kernels: Vec<Kernels>,
    /// With PyTorch on the CPU: measure `pre` (fused, f32) and PyTorch back to back this many
    /// times in all (the main pass is the first round) and report the median ratios.
    pub rounds: usize,
}

/// Runs the benchmark, prints a line per measurement, writes `opts.out` and returns the report.
pub fn run(opts: &BenchOptions) -> anyhow::Result<BenchReport> {
    let device = opts.device.open(&super::kernel_cache::kernel_cache())?;
    let on_cpu = opts.device.is_cpu();
    check(opts, &device)?;
    let timing = Timing { warmup: opts.warmup, steps: opts.steps, fwd_steps: opts.fwd_steps };
    let twins = match (&opts.torch, on_cpu) {
        (Some((py, script)), false) => Some(gpu::run_twins(py, script, &opts.dims, timing)?),
        _ => None,
    };
    // The file holds every result measured so far: a benchmark cut short keeps them.
    let partial = |done: &[RecipeBench]| {
        let report =
            BenchReport { results: done.to_vec(), gpu: twins.as_ref().map(|t| gpu::compare(t, done)), ..report(opts) };
        crate::io::json::write(&opts.out, &report)
    };
    let results = measure_all(opts, &device, timing, &partial)?;
    let trainer = (opts.trainer_steps > 0 && on_cpu).then(|| compare_trainer(opts)).transpose()?;
    let torch = match (&opts.torch, on_cpu) {
        (Some((py, script)), true) => Some(run_torch(py, script, crate::device::available_threads(), &[])?),
        _ => None,
    };
    let beside_torch = twins.as_ref().map(|t| gpu::compare(t, &results));
    beside_torch.iter().for_each(gpu::print);
    let ratios = torch.as_ref().map(|t| ratios(&results, trainer.as_ref(), t));
    if let Some(r) = &ratios {
        crate::io::term::err(format_args!("ratio to PyTorch eager (pre): {}", serde_json::to_string(r)?));
    }
    let rounds = torch
        .as_ref()
        .filter(|_| opts.rounds > 1)
        .map(|t| more_rounds(opts, &device, timing, &results, t))
        .transpose()?;
    let report =
        BenchReport { results, trainer, torch_reference: torch, ratios, gpu: beside_torch, rounds, ..report(opts) };
    crate::io::json::write(&opts.out, &report)?;
    crate::io::term::err(format_args!("wrote {}", opts.out.display()));
    Ok(report)
}

/// The report's description of what was measured, with no results yet.
fn report(opts: &BenchOptions) -> BenchReport {
    let d = &opts.dims;
    BenchReport {
        benchmark: format!(
            "V={} d={} L={} H={} GLU{} batch {}x{}; train = fwd+bwd+AdamW",
            d.vocab, d.d_model, d.n_layers, d.n_heads, d.d_ff, d.batch, d.seq
        ),
        machine: crate::device::machine(),
        device: opts.device.to_string(),
        dims: opts.dims,
        results: Vec::new(),
        trainer: None,
        torch_reference: None,
        ratios: None,
        gpu: None,
        rounds: None,
    }
}

/// Refuses option combinations the benchmark cannot measure, and precisions the device lacks.
fn check(opts: &BenchOptions, device: &Device) -> anyhow::Result<()> {
    let on_cpu = opts.device.is_cpu();
    anyhow::ensure!(
        !(on_cpu && opts.torch.is_some() && opts.dims != Dims::REFERENCE),
        "the PyTorch CPU twin (torch_reference.py) has the reference sizes only; use --dims reference with \
         --torch-python on the CPU"
    );
    anyhow::ensure!(
        opts.torch.is_none() || opts.dims.n_kv_heads.is_none(),
        "the PyTorch twins have no grouped-query attention: drop --torch-python with these --dims"
    );
    anyhow::ensure!(
        opts.rounds <= 1 || (on_cpu && opts.torch.is_some()),
        "--rounds measures `pre` against PyTorch on the CPU: add --torch-python, on --device cpu"
    );
    for &p in &opts.precisions {
        crate::run::checked::check_precision(device, &opts.device.to_string(), p)?;
    }
    opts.kernels.iter().try_for_each(|k| k.check_on(device))
}

/// Every recipe (all presets when none is named) in every kernel setting and precision,
/// printed as it is measured and handed to `partial` after each; an engine failure is one
/// clear error.
fn measure_all(
    opts: &BenchOptions,
    device: &Device,
    timing: Timing,
    partial: &dyn Fn(&[RecipeBench]) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<RecipeBench>> {
    let recipes: Vec<String> = if opts.recipes.is_empty() {
        PRESET_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        opts.recipes.clone()
    };
    let mut results = Vec::new();
    for recipe in &recipes {
        for (&kernels, &precision) in opts.kernels.iter().flat_map(|k| opts.precisions.iter().map(move |p| (k, p))) {
            let case = Case { recipe: recipe.clone(), kernels, precision };
            let b = crate::guard::catch(|| bench_recipe(&case, &opts.dims, device, timing)).unwrap_or_else(|msg| {
                let first = msg.lines().next().unwrap_or("(no message)");
                Err(anyhow::anyhow!(
                    "the compute engine failed benchmarking `{recipe}` in {precision:?} ({first}); if it ran out of \
                     memory, lower --batch or --seq"
                ))
            })?;
            let b = RecipeBench {
                mfu: mfu(
                    &b,
                    &opts.dims,
                    crate::device::peak::device_peak(!opts.device.is_cpu(), precision.half().is_some()),
                ),
                ..b
            };
            print_result(&b);
            results.push(b);
            partial(&results)?;
        }
    }
    Ok(results)
}

/// `b`'s MFU at `dims` against `peak` TFLOP/s.
fn mfu(b: &RecipeBench, dims: &Dims, peak: Option<f64>) -> Option<f64> {
    let shape = crate::device::peak::FlopShape {
        matmul_params: b.params - dims.vocab * dims.d_model,
        layers: dims.n_layers,
        d_model: dims.d_model,
        seq_len: dims.seq,
    };
    peak.map(|p| crate::device::peak::mfu(shape, b.train_tok_s, p))
}

fn print_result(b: &RecipeBench) {
    crate::io::term::err(format_args!(
        "{:20} {:9} {:4} train {:8.0} tok/s ({:6.1} ms/step, {:.1}–{:.1}) {:6.2} TFLOP/s(6N){}   fwd {:8.0} tok/s   \
         loss {:.3} → {:.3}   peak RSS {}",
        b.recipe,
        format!("{:?}", b.kernels).to_lowercase(),
        format!("{:?}", b.precision).to_lowercase(),
        b.train_tok_s,
        b.train_ms,
        b.train_ms_min,
        b.train_ms_max,
        b.tflops_6n,
        b.mfu.map_or(String::new(), |m| format!(" MFU {:.1}%", 100.0 * m)),
        b.fwd_tok_s,
        b.loss_first,
        b.loss_last,
        b.train_peak_rss_mb.map_or("-".into(), |m| format!("{m:.0} MB")),
    ));
}

fn compare_trainer(opts: &BenchOptions) -> anyhow::Result<TrainerComparison> {
    let every = crate::probe::ProbeConfig::default().every;
    let warmup = opts.warmup.max(1);
    let with = bench_trainer("pre", opts.device, warmup, opts.trainer_steps, every)?;
    let without = bench_trainer("pre", opts.device, warmup, opts.trainer_steps, 0)?;
    let overhead = without.overall_tok_s / with.overall_tok_s - 1.0;
    crate::io::term::err(format_args!(
        "{:20} full training loop {:8.0} tok/s per step; overall {:8.0} tok/s with probes every {every}, {:8.0} \
            without: probe overhead {:.1}%",
        "pre (trainer)",
        with.train_tok_s,
        with.overall_tok_s,
        without.overall_tok_s,
        100.0 * overhead
    ));
    Ok(TrainerComparison { with_probes: with, without_probes: without, probe_overhead: overhead })
}

/// `--rounds`: the main pass's `pre` and PyTorch, then more pairs measured back to back.
fn more_rounds(
    opts: &BenchOptions,
    device: &Device,
    timing: Timing,
    results: &[RecipeBench],
    torch: &TorchBench,
) -> anyhow::Result<rounds::Rounds> {
    let case = Case { recipe: "pre".into(), kernels: Kernels::Fused, precision: Precision::F32 };
    let first = pre_f32(results, case.kernels).context(
        "--rounds compares `pre` with the fused kernels in f32: include them in --recipes, --kernels and --precision",
    )?;
    let (py, script) = opts.torch.as_ref().context("--rounds needs --torch-python")?;
    let r = rounds::run(rounds::Pair::of(first, torch), opts.rounds, || {
        let ours = bench_recipe(&case, &opts.dims, device, timing)?;
        let theirs = run_torch(py, script, crate::device::available_threads(), &[])?;
        Ok(rounds::Pair::of(&ours, &theirs))
    })?;
    crate::io::term::err(format_args!(
        "median over {} rounds: pre train {:.3}×, forward {:.3}× PyTorch eager",
        r.pairs.len(),
        r.train_ratio_median,
        r.fwd_ratio_median
    ));
    Ok(r)
}

/// `pre`'s f32 result with kernels `k`, the one every PyTorch ratio compares.
fn pre_f32(results: &[RecipeBench], k: Kernels) -> Option<&RecipeBench> {
    results.iter().find(|b| b.recipe == "pre" && b.kernels == k && b.precision == Precision::F32)
}

fn ratios(results: &[RecipeBench], trainer: Option<&TrainerComparison>, t: &TorchBench) -> Ratios {
    let (fused, composite) = (pre_f32(results, Kernels::Fused), pre_f32(results, Kernels::Composite));
    Ratios {
        pre_train_vs_torch_eager: fused.map(|b| b.train_tok_s / t.train_tok_s),
        pre_fwd_vs_torch_eager: fused.map(|b| b.fwd_tok_s / t.fwd_tok_s),
        pre_composite_train_vs_torch_eager: composite.map(|b| b.train_tok_s / t.train_tok_s),
        pre_composite_fwd_vs_torch_eager: composite.map(|b| b.fwd_tok_s / t.fwd_tok_s),
        pre_trainer_vs_torch_eager: trainer.map(|c| c.with_probes.train_tok_s / t.train_tok_s),
        pre_peak_rss_vs_torch: fused.and_then(|b| Some(b.train_peak_rss_mb? / t.peak_rss_mb?)),
    }
}
