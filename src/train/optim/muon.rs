//! Muon and its two relatives on the hidden matrices, one step each (shapes named as PyTorch
//! stores a linear layer, `out × in`; burn's weights are `[in, out]`):
//!
//! ```text
//! B ← μ·B + (1 − μ)·G                       momentum (torch.optim.Muon's lerp)
//! U = (1 − μ)·G + μ·B   (Nesterov)   or B
//! O = NewtonSchulz(U)   (or Polar Express: `optim.muon.orthogonalizer`)
//! NorMuon:  v ← β₂·v + (1 − β₂)·mean_in(O²)   per output neuron;  O ← O/(√v + 1e-10), rescaled to ‖O‖_F before
//! η′ = η·s·ratio(out, in)                    s = muon.lr_scale; ratio 0.2·√max(out, in) or √max(1, out/in)
//! Muon, NorMuon:  W ← W·(1 − η·s·λ) − η′·O
//! MuonH:          W ← Norm(W − η′·R·Norm(O))·R,  R = ‖W₀‖_F
//! ```
//!
//! Written from `torch.optim.Muon` (Muon), the NorMuon authors' `normuon_update` (Li et al.
//! 2025, the per-neuron normalisation) and the hyperball paper's MuonH ([`super::hyperball`]).
//! burn's own `Muon` reads the aspect ratio of `shape[0] / shape[1]`, which for burn's `[in, out]`
//! linear weights is the transpose of PyTorch's rule, and has no NorMuon or hyperball form:
//! hence this optimizer.

use super::{hyperball, newton_schulz, record};
use crate::run::optim::{AdjustLr, OptimConfig, OptimizerName, Orthogonalizer};
use burn::optim::{LearningRate, Optimizer, RecordState, StateSink, StateSource};
use burn::tensor::{Device, Tensor};

/// What follows the orthogonalised update.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Finish {
    /// Muon: decoupled weight decay `λ`, then the step.
    Decay { weight_decay: f64 },
    /// NorMuon: per-neuron normalisation with `β₂`, decay, then the step.
    PerNeuron { beta2: f64, weight_decay: f64 },
    /// MuonH: the hyperball step.
    Hyperball,
}

/// Muon, NorMuon or MuonH (the config's `optim.name`) for the hidden matrices.
#[derive(Clone, Debug)]
pub struct Orthogonal {
    momentum: f64,
    nesterov: bool,
    ns_steps: usize,
    orthogonalizer: Orthogonalizer,
    adjust: AdjustLr,
    lr_scale: f64,
    finish: Finish,
}

/// The momentum buffer, NorMuon's per-neuron second moment (`[1, out]`) and MuonH's radius.
#[derive(Clone)]
pub struct OrthogonalState<const D: usize> {
    momentum: Tensor<D>,
    neuron_moment: Option<Tensor<D>>,
    radius: Option<Tensor<1>>,
}

impl Orthogonal {
    /// Panics on an optimizer without orthogonalised updates (the builder never asks).
    pub fn new(cfg: &OptimConfig) -> Self {
        let m = &cfg.muon;
        let weight_decay = cfg.weight_decay;
        let finish = match cfg.name {
            OptimizerName::Muon => Finish::Decay { weight_decay },
            OptimizerName::Normuon => Finish::PerNeuron { beta2: m.beta2, weight_decay },
            OptimizerName::Muonh => Finish::Hyperball,
            other => unreachable!("{other} does not orthogonalise"),
        };
        Self {
            momentum: m.momentum,
            nesterov: m.nesterov,
            ns_steps: m.ns_steps,
            orthogonalizer: m.orthogonalizer,
            adjust: m.adjust_lr,
            lr_scale: m.lr_scale,
            finish,
        }
    }

    /// The update direction before orthogonalisation, and the new momentum buffer.
    fn direction<const D: usize>(&self, grad: Tensor<D>, buffer: Option<Tensor<D>>) -> (Tensor<D>, Tensor<D>) {
        let mu = self.momentum;
        let buffer = match buffer {
            Some(b) => b * mu + grad.clone() * (1.0 - mu),
            None => grad.clone() * (1.0 - mu),
        };
        let u = if self.nesterov { grad * (1.0 - mu) + buffer.clone() * mu } else { buffer.clone() };
        (u, buffer)
    }
}

/// NorMuon's normalisation: each output neuron's update divided by the root of its running
/// mean square, the whole rescaled to the norm it had. Burn's `[in, out]` layout puts an output
/// neuron in a column, so the mean is over dimension `D − 2`.
fn per_neuron<const D: usize>(o: Tensor<D>, moment: Option<Tensor<D>>, beta2: f64) -> (Tensor<D>, Tensor<D>) {
    let before = hyperball::frobenius(&o);
    let mean_sq = o.clone().square().mean_dim(D - 2);
    let moment = match moment {
        Some(v) => v * beta2 + mean_sq * (1.0 - beta2),
        None => mean_sq * (1.0 - beta2),
    };
    let scaled = o / (moment.clone().sqrt() + 1e-10);
    let after = hyperball::frobenius(&scaled) + 1e-10;
    (scaled * (before / after).unsqueeze(), moment)
}

impl Optimizer for Orthogonal {
    type State<const D: usize> = OrthogonalState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let dims = tensor.dims();
        let (inp, out) = (dims[D - 2], dims[D - 1]);
        let (momentum, moment, radius) = match state {
            Some(s) => (Some(s.momentum), s.neuron_moment, s.radius),
            None => (None, None, None),
        };
        let (u, momentum) = self.direction(grad, momentum);
        let mut o = newton_schulz::orthogonalize(u, self.ns_steps, self.orthogonalizer);
        let lr = lr * self.lr_scale;
        let stepped = lr * self.adjust.ratio(out, inp);
        let (tensor, neuron_moment, radius) = match self.finish {
            Finish::Decay { weight_decay } => (tensor * (1.0 - lr * weight_decay) - o * stepped, None, None),
            Finish::PerNeuron { beta2, weight_decay } => {
                let (normed, m) = per_neuron(o, moment, beta2);
                o = normed;
                (tensor * (1.0 - lr * weight_decay) - o * stepped, Some(m), None)
            }
            Finish::Hyperball => {
                let r = radius.unwrap_or_else(|| hyperball::frobenius(&tensor));
                (hyperball::step(tensor, o, stepped, r.clone()), None, Some(r))
            }
        };
        (tensor, Some(OrthogonalState { momentum, neuron_moment, radius }))
    }

    fn to_device<const D: usize>(s: Self::State<D>, device: &Device) -> Self::State<D> {
        OrthogonalState {
            momentum: s.momentum.to_device(device),
            neuron_moment: s.neuron_moment.map(|t| t.to_device(device)),
            radius: s.radius.map(|t| t.to_device(device)),
        }
    }
}

impl<const D: usize> RecordState for OrthogonalState<D> {
    fn state_flatten(&self, prefix: &str, out: &mut StateSink) {
        record::put(out, prefix, "momentum", &self.momentum);
        if let Some(v) = &self.neuron_moment {
            record::put(out, prefix, "neuron_moment", v);
        }
        if let Some(r) = &self.radius {
            record::put(out, prefix, "radius", r);
        }
    }

    fn state_unflatten(prefix: &str, src: &mut StateSource, device: &Device) -> Option<Self> {
        Some(Self {
            momentum: record::take(src, prefix, "momentum", device)?,
            neuron_moment: record::take(src, prefix, "neuron_moment", device),
            radius: record::take(src, prefix, "radius", device),
        })
    }
}
