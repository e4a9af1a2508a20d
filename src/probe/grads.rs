//! Gradient norms per sublayer and per Transformer block, their coefficient of variation
//! (std/mean, the Normalization chapter) over a recent window and over the whole run, and gradient-norm spikes:
//! a global norm above mean + 6σ of the previous 128 steps (OLMo-core's rule).

use super::snapshot::sampled_values;
use crate::io::tensorboard::Histogram;
use crate::model::base::names::sublayer_of;
use crate::model::base::params::named_flat_grads;
use crate::stats::mean_std;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Gradient norms of one backward pass.
#[derive(Clone, Debug)]
pub struct GradNorms {
    /// `‖g‖₂` over every parameter.
    pub total: f64,
    /// `(name, ‖g_p‖₂)` per parameter, in module order (0 for a parameter without gradient).
    pub per_param: Vec<(String, f64)>,
}

/// Measures every parameter's gradient norm on the device and brings them to the host in one
/// transfer (the offline probes use this; the trainer reads the squares with its step's losses,
/// [`GradSquares`]).
pub fn measure<M: Module>(model: &M, grads: &GradientsParams) -> GradNorms {
    let squares = GradSquares::of(model, grads);
    let values: Vec<f64> = match &squares.squares {
        Some(t) => t.clone().into_data().convert::<f32>().iter::<f32>().map(f64::from).collect(),
        None => Vec::new(),
    };
    squares.norms(&values)
}

/// Every parameter's squared gradient norm, still on the device: one `[k]` tensor for the `k`
/// parameters that have a gradient, and every parameter's name in module order, for
/// [`GradSquares::norms`] once the values are read.
pub struct GradSquares {
    names: Vec<(String, bool)>,
    /// `Σ g²` of each parameter with a gradient, in module order; `None` when none has one.
    pub squares: Option<Tensor<1>>,
}

impl GradSquares {
    pub fn of<M: Module>(model: &M, grads: &GradientsParams) -> Self {
        let flat = named_flat_grads(model, grads);
        let squares: Vec<Tensor<1>> = flat.iter().filter_map(|(_, g)| g.clone().map(|g| g.square().sum())).collect();
        let names = flat.into_iter().map(|(name, g)| (name, g.is_some())).collect();
        Self { names, squares: (!squares.is_empty()).then(|| Tensor::cat(squares, 0)) }
    }

    /// The norms from the squares' `values` as read from the device.
    pub fn norms(self, values: &[f64]) -> GradNorms {
        let mut it = values.iter().copied();
        let per_param: Vec<(String, f64)> = self
            .names
            .into_iter()
            .map(|(name, has)| (name, if has { it.next().unwrap_or(0.0).sqrt() } else { 0.0 }))
            .collect();
        let total = per_param.iter().map(|(_, n)| n * n).sum::<f64>().sqrt();
        GradNorms { total, per_param }
    }
}

/// TensorBoard histograms `hist/grad/l001`… of every sublayer's gradient entries (all of its
/// parameters together).
pub fn histograms<M: Module>(model: &M, grads: &GradientsParams) -> Vec<(String, Histogram)> {
    let mut per: std::collections::BTreeMap<usize, Vec<f64>> = Default::default();
    for (name, g) in named_flat_grads(model, grads) {
        let Some(l) = sublayer_of(&name) else { continue };
        per.entry(l).or_default().extend(g.map(sampled_values).unwrap_or_default());
    }
    per.into_iter().map(|(l, v)| (format!("hist/grad/l{:03}", l + 1), Histogram::of(&v, 30))).collect()
}

/// `√Σ‖g_p‖²` over the parameters of each sublayer (`n_sublayers` values).
pub fn sublayer_norms(per_param: &[(String, f64)], n_sublayers: usize) -> Vec<f64> {
    let mut sq = vec![0.0; n_sublayers];
    for (name, n) in per_param {
        if let Some(l) = sublayer_of(name).filter(|&l| l < n_sublayers) {
            sq[l] += n * n;
        }
    }
    sq.into_iter().map(f64::sqrt).collect()
}

/// `√(‖g_attn‖² + ‖g_ffn‖²)` per Transformer block.
pub fn block_norms(sublayers: &[f64]) -> Vec<f64> {
    sublayers.chunks(2).map(|c| c.iter().map(|x| x * x).sum::<f64>().sqrt()).collect()
}

/// Running statistics of one series: a window of recent values and Welford's whole-run
/// mean and variance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub recent: VecDeque<f64>,
    n: u64,
    mean: f64,
    m2: f64,
}

impl Series {
    fn push(&mut self, x: f64, window: usize) {
        self.recent.push_back(x);
        while self.recent.len() > window {
            self.recent.pop_front();
        }
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Coefficient of variation over the window.
    pub fn cv_window(&self) -> f64 {
        let (m, s) = mean_std(&self.recent.iter().copied().collect::<Vec<_>>());
        s / m
    }

    /// Coefficient of variation over every value seen.
    pub fn cv_run(&self) -> f64 {
        (self.m2 / self.n as f64).sqrt() / self.mean
    }
}

/// A gradient-norm spike.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spike {
    pub step: usize,
    pub grad_norm: f64,
    /// mean + σ_factor · std of the preceding window.
    pub threshold: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradTracker {
    pub window: usize,
    pub spike_window: usize,
    pub spike_sigma: f64,
    /// Spikes are only flagged once this many previous norms are known.
    pub spike_min_history: usize,
    pub sublayers: Vec<Series>,
    pub blocks: Vec<Series>,
    pub global: Series,
    history: VecDeque<f64>,
    pub spikes: Vec<Spike>,
    /// The latest per-sublayer and per-block norms.
    pub last_sublayers: Vec<f64>,
    pub last_blocks: Vec<f64>,
}

impl GradTracker {
    pub fn new(n_sublayers: usize, window: usize, spike_window: usize, spike_sigma: f64) -> Self {
        Self {
            window,
            spike_window,
            spike_sigma,
            spike_min_history: 32.min(spike_window),
            sublayers: vec![Series::default(); n_sublayers],
            blocks: vec![Series::default(); n_sublayers / 2],
            global: Series::default(),
            history: VecDeque::new(),
            spikes: Vec::new(),
            last_sublayers: Vec::new(),
            last_blocks: Vec::new(),
        }
    }

    /// Folds in one step's norms; returns the spike if this step is one.
    pub fn observe(&mut self, step: usize, global: f64, per_param: &[(String, f64)]) -> Option<Spike> {
        let subs = sublayer_norms(per_param, self.sublayers.len());
        let blocks = block_norms(&subs);
        for (s, &x) in self.sublayers.iter_mut().zip(&subs) {
            s.push(x, self.window);
        }
        for (s, &x) in self.blocks.iter_mut().zip(&blocks) {
            s.push(x, self.window);
        }
        self.global.push(global, self.window);
        self.last_sublayers = subs;
        self.last_blocks = blocks;
        let spike = (self.history.len() >= self.spike_min_history)
            .then(|| {
                let (m, s) = mean_std(&self.history.iter().copied().collect::<Vec<_>>());
                Spike { step, grad_norm: global, threshold: m + self.spike_sigma * s }
            })
            .filter(|sp| global > sp.threshold);
        self.history.push_back(global);
        while self.history.len() > self.spike_window {
            self.history.pop_front();
        }
        if let Some(s) = &spike {
            self.spikes.push(s.clone());
        }
        spike
    }
}
