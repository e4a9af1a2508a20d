//! `normlab bench optimizers`: the train step of one model under each optimizer beside AdamW's,
//! in interleaved rounds (each round times every optimizer once, AdamW first), the ratio to
//! AdamW taken within each round and summarised by its median (these machines drift ±15 %
//! between minutes, much less within a round). Muon's Newton–Schulz adds three matmuls per
//! iteration on every hidden matrix; the hyperball adds two norms per matrix.

use super::Dims;
use super::step::{Case, build};
use crate::device::Machine;
use crate::kernels::{Kernels, Precision};
use crate::run::optim::{OptimConfig, OptimizerName};
use crate::stats::median;
use burn::optim::GradientsParams;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

pub struct OptimizerBenchOptions {
    pub recipe: String,
    pub optimizers: Vec<OptimizerName>,
    pub dims: Dims,
    pub device: Device,
    pub device_name: String,
    pub rounds: usize,
    pub steps: usize,
    pub out: PathBuf,
}

/// One optimizer's measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerTiming {
    pub optimizer: OptimizerName,
    /// Median train step over all rounds (ms).
    pub train_ms: f64,
    /// Median over rounds of this optimizer's step time over AdamW's in the same round.
    pub ratio_to_adamw: f64,
    /// The per-round ratios.
    pub round_ratios: Vec<f64>,
    pub loss_first: f64,
    pub loss_last: f64,
}

/// `bench/optimizers.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerBench {
    pub benchmark: String,
    pub machine: Machine,
    pub device: String,
    pub dims: Dims,
    pub recipe: String,
    pub rounds: usize,
    pub steps_per_round: usize,
    pub results: Vec<OptimizerTiming>,
}

/// Runs the rounds and writes the JSON.
pub fn run(o: &OptimizerBenchOptions) -> anyhow::Result<OptimizerBench> {
    let mut names = vec![OptimizerName::Adamw];
    names.extend(o.optimizers.iter().copied().filter(|&n| n != OptimizerName::Adamw));
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut round_ms: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut losses: Vec<(f64, f64)> = vec![(f64::NAN, f64::NAN); names.len()];
    for _ in 0..o.rounds {
        for (i, &name) in names.iter().enumerate() {
            let (t, first, last) = time_steps(o, name)?;
            round_ms[i].push(median(&t));
            times[i].extend(t);
            losses[i] = (first, last);
        }
    }
    let results = names
        .iter()
        .enumerate()
        .map(|(i, &optimizer)| {
            let round_ratios: Vec<f64> = round_ms[i].iter().zip(&round_ms[0]).map(|(a, b)| a / b).collect();
            OptimizerTiming {
                optimizer,
                train_ms: median(&times[i]) * 1e3,
                ratio_to_adamw: median(&round_ratios),
                round_ratios,
                loss_first: losses[i].0,
                loss_last: losses[i].1,
            }
        })
        .collect();
    let report = OptimizerBench {
        benchmark: format!(
            "{} train step (fwd + bwd + optimizer) per optimizer, {} interleaved rounds",
            o.recipe, o.rounds
        ),
        machine: crate::device::machine(),
        device: o.device_name.clone(),
        dims: o.dims,
        recipe: o.recipe.clone(),
        rounds: o.rounds,
        steps_per_round: o.steps,
        results,
    };
    crate::io::json::write(&o.out, &report)?;
    Ok(report)
}

/// One untimed step, then `o.steps` timed ones, from the same seeded model each round: the
/// seconds of each, the first and last loss.
fn time_steps(o: &OptimizerBenchOptions, name: OptimizerName) -> anyhow::Result<(Vec<f64>, f64, f64)> {
    let ad = o.device.clone().autodiff();
    let case = Case { recipe: o.recipe.clone(), kernels: Kernels::Fused, precision: Precision::F32 };
    let mut model = build(&case, &o.dims, &ad)?;
    let cfg = OptimConfig { name, beta1: 0.9, lr: 1e-3, ..Default::default() };
    let mut optim = crate::train::optim::build(&cfg, &model);
    let (x, y) = o.dims.lcg_batch(&ad);
    let (mut times, mut first, mut last) = (Vec::new(), f64::NAN, f64::NAN);
    for i in 0..=o.steps {
        let t0 = Instant::now();
        let (loss, _, _) = model.loss(x.clone(), y.clone(), false);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(cfg.lr, model, grads);
        let l = loss.into_scalar::<f32>() as f64;
        if i > 0 {
            times.push(t0.elapsed().as_secs_f64());
        } else {
            first = l;
        }
        last = l;
    }
    Ok((times, first, last))
}

/// The result as a table: each optimizer's step time and its ratio to AdamW.
pub fn table(r: &OptimizerBench) -> String {
    let mut t = String::from(
        "| optimizer | train step (ms) | × AdamW (median of rounds) | loss first → last |\n|---|---|---|---|\n",
    );
    for x in &r.results {
        t += &format!(
            "| {} | {:.1} | {:.3} | {:.3} → {:.3} |\n",
            x.optimizer, x.train_ms, x.ratio_to_adamw, x.loss_first, x.loss_last
        );
    }
    t
}
