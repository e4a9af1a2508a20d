//! Throughput benchmark of the reference model (shared/bench/torch_reference.py): byte vocab
//! 256, d = 256, 6 layers, 4 heads, RoPE, GLU 688, no biases, untied embeddings, batch 8 × 256,
//! f32, one fixed batch from the same 64-bit LCG, AdamW(1e-3, 0.9/0.95, wd 0.1).
//!
//! For each recipe: forward tokens/s (no autodiff) and train tokens/s (forward, backward and
//! an AdamW step), the same work the PyTorch script times. The PyTorch script can be run in the
//! same invocation so the ratio is measured on the same machine at the same time.

use crate::device::Machine;
use crate::init::ParamSource;
use crate::kernels::Kernels;
use crate::model::{FfnKind, ModelConfig, Transformer};
use crate::recipe::{PRESET_NAMES, RecipeConfig, RecipeOverlay};
use crate::stats::median;
use crate::train::metrics::Metrics;
use crate::train::run_dir;
use anyhow::Context;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

pub const BATCH: usize = 8;
pub const SEQ: usize = 256;

/// The reference model with `recipe`; `pre` uses RMSNorm (ε = 1e-5) as the PyTorch script does.
pub fn reference_config(recipe: &str) -> ModelConfig {
    let recipe = if recipe == "pre" {
        RecipeConfig::Custom(Box::new(RecipeOverlay {
            preset: Some("pre".into()),
            name: Some("pre".into()),
            norm: Some(crate::recipe::BaseNorm::Rmsnorm),
            ..Default::default()
        }))
    } else {
        RecipeConfig::Preset(recipe.into())
    };
    ModelConfig {
        vocab_size: 256,
        d_model: 256,
        n_layers: 6,
        n_heads: 4,
        ffn: FfnKind::Glu,
        d_glu: Some(688),
        rope_base: 10_000.0,
        norm_eps: 1e-5,
        init_std: 0.02,
        recipe,
        ..Default::default()
    }
}

/// The PyTorch script's batch: 8 × 257 bytes from a 64-bit LCG, split into inputs and targets.
pub fn lcg_batch(device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let mut s: u64 = 0x2545_F491_4F6C_DD1D;
    let toks: Vec<i64> = (0..BATCH * (SEQ + 1))
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 33) & 0xFF) as i64
        })
        .collect();
    let all = Tensor::<2, Int>::from_data(TensorData::new(toks, [BATCH, SEQ + 1]), device);
    (all.clone().narrow(1, 0, SEQ), all.narrow(1, 1, SEQ))
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecipeBench {
    pub recipe: String,
    pub kernels: Kernels,
    pub params: usize,
    pub fwd_tok_s: f64,
    pub train_tok_s: f64,
    pub fwd_ms: f64,
    pub train_ms: f64,
    pub loss_first: f64,
    pub loss_last: f64,
    /// Peak resident memory of the whole process during the train steps (MB), where the OS
    /// lets the peak be reset (Linux); `None` elsewhere.
    pub train_peak_rss_mb: Option<f64>,
}

/// Times `warmup + steps` train steps and `fwd_warmup + fwd_steps` forwards.
pub fn bench_recipe(
    recipe: &str,
    kernels: Kernels,
    device: &Device,
    warmup: usize,
    steps: usize,
    fwd_steps: usize,
) -> anyhow::Result<RecipeBench> {
    let cfg = ModelConfig { kernels, ..reference_config(recipe) };
    let ad = device.clone().autodiff();
    let mut model =
        Transformer::new(&cfg, ParamSource::Seeded(0), &ad).with_context(|| format!("building `{recipe}`"))?;
    let params = crate::model::params::count(&model);
    let mut optim = AdamWConfig::new().with_beta_2(0.95).with_epsilon(1e-8).with_weight_decay(0.1).init();
    let (x, y) = lcg_batch(&ad);
    let rss_reset = crate::device::reset_peak_rss();
    let mut losses = Vec::new();
    let mut times = Vec::new();
    for i in 0..warmup + steps {
        let t0 = Instant::now();
        let (loss, _, _) = model.loss(x.clone(), y.clone(), false);
        let grads = loss.backward();
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(1e-3, model, grads);
        let l: f64 = loss.into_scalar::<f32>() as f64;
        let dt = t0.elapsed().as_secs_f64();
        losses.push(l);
        if i >= warmup {
            times.push(dt);
        }
    }
    let train_peak_rss_mb = if rss_reset { crate::device::peak_rss_mb() } else { None };
    drop((model, optim));
    let plain = Transformer::new(&cfg, ParamSource::Seeded(0), device)?;
    let (xf, _) = lcg_batch(device);
    let mut ftimes = Vec::new();
    for i in 0..2 + fwd_steps {
        let t0 = Instant::now();
        let out = plain.forward(xf.clone(), false, false);
        let _: f32 = out.logits.slice([0..1, 0..1, 0..1]).into_scalar();
        if i >= 2 {
            ftimes.push(t0.elapsed().as_secs_f64());
        }
    }
    let tokens = (BATCH * SEQ) as f64;
    let train = median(&times);
    let fwd = median(&ftimes);
    Ok(RecipeBench {
        recipe: recipe.into(),
        kernels,
        params,
        fwd_tok_s: tokens / fwd,
        train_tok_s: tokens / train,
        fwd_ms: fwd * 1e3,
        train_ms: train * 1e3,
        loss_first: losses[0],
        loss_last: *losses.last().unwrap(),
        train_peak_rss_mb,
    })
}

/// Runs the PyTorch reference script and returns its JSON line.
pub fn run_torch(python: &str, script: &str, threads: usize, extra: &[&str]) -> anyhow::Result<TorchBench> {
    let out = std::process::Command::new(python)
        .arg(script)
        .args(["--threads", &threads.to_string()])
        .args(extra)
        .output()
        .with_context(|| {
            format!(
                "cannot run `{python} {script}`; install it with: python3 -m venv ~/.venvs/torchref \
            && ~/.venvs/torchref/bin/pip install torch numpy"
            )
        })?;
    anyhow::ensure!(out.status.success(), "PyTorch reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.find('{').map(|i| &l[i..]))
        .context("PyTorch reference printed no JSON line")?;
    let mut bench: TorchBench = serde_json::from_str(line)
        .with_context(|| format!("the PyTorch reference printed an unexpected line: {line}"))?;
    bench.peak_rss_mb = crate::device::children_peak_rss_mb();
    Ok(bench)
}

/// The full training loop (sampler, accumulation, global clipping, divergence check, AdamW,
/// metrics) on the reference model, batch 8 × 256 of the built-in corpus: median tokens/s of
/// the steps after `warmup`, from the run's own `metrics.jsonl`.
/// `probe_every` = 0 turns the activation probes and TensorBoard off; the overall rate
/// (tokens over wall time, probes included) gives their overhead.
pub fn bench_trainer(
    recipe: &str,
    device: &str,
    warmup: usize,
    steps: usize,
    probe_every: usize,
) -> anyhow::Result<TrainerBench> {
    use crate::train::{RunConfig, progress::Progress};
    let mut cfg = RunConfig { model: reference_config(recipe), ..Default::default() };
    cfg.run.dir = std::env::temp_dir().join(format!("normlab-bench-trainer-{}", std::process::id()));
    cfg.run.device = device.to_string();
    cfg.run.eval_every = 0;
    cfg.run.checkpoint_every = 0;
    cfg.train.batch_size = BATCH;
    cfg.train.seq_len = SEQ;
    cfg.train.steps = Some(warmup + steps);
    cfg.optim.lr = 1e-3;
    cfg.probe.every = probe_every;
    cfg.probe.tensorboard = probe_every > 0;
    let dir = cfg.run.dir.clone();
    let mut t = crate::train::start(cfg, true, &|m| eprintln!("{m}"))?;
    let mut p = Progress::new(warmup + steps, 0, true);
    t.run(&mut p)?;
    let recs = Metrics::read(&run_dir::metrics(&dir))?.train;
    let rates: Vec<f64> = recs.iter().skip(warmup).map(|r| r.tokens_per_s).collect();
    let overall = (steps * BATCH * SEQ) as f64 / (recs[recs.len() - 1].wall_s - recs[warmup - 1].wall_s);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(TrainerBench {
        recipe: recipe.into(),
        steps: rates.len(),
        probe_every,
        train_tok_s: median(&rates),
        overall_tok_s: overall,
    })
}

/// The full training loop's throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerBench {
    pub recipe: String,
    pub steps: usize,
    pub probe_every: usize,
    /// Median tokens/s of the steps after warm-up.
    pub train_tok_s: f64,
    /// Tokens over wall time, probes included.
    pub overall_tok_s: f64,
}

/// The training loop with and without the activation probes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerComparison {
    pub with_probes: TrainerBench,
    pub without_probes: TrainerBench,
    /// `overall(without) / overall(with) − 1`.
    pub probe_overhead: f64,
}

/// What the PyTorch reference printed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchBench {
    pub train_tok_s: f64,
    pub fwd_tok_s: f64,
    /// The PyTorch process's peak resident memory (MB), measured by normlab when it waits for it.
    #[serde(default)]
    pub peak_rss_mb: Option<f64>,
    /// Everything else it reported (threads, torch version, …).
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
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
    pub results: Vec<RecipeBench>,
    pub trainer: Option<TrainerComparison>,
    pub torch_reference: Option<TorchBench>,
    pub ratios: Option<Ratios>,
}

/// What `normlab bench` measures.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Recipes to measure (empty: every preset).
    pub recipes: Vec<String>,
    pub warmup: usize,
    pub steps: usize,
    pub fwd_steps: usize,
    pub device: String,
    /// `(python, script)` of the PyTorch reference, run in the same invocation.
    pub torch: Option<(String, String)>,
    /// Steps of the full training loop to time (0: none).
    pub trainer_steps: usize,
    pub out: PathBuf,
    /// Each recipe is measured once per setting, in this order.
    pub kernels: Vec<Kernels>,
}

/// `fused` / `composite` names as [`Kernels`].
pub fn parse_kernels(names: &[String]) -> anyhow::Result<Vec<Kernels>> {
    names
        .iter()
        .map(|n| match n.as_str() {
            "fused" => Ok(Kernels::Fused),
            "composite" => Ok(Kernels::Composite),
            other => anyhow::bail!("unknown kernels `{other}`: use `fused` or `composite`"),
        })
        .collect()
}

/// Runs the benchmark, prints a line per measurement, writes `opts.out` and returns the report.
pub fn run(opts: &BenchOptions) -> anyhow::Result<BenchReport> {
    let device = crate::device::parse(&opts.device)?;
    let recipes: Vec<String> = if opts.recipes.is_empty() {
        PRESET_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        opts.recipes.clone()
    };
    let mut results = Vec::new();
    for r in &recipes {
        for &k in &opts.kernels {
            let b = bench_recipe(r, k, &device, opts.warmup, opts.steps, opts.fwd_steps)?;
            eprintln!(
                "{:20} {:9} train {:8.0} tok/s ({:6.1} ms/step)   fwd {:8.0} tok/s   loss {:.3} → {:.3}   peak RSS {}",
                b.recipe,
                format!("{k:?}").to_lowercase(),
                b.train_tok_s,
                b.train_ms,
                b.fwd_tok_s,
                b.loss_first,
                b.loss_last,
                b.train_peak_rss_mb.map_or("-".into(), |m| format!("{m:.0} MB")),
            );
            results.push(b);
        }
    }
    let trainer = (opts.trainer_steps > 0).then(|| compare_trainer(opts)).transpose()?;
    let torch = match &opts.torch {
        Some((py, script)) => Some(run_torch(py, script, crate::device::available_threads(), &[])?),
        None => None,
    };
    let ratios = torch.as_ref().map(|t| ratios(&results, trainer.as_ref(), t));
    if let Some(r) = &ratios {
        eprintln!("ratio to PyTorch eager (pre): {}", serde_json::to_string(r)?);
    }
    let report = BenchReport {
        benchmark: "reference model: V=256 d=256 L=6 H=4 GLU688 batch 8x256 f32; train = fwd+bwd+AdamW".into(),
        machine: crate::device::machine(),
        results,
        trainer,
        torch_reference: torch,
        ratios,
    };
    crate::io::json::write(&opts.out, &report)?;
    eprintln!("wrote {}", opts.out.display());
    Ok(report)
}

fn compare_trainer(opts: &BenchOptions) -> anyhow::Result<TrainerComparison> {
    let every = crate::probe::ProbeConfig::default().every;
    let warmup = opts.warmup.max(1);
    let with = bench_trainer("pre", &opts.device, warmup, opts.trainer_steps, every)?;
    let without = bench_trainer("pre", &opts.device, warmup, opts.trainer_steps, 0)?;
    let overhead = without.overall_tok_s / with.overall_tok_s - 1.0;
    eprintln!(
        "{:20} full training loop {:8.0} tok/s per step; overall {:8.0} tok/s with probes every {every}, {:8.0} \
            without: probe overhead {:.1}%",
        "pre (trainer)",
        with.train_tok_s,
        with.overall_tok_s,
        without.overall_tok_s,
        100.0 * overhead
    );
    Ok(TrainerComparison { with_probes: with, without_probes: without, probe_overhead: overhead })
}

fn ratios(results: &[RecipeBench], trainer: Option<&TrainerComparison>, t: &TorchBench) -> Ratios {
    let pre = |k: Kernels| results.iter().find(|b| b.recipe == "pre" && b.kernels == k);
    let (fused, composite) = (pre(Kernels::Fused), pre(Kernels::Composite));
    Ratios {
        pre_train_vs_torch_eager: fused.map(|b| b.train_tok_s / t.train_tok_s),
        pre_fwd_vs_torch_eager: fused.map(|b| b.fwd_tok_s / t.fwd_tok_s),
        pre_composite_train_vs_torch_eager: composite.map(|b| b.train_tok_s / t.train_tok_s),
        pre_composite_fwd_vs_torch_eager: composite.map(|b| b.fwd_tok_s / t.fwd_tok_s),
        pre_trainer_vs_torch_eager: trainer.map(|c| c.with_probes.train_tok_s / t.train_tok_s),
        pre_peak_rss_vs_torch: fused.and_then(|b| Some(b.train_peak_rss_mb? / t.peak_rss_mb?)),
    }
}
