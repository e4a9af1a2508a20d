//! One measurement of the model benchmarks: a recipe's model built at some dims with a kernel
//! setting and a precision, its train steps (forward, backward, an AdamW step) and forwards
//! timed on one fixed batch; and the full training loop (`normlab train`) timed with and
//! without its probes.

use super::dims::Dims;
use crate::device::DeviceName;
use crate::init::ParamSource;
use crate::kernels::{Kernels, Precision};
use crate::model::{ModelConfig, Transformer};
use crate::run::layout;
use crate::run::metrics::Metrics;
use crate::stats::median;
use anyhow::Context;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecipeBench {
    pub recipe: String,
    pub kernels: Kernels,
    /// `train.precision` of the run (f32 for results written before it existed).
    #[serde(default)]
    pub precision: Precision,
    pub params: usize,
    pub fwd_tok_s: f64,
    pub train_tok_s: f64,
    /// Medians over the timed steps, and the fastest and slowest train step (the spread shows
    /// whether warm-up, e.g. a GPU's autotuning, is over).
    pub fwd_ms: f64,
    pub train_ms: f64,
    #[serde(default)]
    pub train_ms_min: f64,
    #[serde(default)]
    pub train_ms_max: f64,
    /// Model FLOP rate by the 6·N·tokens rule (as `torch_gpu.py`'s `tflops_6N`).
    #[serde(default)]
    pub tflops_6n: f64,
    /// Model FLOPs utilisation: `6·N + 12·L·d·T` FLOPs per token (`device::peak`) at the train
    /// rate over the device's stated peak in this precision; `None` where the peak is not
    /// known (the CPU, or a GPU the table lacks, unless `NORMLAB_PEAK_TFLOPS` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfu: Option<f64>,
    pub loss_first: f64,
    pub loss_last: f64,
    /// Peak resident memory of the whole process during the train steps (MB), where the OS
    /// lets the peak be reset (Linux); `None` elsewhere.
    pub train_peak_rss_mb: Option<f64>,
}

/// One measurement: a recipe with a kernel setting and a precision.
#[derive(Clone, Debug)]
pub struct Case {
    pub recipe: String,
    pub kernels: Kernels,
    pub precision: Precision,
}

/// How long to measure.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub warmup: usize,
    pub steps: usize,
    pub fwd_steps: usize,
}

/// Builds `case`'s model at `dims` on `device`.
pub(crate) fn build(case: &Case, dims: &Dims, device: &Device) -> anyhow::Result<Transformer> {
    let cfg = ModelConfig { kernels: case.kernels, ..dims.model(&case.recipe) };
    let mut model = Transformer::new(&cfg, ParamSource::Seeded(0), device)
        .with_context(|| format!("building `{}`", case.recipe))?;
    model.set_precision(case.precision);
    Ok(model)
}

/// Times `warmup + steps` train steps and `2 + fwd_steps` forwards.
pub fn bench_recipe(case: &Case, dims: &Dims, device: &Device, timing: Timing) -> anyhow::Result<RecipeBench> {
    let rss_reset = crate::device::reset_peak_rss();
    let TrainSteps { params, losses, times } = train_steps(case, dims, device, timing, StepEnd::LossRead)?;
    let train_peak_rss_mb = if rss_reset { crate::device::peak_rss_mb() } else { None };
    let ftimes = time_forwards(case, dims, device, timing.fwd_steps)?;
    let tokens = (dims.batch * dims.seq) as f64;
    let train = median(&times);
    let fwd = median(&ftimes);
    let fold = |f: fn(f64, f64) -> f64, init: f64| times.iter().copied().fold(init, f) * 1e3;
    Ok(RecipeBench {
        recipe: case.recipe.clone(),
        kernels: case.kernels,
        precision: case.precision,
        params,
        fwd_tok_s: tokens / fwd,
        train_tok_s: tokens / train,
        fwd_ms: fwd * 1e3,
        train_ms: train * 1e3,
        train_ms_min: fold(f64::min, f64::INFINITY),
        train_ms_max: fold(f64::max, 0.0),
        tflops_6n: 6.0 * params as f64 * tokens / train / 1e12,
        mfu: None,
        loss_first: losses.first().copied().unwrap_or(f64::NAN),
        loss_last: losses.last().copied().unwrap_or(f64::NAN),
        train_peak_rss_mb,
    })
}

/// What [`train_steps`] measured: the parameter count, every step's loss, and the seconds of
/// each step after the warm-up.
pub(crate) struct TrainSteps {
    params: usize,
    pub(crate) losses: Vec<f64>,
    times: Vec<f64>,
}

/// Whether a timed step ends when its loss is read (the queue may still hold the optimizer's
/// work, as in training) or when the device is drained (the step's whole cost, for `bench
/// profile`, whose pieces are timed the same way).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepEnd {
    LossRead,
    DeviceDrained,
}

/// `warmup + steps` AdamW steps on one fixed batch.
pub(crate) fn train_steps(
    case: &Case,
    dims: &Dims,
    device: &Device,
    timing: Timing,
    end: StepEnd,
) -> anyhow::Result<TrainSteps> {
    let ad = device.clone().autodiff();
    let mut model = build(case, dims, &ad)?;
    let params = crate::model::base::params::count(&model);
    let mut optim = AdamWConfig::new().with_beta_2(0.95).with_epsilon(1e-8).with_weight_decay(0.1).init();
    let (x, y) = dims.lcg_batch(&ad);
    let drain = || ad.sync().map_err(|e| anyhow::anyhow!("device sync failed: {e:?}"));
    let (mut losses, mut times) = (Vec::new(), Vec::new());
    for i in 0..timing.warmup + timing.steps {
        if end == StepEnd::DeviceDrained {
            drain()?;
        }
        let t0 = Instant::now();
        let (loss, _, _) = model.loss(x.clone(), y.clone(), false);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
        losses.push(loss.into_scalar::<f32>() as f64);
        if end == StepEnd::DeviceDrained {
            drain()?;
        }
        if i >= timing.warmup {
            times.push(t0.elapsed().as_secs_f64());
        }
    }
    Ok(TrainSteps { params, losses, times })
}

/// The seconds of each of `timing.steps` AdamW steps after `timing.warmup` untimed ones, the
/// device drained at the end of each (`bench profile`'s whole step).
pub fn step_times(case: &Case, dims: &Dims, device: &Device, timing: Timing) -> anyhow::Result<Vec<f64>> {
    Ok(train_steps(case, dims, device, timing, StepEnd::DeviceDrained)?.times)
}

/// The seconds of `fwd_steps` forwards (after two untimed ones), no autodiff.
fn time_forwards(case: &Case, dims: &Dims, device: &Device, fwd_steps: usize) -> anyhow::Result<Vec<f64>> {
    let plain = build(case, dims, device)?;
    let (xf, _) = dims.lcg_batch(device);
    let mut ftimes = Vec::new();
    for i in 0..2 + fwd_steps {
        let t0 = Instant::now();
        let out = plain.forward(xf.clone(), crate::model::Keep::LOGITS);
        let _: f32 = out.logits.slice([0..1, 0..1, 0..1]).into_scalar();
        if i >= 2 {
            ftimes.push(t0.elapsed().as_secs_f64());
        }
    }
    Ok(ftimes)
}

/// The full training loop (sampler, accumulation, global clipping, divergence check, AdamW,
/// metrics) on the reference model, batch 8 × 256 of the built-in corpus: median tokens/s of
/// the steps after `warmup`, from the run's own `metrics.jsonl`.
/// `probe_every` = 0 turns the activation probes and TensorBoard off; the overall rate
/// (tokens over wall time, probes included) gives their overhead.
pub fn bench_trainer(
    recipe: &str,
    device: DeviceName,
    warmup: usize,
    steps: usize,
    probe_every: usize,
) -> anyhow::Result<TrainerBench> {
    bench_trainer_on(recipe, device, warmup, steps, probe_every, None)
}

/// [`bench_trainer`] on `corpus` (`data.corpus`) instead of the built-in corpus.
pub fn bench_trainer_on(
    recipe: &str,
    device: DeviceName,
    warmup: usize,
    steps: usize,
    probe_every: usize,
    corpus: Option<&str>,
) -> anyhow::Result<TrainerBench> {
    use crate::run::RunConfig;
    use crate::train::progress::Progress;
    let mut cfg = RunConfig { model: Dims::REFERENCE.model(recipe), ..Default::default() };
    if let Some(c) = corpus {
        cfg.data.corpus = c.to_string();
    }
    cfg.run.dir = std::env::temp_dir().join(format!("normlab-bench-trainer-{}", std::process::id()));
    cfg.run.device = device;
    cfg.run.eval_every = 0;
    cfg.run.checkpoint_every = 0;
    cfg.train.batch_size = Dims::REFERENCE.batch;
    cfg.train.seq_len = Dims::REFERENCE.seq;
    cfg.train.steps = Some(warmup + steps);
    cfg.optim.lr = 1e-3;
    cfg.probe.every = probe_every;
    cfg.probe.tensorboard = probe_every > 0;
    let dir = cfg.run.dir.clone();
    let mut t = crate::train::start(cfg, true, &|m| crate::io::term::err(format_args!("{m}")))?;
    let mut p = Progress::new(warmup + steps, 0, true);
    t.run(&mut p)?;
    let recs = Metrics::read(&layout::metrics(&dir))?.train;
    let rates: Vec<f64> = recs.iter().skip(warmup).map(|r| r.tokens_per_s).collect();
    let overall = (steps * Dims::REFERENCE.batch * Dims::REFERENCE.seq) as f64
        / (recs[recs.len() - 1].wall_s - recs[warmup - 1].wall_s);
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
