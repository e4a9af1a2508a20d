//! Attention Residuals (Kimi Team, "Attention Residuals", 2026): each sublayer reads a softmax
//! mixture of the earlier sublayers' outputs instead of their unit-weight sum. The residual
//! state is the list of sources; sublayer `l` keeps its branch `y = N_out(F_l(s·N_in(x)))`:
//!
//! ```text
//! V        = [X_1, B_1, …, B_k, P]                  the embedding, the closed blocks' sums, the open block's sum
//! X_l      = Σ_s α_s V_s,  α = softmax_s(w_lᵀ RMS(V_s))     per token; RMS without gain
//! P       ← P + y_l                                  (P = y_l when the block is new)
//! after every `block` sublayers: B_{k+1} = P, the next block opens empty
//! X_{2L+1} = Σ_s α_s V_s with its own w_out over all sources
//! ```
//!
//! Full AttnRes is `block = 1`: every sublayer's output is a source. The pseudo-queries `w`
//! start at 0, so every read starts as the mean of its sources (the paper: zero initialisation
//! is what keeps early training stable). The first sublayer reads `X_1` alone and has no query
//! (a softmax over one source has none to learn). The forward through the layers is
//! [`crate::model::depth_forward`].

use crate::init::{Init, ParamBuilder};
use crate::model::base::names::child;
use crate::norm::rms_norm;
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::softmax;

/// The pseudo-query `w ∈ ℝ^d` of one read over depth, `{prefix}.query`
/// (`layers.{i}.{attn|ffn}.attn_res.query`, `attn_res_head.query`).
#[derive(Module, Debug)]
pub struct DepthQuery {
    pub query: Param<Tensor<1>>,
    #[module(skip)]
    eps: f64,
}

impl DepthQuery {
    /// `w = 0` (uniform weights); `eps` the keys' RMS ε (the model's norm ε).
    pub fn new(d: usize, eps: f64, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        Ok(Self { query: b.vector(&child(prefix, "query"), d, Init::Zeros)?, eps })
    }

    /// The keys' RMS ε.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// `Σ_s α_s V_s` `[B, T, d]` and the weights `α` `[B, T, S]` over the sources `values`
    /// `[B, T, S, d]` with their keys `RMS(V_s)` (same shape).
    pub fn attend(&self, values: Tensor<4>, keys: Tensor<4>) -> (Tensor<3>, Tensor<3>) {
        let [b, t, s, d] = values.dims();
        let logits = keys.matmul(self.query.val().reshape([1, 1, d, 1]));
        let alpha = softmax(logits, 2);
        let mixed = alpha.clone().swap_dims(2, 3).matmul(values).reshape([b, t, d]);
        (mixed, alpha.reshape([b, t, s]))
    }
}

/// The sources read so far, each with its key: the closed ones stacked `[B, T, S, d]` (a source
/// closes once, so its key is computed once), and the open block's running sum.
pub struct Sources {
    values: Tensor<4>,
    keys: Tensor<4>,
    open: Option<(Tensor<4>, Tensor<4>)>,
    block: usize,
    written: usize,
    eps: f64,
}

impl Sources {
    /// `X_1` the one source; blocks of `block` sublayers; `eps` the keys' RMS ε.
    pub fn new(x: Tensor<3>, block: usize, eps: f64) -> Self {
        let keys = rms_norm(x.clone(), None, eps).unsqueeze_dim(2);
        Self { values: x.unsqueeze_dim(2), keys, open: None, block, written: 0, eps }
    }

    /// Every source and its key, the open block last.
    fn all(&self) -> (Tensor<4>, Tensor<4>) {
        match &self.open {
            None => (self.values.clone(), self.keys.clone()),
            Some((v, k)) => (
                Tensor::cat(vec![self.values.clone(), v.clone()], 2),
                Tensor::cat(vec![self.keys.clone(), k.clone()], 2),
            ),
        }
    }

    /// What `query` reads (the one source itself without a query), with its weights.
    pub fn read(&self, query: Option<&DepthQuery>) -> (Tensor<3>, Tensor<3>) {
        let (values, keys) = self.all();
        match query {
            Some(q) => q.attend(values, keys),
            None => {
                let [b, t, _, d] = values.dims();
                (values.reshape([b, t, d]), Tensor::ones([b, t, 1], &keys.device()))
            }
        }
    }

    /// Adds `y` to the open block, closing it after `block` sublayers; returns the open sum.
    pub fn write(&mut self, y: Tensor<3>) -> Tensor<3> {
        let sum = match self.open.take() {
            Some((p, _)) => p.squeeze_dim::<3>(2) + y,
            None => y,
        };
        let source = (sum.clone().unsqueeze_dim(2), rms_norm(sum.clone(), None, self.eps).unsqueeze_dim(2));
        self.written += 1;
        if self.written.is_multiple_of(self.block) {
            self.values = Tensor::cat(vec![self.values.clone(), source.0], 2);
            self.keys = Tensor::cat(vec![self.keys.clone(), source.1], 2);
        } else {
            self.open = Some(source);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::ParamSource;
    use burn::tensor::{Device, TensorData};

    fn tensor(v: &[f32], shape: [usize; 3], device: &Device) -> Tensor<3> {
        Tensor::from_data(TensorData::new(v.to_vec(), shape), device)
    }

    fn query(w: &[f32], device: &Device) -> DepthQuery {
        let mut b = ParamBuilder::new(device, ParamSource::Seeded(0));
        let mut q = DepthQuery::new(w.len(), 0.0, &mut b, "q").unwrap();
        q.query = Param::from_tensor(Tensor::from_data(TensorData::new(w.to_vec(), [w.len()]), device));
        q
    }

    /// `q`'s read over `sources` (each `[B, T, d]`).
    fn read(q: &DepthQuery, sources: &[Tensor<3>]) -> (Tensor<3>, Tensor<3>) {
        let keys = sources.iter().map(|v| rms_norm(v.clone(), None, q.eps()).unsqueeze_dim(2)).collect();
        q.attend(Tensor::stack(sources.to_vec(), 2), Tensor::cat(keys, 2))
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    /// Sources [1, 0] and [0, 2]: RMS-normalised keys [√2, 0] and [0, √2]; with w = [1, 0] the
    /// logits are [√2, 0], α₁ = e^√2/(e^√2 + 1) = 0.804429, and the read is [α₁, 2(1 − α₁)].
    #[test]
    fn attend_weighs_normalised_keys() {
        let device = Device::flex();
        let (a, b) = (tensor(&[1.0, 0.0], [1, 1, 2], &device), tensor(&[0.0, 2.0], [1, 1, 2], &device));
        let (mixed, alpha) = read(&query(&[1.0, 0.0], &device), &[a, b]);
        let a1 = 0.804_429_f32;
        for (got, want) in values(alpha).iter().zip([a1, 1.0 - a1]) {
            assert!((got - want).abs() < 1e-5, "α {got} vs {want}");
        }
        for (got, want) in values(mixed).iter().zip([a1, 2.0 * (1.0 - a1)]) {
            assert!((got - want).abs() < 1e-5, "read {got} vs {want}");
        }
    }

    /// A zero query reads the mean of its sources, whatever their scales.
    #[test]
    fn zero_query_reads_the_mean() {
        let device = Device::flex();
        let s = [tensor(&[3.0, -1.0], [1, 1, 2], &device), tensor(&[0.5, 8.0], [1, 1, 2], &device)];
        let (mixed, _) = read(&query(&[0.0, 0.0], &device), &s);
        assert_eq!(values(mixed), vec![1.75, 3.5]);
    }

    /// Sources per read for 8 sublayers: full (block 1) reads 1, 2, …, 8 and the output 9; blocks
    /// of 3 read [X_1], [X_1, P], [X_1, P], [X_1, B_1], [X_1, B_1, P] ×2, [X_1, B_1, B_2],
    /// [X_1, B_1, B_2, P] and the output the same 4.
    #[test]
    fn blocks_close_after_their_sublayers() {
        let device = Device::flex();
        for (block, want) in [(1, vec![1, 2, 3, 4, 5, 6, 7, 8, 9]), (3, vec![1, 2, 2, 2, 3, 3, 3, 4, 4])] {
            let mut s = Sources::new(tensor(&[1.0], [1, 1, 1], &device), block, 0.0);
            let mut got = Vec::new();
            for _ in 0..8 {
                got.push(s.all().0.dims()[2]);
                s.write(tensor(&[1.0], [1, 1, 1], &device));
            }
            got.push(s.all().0.dims()[2]);
            assert_eq!(got, want, "block {block}");
        }
    }

    /// A closed block's source is the sum of its sublayers' outputs.
    #[test]
    fn a_block_sums_its_outputs() {
        let device = Device::flex();
        let mut s = Sources::new(tensor(&[0.0], [1, 1, 1], &device), 2, 0.0);
        s.write(tensor(&[1.5], [1, 1, 1], &device));
        s.write(tensor(&[2.0], [1, 1, 1], &device));
        s.write(tensor(&[7.0], [1, 1, 1], &device));
        assert_eq!(values(s.all().0), vec![0.0, 3.5, 7.0]);
    }
}
