//! AdamH: Adam's direction on the hyperball ([`super::hyperball`]) for the hidden matrices.
//!
//! ```text
//! m ← β₁·m + (1 − β₁)·G;   v ← β₂·v + (1 − β₂)·G²;   t ← t + 1
//! u = (m / (1 − β₁ᵗ)) / (√(v / (1 − β₂ᵗ)) + ε)
//! W ← Norm(W − η·R·Norm(u))·R,   R = ‖W₀‖_F
//! ```
//!
//! β₁, β₂ and ε are `[optim]`'s (AdamW's); there is no weight decay.

use super::{hyperball, record};
use crate::run::optim::OptimConfig;
use burn::optim::{LearningRate, Optimizer, RecordState, StateSink, StateSource};
use burn::tensor::{Device, Tensor};

#[derive(Clone, Debug)]
pub struct AdamH {
    beta1: f64,
    beta2: f64,
    eps: f64,
}

/// Adam's moments, the step count and the radius `R`.
#[derive(Clone)]
pub struct AdamHState<const D: usize> {
    m: Tensor<D>,
    v: Tensor<D>,
    t: i64,
    radius: Tensor<1>,
}

impl AdamH {
    pub fn new(cfg: &OptimConfig) -> Self {
        Self { beta1: cfg.beta1, beta2: cfg.beta2, eps: cfg.eps }
    }
}

impl Optimizer for AdamH {
    type State<const D: usize> = AdamHState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let (b1, b2) = (self.beta1, self.beta2);
        let (m, v, t, radius) = match state {
            Some(s) => (s.m * b1 + grad.clone() * (1.0 - b1), s.v * b2 + grad.square() * (1.0 - b2), s.t + 1, s.radius),
            None => (grad.clone() * (1.0 - b1), grad.square() * (1.0 - b2), 1, hyperball::frobenius(&tensor)),
        };
        let m_hat = m.clone() / (1.0 - b1.powi(t as i32));
        let v_hat = v.clone() / (1.0 - b2.powi(t as i32));
        let u = m_hat / (v_hat.sqrt() + self.eps);
        let tensor = hyperball::step(tensor, u, lr, radius.clone());
        (tensor, Some(AdamHState { m, v, t, radius }))
    }

    fn to_device<const D: usize>(s: Self::State<D>, device: &Device) -> Self::State<D> {
        AdamHState { m: s.m.to_device(device), v: s.v.to_device(device), t: s.t, radius: s.radius.to_device(device) }
    }
}

impl<const D: usize> RecordState for AdamHState<D> {
    fn state_flatten(&self, prefix: &str, out: &mut StateSink) {
        record::put(out, prefix, "m", &self.m);
        record::put(out, prefix, "v", &self.v);
        record::put(out, prefix, "radius", &self.radius);
        out.push_scalar(prefix, "t", burn_pack::Scalar::from(self.t));
    }

    fn state_unflatten(prefix: &str, src: &mut StateSource, device: &Device) -> Option<Self> {
        Some(Self {
            m: record::take(src, prefix, "m", device)?,
            v: record::take(src, prefix, "v", device)?,
            radius: record::take(src, prefix, "radius", device)?,
            t: i64::try_from(src.take_scalar(prefix, "t")?).ok()?,
        })
    }
}
