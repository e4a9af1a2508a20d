//! A residual state of `n` streams, `H ∈ ℝ^{n×d}` per token (`[B, T, n, d]`), in place of the one
//! vector `X`: Hyper-Connections (Zhu et al., ICLR 2025), mHC (DeepSeek, "mHC: Manifold-
//! Constrained Hyper-Connections", in DeepSeek V4's form) and mHC-lite (Yang & Gao, 2026).
//! Sublayer `l` keeps its branch `y = N_out(F_l(s·N_in(x)))`; the streams replace the sum:
//!
//! ```text
//! H_0[s]  = X_1                                    every stream starts as the embedding
//! x_l     = Σ_s p_s · H[s]                         read   (HC: the width connection A_m)
//! H[k]   ← Σ_j R[j, k] · H[j] + w_k · y_l          mix and write (HC: A_r and B)
//! X_{2L+1} = Σ_s q_s · H[s]                        collapse (HC: q = 1; mHC: its own read)
//! ```
//!
//! - HC: `[p | R] = A + s_α·tanh(RMS(H) W_α)` (`A` `[n, n+1]` initialised to pre-norm: `p = e_{l
//!   mod n}`, `R = I`), `w = B + s_β·tanh(RMS(H) W_β)` (`B = 1`); `W_α`, `W_β` start at 0, the
//!   scales at 0.01 (the `hyper-connections` package); with `dynamic = false` only `A`, `B`.
//! - mHC: from `x̃ = RMS₀(vec H)` (no gain, over `n·d`), `m = x̃ Φ·scale + b`: `p = σ(m_pre) + ε`,
//!   `w = 2σ(m_post)`, `R = Sinkhorn(softmax(m_res))` (rows and columns normalised alternately,
//!   ε = 1e-6 on every sum), the collapse `q = σ(x̃ Φ_head·scale + b) + ε` (transformers'
//!   `DeepseekV4HyperConnection`, `DeepseekV4HyperHead`).
//! - mHC-lite: mHC with `R = Σ_k a_k P_k`, `a = softmax(m_res)` over the `n!` permutation
//!   matrices in lexicographic order: doubly stochastic exactly, no iterations.
//!
//! With one stream and HC's initial values this is pre-norm exactly (`p = 1`, `R = 1`, `w = 1`).

use crate::init::{Init, ParamBuilder};
use crate::model::base::names::child;
use crate::norm::rms_norm;
use crate::recipe::{Mixing, Streams};
use burn::module::{Module, Param};
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::{Tensor, TensorData};

/// mHC's ε on the read weights and on every Sinkhorn sum (DeepSeek V4's `hc_eps`).
pub const HC_EPS: f64 = 1e-6;
/// The initial scale of HC's dynamic terms (the `hyper-connections` package).
const DYNAMIC_SCALE: f64 = 0.01;

/// How one sublayer reads and writes the streams.
#[derive(Module, Debug)]
// One per sublayer, so the size difference costs nothing; burn's `Module` is not implemented for
// `Box`, which the lint suggests.
#[allow(clippy::large_enum_variant)]
pub enum StreamMix {
    Hc(HyperConnection),
    Mhc(ManifoldMix),
}

/// Hyper-Connections' static width and depth connections and, when dynamic, their `tanh` terms
/// (the fields' names are the parameters' names, as in the `hyper-connections` package: the
/// dynamic ones are all present or all absent, as built).
#[derive(Module, Debug)]
pub struct HyperConnection {
    /// `[p | R]`, `[n, n+1]`.
    pub static_alpha: Param<Tensor<2>>,
    /// `w`, `[n]`.
    pub static_beta: Param<Tensor<1>>,
    /// The RMSNorm over `d` applied to each stream before the dynamic projections.
    pub norm: Option<StreamNorm>,
    /// `W_α`, `[d, n+1]`, and its scale `s_α`, `[1]`.
    pub dynamic_alpha: Option<Param<Tensor<2>>>,
    pub dynamic_alpha_scale: Option<Param<Tensor<1>>>,
    /// `W_β`, `[d]`, and its scale `s_β`, `[1]`.
    pub dynamic_beta: Option<Param<Tensor<1>>>,
    pub dynamic_beta_scale: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub eps: f64,
}

/// The RMSNorm gain over `d` that HC's dynamic terms apply to each stream.
#[derive(Module, Debug)]
pub struct StreamNorm {
    pub gain: Param<Tensor<1>>,
}

/// mHC's (and mHC-lite's) projection of the flattened, normalised streams to the read, write
/// and residual weights.
#[derive(Module, Debug)]
pub struct ManifoldMix {
    /// `Φ`, `[n·d, 2n + m]` (`m = n²`, or `n!` for mHC-lite).
    pub proj: Param<Tensor<2>>,
    pub base: Param<Tensor<1>>,
    /// One scale each for the read, write and residual logits, `[3]`.
    pub scale: Param<Tensor<1>>,
    #[module(skip)]
    pub residual: ResidualMap,
    #[module(skip)]
    pub eps: f64,
}

/// How mHC turns its residual logits into a doubly stochastic matrix.
#[derive(Clone, Debug)]
pub enum ResidualMap {
    /// Softmax over each row, then Sinkhorn–Knopp for this many iterations.
    Sinkhorn(usize),
    /// Softmax over the permutation matrices `[n!, n·n]` (row-major), then their mixture.
    Permutations(TensorData),
}

/// mHC's collapse of the streams before the final norm.
#[derive(Module, Debug)]
pub struct StreamHead {
    pub proj: Param<Tensor<2>>,
    pub base: Param<Tensor<1>>,
    pub scale: Param<Tensor<1>>,
    #[module(skip)]
    pub eps: f64,
}

/// What the probes read of a sublayer's step on the streams.
#[derive(Clone, Debug)]
pub struct StreamTrace {
    /// The streams after the sublayer, `[B, T, n, d]`.
    pub state: Tensor<4>,
    /// The residual mixing `R` (`H[k] ← Σ_j R[j, k] H[j] + …`), `[B, T, n, n]` or `[1, 1, n, n]`.
    pub residual: Tensor<4>,
}

/// What a read leaves for the write, and what the probes read.
pub struct Read {
    /// `x_l`, the sublayer's input `[B, T, d]`.
    pub input: Tensor<3>,
    /// `Σ_j R[j, k] H[j]`, `[B, T, n, d]`.
    pub kept: Tensor<4>,
    /// `w`, `[B, T, n]` (or `[1, 1, n]` for static HC).
    pub write: Tensor<3>,
    /// `R`, `[B, T, n, n]` (or `[1, 1, n, n]`).
    pub residual: Tensor<4>,
}

impl Read {
    /// `H ← Σ_j R[j, k] H[j] + w_k · y`.
    pub fn write(self, y: Tensor<3>) -> Tensor<4> {
        self.kept + self.write.unsqueeze_dim::<4>(3) * y.unsqueeze_dim::<4>(2)
    }
}

/// `[B, T, d]` → `[B, T, n, d]`, every stream the same.
pub fn expand(x: Tensor<3>, n: usize) -> Tensor<4> {
    x.unsqueeze_dim::<4>(2).repeat_dim(2, n)
}

/// `Σ_s q_s H[s]`: `q` `[B, T, n]` or `[1, 1, n]`, `h` `[B, T, n, d]` → `[B, T, d]`.
fn weighted_sum(q: Tensor<3>, h: Tensor<4>) -> Tensor<3> {
    let [b, t, _, d] = h.dims();
    (h * q.unsqueeze_dim::<4>(3)).sum_dim(2).reshape([b, t, d])
}

/// `Σ_j R[j, k] H[j]` for every `k`: `Rᵀ H`.
fn mix(r: Tensor<4>, h: Tensor<4>) -> Tensor<4> {
    let [b, t, n, _] = h.dims();
    let r = if r.dims()[0] == b { r } else { r.expand([b, t, n, n]) };
    r.swap_dims(2, 3).matmul(h)
}

/// What a mixing is built for: the model's width `d`, its init σ and its norm ε.
#[derive(Clone, Copy, Debug)]
pub struct MixSizes {
    pub d: usize,
    pub std: f64,
    pub eps: f64,
}

impl StreamMix {
    /// The mixing of 0-based sublayer `l` of a model of `sizes`.
    pub fn new(s: Streams, l: usize, sizes: MixSizes, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let hc = child(prefix, crate::model::base::names::STREAM_MIX);
        let MixSizes { d, std, eps } = sizes;
        let n = s.n;
        Ok(match s.mixing {
            Mixing::Hc { dynamic } => StreamMix::Hc(HyperConnection::new(n, d, l % n, dynamic, eps, b, &hc)?),
            Mixing::Mhc { sinkhorn_iters } => StreamMix::Mhc(ManifoldMix::new(
                [n, d, n * n],
                ResidualMap::Sinkhorn(sinkhorn_iters),
                std,
                eps,
                b,
                &hc,
            )?),
            Mixing::MhcLite => {
                let basis = permutation_basis(n);
                let m = basis.shape()[0];
                StreamMix::Mhc(ManifoldMix::new([n, d, m], ResidualMap::Permutations(basis), std, eps, b, &hc)?)
            }
        })
    }

    /// Reads sublayer `l`'s input from the streams `h` `[B, T, n, d]`.
    pub fn read(&self, h: Tensor<4>) -> Read {
        match self {
            StreamMix::Hc(m) => m.read(h),
            StreamMix::Mhc(m) => m.read(h),
        }
    }
}

impl HyperConnection {
    /// Sublayer `read`'s connections as pre-norm (`p = e_read`, `R = I`, `w = 1`); with
    /// `dynamic`, `W_α`, `W_β` at 0 and their scales at 0.01.
    fn new(
        n: usize,
        d: usize,
        read: usize,
        dynamic: bool,
        eps: f64,
        b: &mut ParamBuilder<'_>,
        hc: &str,
    ) -> anyhow::Result<Self> {
        let dyn_vector = |b: &mut ParamBuilder<'_>, name: &str, len: usize, init: Init| {
            dynamic.then(|| b.vector(&child(hc, name), len, init)).transpose()
        };
        Ok(Self {
            static_alpha: b.matrix(&child(hc, "static_alpha"), [n, n + 1], Init::WidthConnections { read })?,
            static_beta: b.vector(&child(hc, "static_beta"), n, Init::Ones)?,
            norm: dyn_vector(b, "norm.gain", d, Init::Ones)?.map(|gain| StreamNorm { gain }),
            dynamic_alpha: dynamic
                .then(|| b.matrix(&child(hc, "dynamic_alpha"), [d, n + 1], Init::Zeros))
                .transpose()?,
            dynamic_alpha_scale: dyn_vector(b, "dynamic_alpha_scale", 1, Init::Constant(DYNAMIC_SCALE))?,
            dynamic_beta: dyn_vector(b, "dynamic_beta", d, Init::Zeros)?,
            dynamic_beta_scale: dyn_vector(b, "dynamic_beta_scale", 1, Init::Constant(DYNAMIC_SCALE))?,
            eps,
        })
    }

    /// `(s_α·tanh(N W_α), s_β·tanh(N W_β))`, `[B, T, n, n+1]` and `[B, T, n]`, `N = RMS(H)`; `None`
    /// for static HC.
    fn dynamic_terms(&self, h: Tensor<4>) -> Option<(Tensor<4>, Tensor<3>)> {
        let (norm, wa, sa) = (self.norm.as_ref()?, self.dynamic_alpha.as_ref()?, self.dynamic_alpha_scale.as_ref()?);
        let (wb, sb) = (self.dynamic_beta.as_ref()?, self.dynamic_beta_scale.as_ref()?);
        let [b, t, n, d] = h.dims();
        let normed = rms_norm(h, Some(norm.gain.val()), self.eps).reshape([b * t * n, d]);
        let alpha = normed.clone().matmul(wa.val()).tanh() * sa.val().unsqueeze::<2>();
        let beta = normed.matmul(wb.val().unsqueeze_dim::<2>(1)).tanh() * sb.val().unsqueeze::<2>();
        Some((alpha.reshape([b, t, n, n + 1]), beta.reshape([b, t, n])))
    }

    fn read(&self, h: Tensor<4>) -> Read {
        let n = h.dims()[2];
        let mut alpha = self.static_alpha.val().unsqueeze::<4>();
        let mut beta = self.static_beta.val().unsqueeze::<3>();
        if let Some((a, w)) = self.dynamic_terms(h.clone()) {
            (alpha, beta) = (a + alpha, w + beta);
        }
        let p = alpha.clone().narrow(3, 0, 1).squeeze_dim::<3>(3);
        let residual = alpha.narrow(3, 1, n);
        Read { input: weighted_sum(p, h.clone()), kept: mix(residual.clone(), h), write: beta, residual }
    }
}

impl ManifoldMix {
    /// `[n, d]` streams, `m` residual logits mapped by `residual`; `Φ` drawn N(0, std²).
    fn new(
        shape: [usize; 3],
        residual: ResidualMap,
        std: f64,
        eps: f64,
        b: &mut ParamBuilder<'_>,
        hc: &str,
    ) -> anyhow::Result<Self> {
        let [n, d, m] = shape;
        Ok(Self {
            proj: b.matrix(&child(hc, "proj"), [n * d, 2 * n + m], Init::Normal { std })?,
            base: b.vector(&child(hc, "base"), 2 * n + m, Init::Zeros)?,
            scale: b.vector(&child(hc, "scale"), 3, Init::Ones)?,
            residual,
            eps,
        })
    }

    fn read(&self, h: Tensor<4>) -> Read {
        let [b, t, n, _] = h.dims();
        let logits = projected(h.clone(), &self.proj, self.eps);
        let m = logits.dims()[1] - 2 * n;
        let part = |from: usize, len: usize, which: usize| {
            logits.clone().narrow(1, from, len) * self.scale.val().narrow(0, which, 1).unsqueeze::<2>()
                + self.base.val().narrow(0, from, len).unsqueeze::<2>()
        };
        let p = (sigmoid(part(0, n, 0)) + HC_EPS).reshape([b, t, n]);
        let w = (sigmoid(part(n, n, 1)) * 2.0).reshape([b, t, n]);
        let r = match &self.residual {
            ResidualMap::Sinkhorn(iters) => sinkhorn(softmax(part(2 * n, m, 2).reshape([b * t, n, n]), 2), *iters),
            ResidualMap::Permutations(basis) => {
                let basis = Tensor::<2>::from_data(basis.clone(), &h.device());
                softmax(part(2 * n, m, 2), 1).matmul(basis).reshape([b * t, n, n])
            }
        };
        let residual = r.reshape([b, t, n, n]);
        Read { input: weighted_sum(p, h.clone()), kept: mix(residual.clone(), h), write: w, residual }
    }
}

/// `x̃ Φ` for `x̃ = vec(H)/RMS(vec H)` (no gain, ε), `[B·T, outputs]`; the base is added by the
/// caller after its scale.
fn projected(h: Tensor<4>, proj: &Param<Tensor<2>>, eps: f64) -> Tensor<2> {
    let [b, t, n, d] = h.dims();
    rms_norm(h.reshape([b * t, n * d]), None, eps).matmul(proj.val())
}

/// DeepSeek V4's Sinkhorn–Knopp on row-softmaxed `[N, n, n]`: `+ε`, columns normalised, then
/// `iters − 1` times rows and columns, each sum `+ ε`.
pub fn sinkhorn(m: Tensor<3>, iters: usize) -> Tensor<3> {
    let cols = |m: Tensor<3>| m.clone() / (m.sum_dim(1) + HC_EPS);
    let rows = |m: Tensor<3>| m.clone() / (m.sum_dim(2) + HC_EPS);
    let mut m = cols(m + HC_EPS);
    for _ in 1..iters {
        m = cols(rows(m));
    }
    m
}

/// The `n!` permutation matrices of size `n`, in lexicographic order of the permutations
/// (`itertools.permutations`), flattened row-major: `[n!, n·n]`, `P[i, π(i)] = 1`.
pub fn permutation_basis(n: usize) -> TensorData {
    let mut perms = Vec::new();
    permutations(&mut (0..n).collect(), 0, &mut perms);
    perms.sort();
    let mut values = vec![0f32; perms.len() * n * n];
    for (k, p) in perms.iter().enumerate() {
        for (i, &j) in p.iter().enumerate() {
            values[k * n * n + i * n + j] = 1.0;
        }
    }
    TensorData::new(values, [perms.len(), n * n])
}

fn permutations(items: &mut Vec<usize>, from: usize, out: &mut Vec<Vec<usize>>) {
    if from == items.len() {
        out.push(items.clone());
        return;
    }
    for i in from..items.len() {
        items.swap(from, i);
        permutations(items, from + 1, out);
        items.swap(from, i);
    }
}

impl StreamHead {
    pub fn new(n: usize, d: usize, std: f64, eps: f64, b: &mut ParamBuilder<'_>) -> anyhow::Result<Self> {
        let head = crate::model::base::names::STREAM_HEAD;
        Ok(Self {
            proj: b.matrix(&child(head, "proj"), [n * d, n], Init::Normal { std })?,
            base: b.vector(&child(head, "base"), n, Init::Zeros)?,
            scale: b.vector(&child(head, "scale"), 1, Init::Ones)?,
            eps,
        })
    }

    /// `Σ_s q_s H[s]`, `q = σ(x̃ Φ·scale + b) + ε`.
    pub fn collapse(&self, h: Tensor<4>) -> Tensor<3> {
        let [b, t, n, _] = h.dims();
        let logits = projected(h.clone(), &self.proj, self.eps) * self.scale.val().unsqueeze::<2>()
            + self.base.val().unsqueeze::<2>();
        weighted_sum((sigmoid(logits) + HC_EPS).reshape([b, t, n]), h)
    }
}

/// HC's collapse: the sum of the streams.
pub fn sum_streams(h: Tensor<4>) -> Tensor<3> {
    let [b, t, _, d] = h.dims();
    h.sum_dim(2).reshape([b, t, d])
}
