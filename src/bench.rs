//! Throughput benchmark of the reference model (shared/bench/torch_reference.py): byte vocab
//! 256, d = 256, 6 layers, 4 heads, RoPE, GLU 688, no biases, untied embeddings, batch 8 × 256,
//! f32, one fixed batch from the same 64-bit LCG, AdamW(1e-3, 0.9/0.95, wd 0.1).
//!
//! For each recipe: forward tokens/s (no autodiff) and train tokens/s (forward, backward and
//! an AdamW step), the same work the PyTorch script times. The PyTorch script can be run in the
//! same invocation so the ratio is measured on the same machine at the same time.

use crate::model::init::ParamSource;
use crate::model::{FfnKind, ModelConfig, Transformer};
use crate::recipe::{RecipeConfig, RecipeOverlay};
use anyhow::Context;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::Serialize;
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

#[derive(Debug, Serialize)]
pub struct RecipeBench {
    pub recipe: String,
    pub params: usize,
    pub fwd_tok_s: f64,
    pub train_tok_s: f64,
    pub fwd_ms: f64,
    pub train_ms: f64,
    pub loss_first: f64,
    pub loss_last: f64,
}

/// Times `warmup + steps` train steps and `fwd_warmup + fwd_steps` forwards.
pub fn bench_recipe(
    recipe: &str,
    device: &Device,
    warmup: usize,
    steps: usize,
    fwd_steps: usize,
) -> anyhow::Result<RecipeBench> {
    let cfg = reference_config(recipe);
    let ad = device.clone().autodiff();
    let mut model =
        Transformer::new(&cfg, ParamSource::Seeded(0), &ad).with_context(|| format!("building `{recipe}`"))?;
    let params = crate::model::params::count(&model);
    let mut optim = AdamWConfig::new().with_beta_2(0.95).with_epsilon(1e-8).with_weight_decay(0.1).init();
    let (x, y) = lcg_batch(&ad);
    let mut losses = Vec::new();
    let mut times = Vec::new();
    for i in 0..warmup + steps {
        let t0 = Instant::now();
        let (loss, _, _) = model.loss(x.clone(), y.clone());
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
        params,
        fwd_tok_s: tokens / fwd,
        train_tok_s: tokens / train,
        fwd_ms: fwd * 1e3,
        train_ms: train * 1e3,
        loss_first: losses[0],
        loss_last: *losses.last().unwrap(),
    })
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// Runs the PyTorch reference script and returns its JSON line.
pub fn run_torch(python: &str, script: &str, threads: usize, extra: &[&str]) -> anyhow::Result<serde_json::Value> {
    let out = std::process::Command::new(python)
        .arg(script)
        .args(["--threads", &threads.to_string()])
        .args(extra)
        .output()
        .with_context(|| format!("cannot run `{python} {script}`; install it with: python3 -m venv ~/.venvs/torchref && ~/.venvs/torchref/bin/pip install torch numpy"))?;
    anyhow::ensure!(out.status.success(), "PyTorch reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.find('{').map(|i| &l[i..]))
        .context("PyTorch reference printed no JSON line")?;
    Ok(serde_json::from_str(line)?)
}

/// A short description of the CPU for the results file.
pub fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    serde_json::json!({
        "cpu": model,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "avx512f": cpuinfo.contains("avx512f"),
        "os": std::env::consts::OS,
        "normlab": env!("CARGO_PKG_VERSION"),
    })
}

/// The full training loop (sampler, accumulation, global clipping, divergence check, AdamW,
/// metrics) on the reference model, batch 8 × 256 of the built-in corpus: median tokens/s of
/// the steps after `warmup`, from the run's own `metrics.jsonl`.
/// `probe_every` = 0 turns the activation probes and TensorBoard off; the overall rate
/// (tokens over wall time, probes included) gives their overhead.
pub fn bench_trainer(recipe: &str, device: &str, warmup: usize, steps: usize, probe_every: usize) -> anyhow::Result<serde_json::Value> {
    use crate::train::{RunConfig, Trainer, progress::Progress};
    let mut cfg = RunConfig::default();
    cfg.model = reference_config(recipe);
    cfg.run.dir = std::env::temp_dir().join(format!("normlab-bench-trainer-{}", std::process::id()));
    cfg.run.device = device.to_string();
    cfg.run.eval_every = 1 << 40;
    cfg.run.checkpoint_every = 0;
    cfg.train.batch_size = BATCH;
    cfg.train.seq_len = SEQ;
    cfg.train.steps = Some(warmup + steps);
    cfg.optim.lr = 1e-3;
    cfg.probe.every = probe_every;
    cfg.probe.tensorboard = probe_every > 0;
    let dir = cfg.run.dir.clone();
    let mut t = Trainer::start(cfg, true, &|m| eprintln!("{m}"))?;
    let mut p = Progress::new(warmup + steps, 0, true);
    t.run(&mut p)?;
    let recs: Vec<serde_json::Value> = crate::train::metrics::read(&dir.join(crate::train::run_dir::METRICS))?
        .into_iter()
        .filter(|r| r["type"] == "train")
        .collect();
    let rates: Vec<f64> = recs.iter().skip(warmup).filter_map(|r| r["tokens_per_s"].as_f64()).collect();
    let wall = |r: &serde_json::Value| r["wall_s"].as_f64().unwrap_or(f64::NAN);
    let overall = (steps * BATCH * SEQ) as f64 / (wall(&recs[recs.len() - 1]) - wall(&recs[warmup - 1]));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(serde_json::json!({
        "recipe": recipe,
        "steps": rates.len(),
        "probe_every": probe_every,
        "train_tok_s": median(&rates),
        "overall_tok_s": overall,
    }))
}
