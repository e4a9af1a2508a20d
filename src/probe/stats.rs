//! Statistics of hidden states `[B, T, d]`, each reduced on the device to a short `[n]` tensor
//! so a whole probe needs one transfer (see [`Gather`]).

use burn::tensor::{Int, Tensor, TensorData};

/// Most entries the median |x| is taken over; a larger tensor's median is that of an evenly
/// strided sample of this many (the sort behind a median runs on the host on every backend).
pub const MEDIAN_SAMPLE: usize = 1 << 16;

/// Variance over the hidden dimension (population, as LayerNorm computes it) averaged over
/// batch and tokens, mean |x|, median |x| (see [`MEDIAN_SAMPLE`]), then the `k` largest |x| in
/// decreasing order (the first is the maximum: "massive activations", Sun et al. 2024, measured
/// against the median), then where each of them sits: its `k` rows, `k` tokens and `k`
/// channels. Length `3 + 4k` (`k` at most the number of entries); see [`HiddenSummary`].
pub fn hidden_summary(x: Tensor<3>, k: usize) -> Tensor<1> {
    let [_, t, d] = x.dims();
    let var = x.clone().var_bias(2).mean().reshape([1]);
    let abs = x.abs();
    let mean_abs = abs.clone().mean().reshape([1]);
    let n = abs.dims().iter().product::<usize>();
    let flat = abs.reshape([n]);
    let median = strided(flat.clone(), MEDIAN_SAMPLE).median(0);
    let (top, at) = flat.topk_with_indices(k.min(n), 0);
    let (row, token, channel) = (
        at.clone().div_scalar((t * d) as i64),
        at.clone().div_scalar(d as i64).remainder_scalar(t as i64),
        at.remainder_scalar(d as i64),
    );
    Tensor::cat(vec![var, mean_abs, median, top, row.float(), token.float(), channel.float()], 0)
}

/// At most `most` evenly strided entries of `x` (all of them when it has no more).
fn strided(x: Tensor<1>, most: usize) -> Tensor<1> {
    let n = x.dims()[0];
    let stride = n.div_ceil(most).max(1);
    if stride == 1 {
        return x;
    }
    let idx = Tensor::<1, Int>::arange(0..n.div_ceil(stride) as i64, &x.device()) * stride as i64;
    x.select(0, idx)
}

/// [`hidden_summary`]'s values read back on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HiddenSummary {
    pub var: f64,
    pub mean_abs: f64,
    pub median_abs: f64,
    pub top_abs: Vec<f64>,
    /// `[row, token, channel]` of each `top_abs` entry.
    pub top_at: Vec<[usize; 3]>,
}

impl HiddenSummary {
    pub fn read(v: &[f64]) -> Self {
        let k = (v.len() - 3) / 4;
        let at = |i: usize| [v[3 + k + i] as usize, v[3 + 2 * k + i] as usize, v[3 + 3 * k + i] as usize];
        Self {
            var: v[0],
            mean_abs: v[1],
            median_abs: v[2],
            top_abs: v[3..3 + k].to_vec(),
            top_at: (0..k).map(at).collect(),
        }
    }
}

/// Token alignment τ (KiteNorm eqs. 5–6), with the expectation replaced by the mean over the
/// batch: `ρ_{ii'} = E_b⟨x_{b,i}, x_{b,i'}⟩ / √(E_b‖x_{b,i}‖² E_b‖x_{b,i'}‖²)`, `τ = mean_{i≠i'} ρ`.
/// 1 when all tokens point the same way (rank collapse). Needs `T ≥ 2`. Length 1.
pub fn token_alignment(x: Tensor<3>) -> Tensor<1> {
    let [_, t, _] = x.dims();
    let gram = x.clone().matmul(x.swap_dims(1, 2)).mean_dim(0).reshape([t, t]);
    let eye = Tensor::<2>::eye(t, &gram.device());
    let norms = (gram.clone() * eye).sum_dim(1).sqrt(); // [T, 1]
    let rho = gram / norms.clone().matmul(norms.transpose());
    ((rho.sum() - t as f64) / (t * (t - 1)) as f64).reshape([1])
}

/// Cosine similarity of `a` and `b` at each (batch, token) position, `[B·T]`; the angular
/// distance is `arccos(cos)/π` (Li et al. 2024, the Peri-LN paper's §4.4), taken on the host.
pub fn cosines(a: Tensor<3>, b: Tensor<3>) -> Tensor<1> {
    let [bs, t, _] = a.dims();
    let dot = (a.clone() * b.clone()).sum_dim(2);
    let na = a.square().sum_dim(2).sqrt();
    let nb = b.square().sum_dim(2).sqrt();
    (dot / (na * nb).clamp_min(1e-30)).reshape([bs * t])
}

/// Mean over tokens of `arccos(cos)/π`: 0 for the same direction, ½ orthogonal, 1 opposite.
pub fn angular_distance(cosines: &[f64]) -> f64 {
    cosines.iter().map(|c| c.clamp(-1.0, 1.0).acos() / std::f64::consts::PI).sum::<f64>() / cosines.len().max(1) as f64
}

/// How the bound's σ is measured for a norm on the residual path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    /// LayerNorm / scalar LN: standard deviation over the hidden dimension.
    Std,
    /// RMSNorm: root mean square.
    Rms,
}

/// `σ(z)` per token, `[B·T]`, with the norm's ε (KiteNorm eq. 22 uses σ(z_l)).
pub fn spread(z: Tensor<3>, how: Spread, eps: f64) -> Tensor<1> {
    let [b, t, _] = z.dims();
    let m = match how {
        Spread::Std => z.var_bias(2),
        Spread::Rms => z.square().mean_dim(2),
    };
    (m + eps).sqrt().reshape([b * t])
}

/// Collects small tensors and brings them to the host in one transfer.
#[derive(Default)]
pub struct Gather {
    parts: Vec<Tensor<1>>,
    lens: Vec<usize>,
}

/// A ticket for one gathered tensor.
#[derive(Clone, Copy, Debug)]
pub struct Slot(usize);

impl Gather {
    pub fn push(&mut self, t: Tensor<1>) -> Slot {
        self.lens.push(t.dims()[0]);
        self.parts.push(t);
        Slot(self.parts.len() - 1)
    }

    /// The values of every pushed tensor, in order.
    pub fn fetch(self) -> Fetched {
        if self.parts.is_empty() {
            return Fetched { values: Vec::new() };
        }
        let data: TensorData = Tensor::cat(self.parts, 0).into_data();
        let flat: Vec<f64> = data.iter::<f64>().collect();
        let mut values = Vec::with_capacity(self.lens.len());
        let mut at = 0;
        for n in self.lens {
            values.push(flat[at..at + n].to_vec());
            at += n;
        }
        Fetched { values }
    }
}

pub struct Fetched {
    values: Vec<Vec<f64>>,
}

impl Fetched {
    pub fn get(&self, s: Slot) -> &[f64] {
        &self.values[s.0]
    }
}
