//! Incremental decoding: a KV cache per layer, so that each new token costs one position's
//! forward instead of the whole prefix's.
//!
//! Rows of different lengths share a batch by left padding: a key mask hides the padding from
//! every query, and each row is rotated (RoPE) at its own positions, the count of its real
//! tokens before each one, so a row's queries and keys carry exactly the angles they would
//! carry decoded alone. The cache's frame (`KvCache::len`, padding included) only orders keys
//! for the causal mask. [`Transformer::forward_masked`] is the same computation without a
//! cache, the reference the cached path is tested against.

use crate::model::attention::self_attention::KvSlot;
use crate::model::base::context::{Decoding, ForwardContext, PAD_MASK};
use crate::model::transformer::{Keep, Transformer};
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Every layer's keys and values so far, and how many positions they hold (padding included).
pub struct KvCache {
    pub slots: Vec<KvSlot>,
    pub len: usize,
    /// Each layer's `‖W_V W_O‖²_F` for BHyT's and RMSNorm-Approx's variance approximation,
    /// computed at the first step that needs it: constant while decoding, it costs `2·d³` FLOPs
    /// per layer, more than a token's whole forward at small batch.
    pub value_output: Option<Vec<Tensor<1>>>,
}

impl KvCache {
    pub fn new(n_layers: usize) -> Self {
        Self { slots: vec![None; n_layers], len: 0, value_output: None }
    }
}

/// `[B, 1, 1, len]`: [`PAD_MASK`] on each row's first `pads[b]` positions, 0 after.
pub fn padding_mask(pads: &[usize], len: usize, device: &Device) -> Tensor<4> {
    let mut m = vec![0f32; pads.len() * len];
    for (b, &p) in pads.iter().enumerate() {
        m[b * len..b * len + p.min(len)].fill(PAD_MASK);
    }
    Tensor::from_data(TensorData::new(m, vec![pads.len(), 1, 1, len]), device)
}

/// Each row's own position of the first of `frame`-positioned new tokens: the frame position
/// less the row's left padding. `None` when no row is padded (every row at `frame`).
fn row_starts(frame: usize, pads: &[usize]) -> Option<Vec<i64>> {
    pads.iter().any(|&p| p > 0).then(|| pads.iter().map(|&p| frame as i64 - p as i64).collect())
}

impl Transformer {
    /// Logits `[B, t, V]` of `tokens` `[B, t]` placed after the `cache.len` positions in
    /// `cache`, whose keys and values are appended. `pads`: each row's left padding in the
    /// cache (and, in a prefill from an empty cache, in `tokens`); `bhyt_len`: the fixed T of
    /// BHyT's approximation (the training sequence length).
    pub fn forward_cached(
        &self,
        tokens: Tensor<2, Int>,
        cache: &mut KvCache,
        pads: &[usize],
        bhyt_len: usize,
    ) -> Tensor<3> {
        let t = tokens.dims()[1];
        let device = tokens.device();
        let key_mask = pads.iter().any(|&p| p > 0).then(|| padding_mask(pads, cache.len + t, &device));
        let row_starts = row_starts(cache.len, pads);
        let d = Decoding { new: t, offset: cache.len, key_mask, row_starts, bhyt_len };
        let mut ctx = ForwardContext::decoding(d, self.meta.rope, self.meta.compute, &device);
        if cache.value_output.is_none() && self.approximates() {
            cache.value_output = Some(self.layers.iter().map(|l| l.attn.f.value_output_frobenius_sq()).collect());
        }
        ctx.value_output = cache.value_output.clone();
        let logits = self.run(tokens, ctx, Some(&mut cache.slots), Keep::LOGITS).logits;
        cache.len += t;
        logits
    }

    /// The same logits as a cached decode of `tokens` from the start, computed in one forward.
    pub fn forward_masked(&self, tokens: Tensor<2, Int>, pads: &[usize], bhyt_len: usize) -> Tensor<3> {
        let t = tokens.dims()[1];
        let device = tokens.device();
        let key_mask = pads.iter().any(|&p| p > 0).then(|| padding_mask(pads, t, &device));
        let d = Decoding { new: t, offset: 0, key_mask, row_starts: row_starts(0, pads), bhyt_len };
        let ctx = ForwardContext::decoding(d, self.meta.rope, self.meta.compute, &device);
        self.run(tokens, ctx, None, Keep::LOGITS).logits
    }
}
