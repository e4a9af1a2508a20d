//! Incremental decoding: a KV cache per layer, so that each new token costs one position's
//! forward instead of the whole prefix's.
//!
//! Prompts of different lengths share a batch by left padding: a key mask hides the padding
//! from every query, and since RoPE depends only on relative positions, a row's shift leaves
//! its attention unchanged. [`Transformer::forward_masked`] is the same computation without a
//! cache, the reference the cached path is tested against.

use super::attention::{AttnContext, Decoding, KvSlot, PAD_MASK};
use super::transformer::{Keep, Transformer};
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Every layer's keys and values so far, and how many positions they hold.
pub struct KvCache {
    pub slots: Vec<KvSlot>,
    pub len: usize,
}

impl KvCache {
    pub fn new(n_layers: usize) -> Self {
        Self { slots: vec![None; n_layers], len: 0 }
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

impl Transformer {
    /// Logits `[B, t, V]` of `tokens` `[B, t]` placed after the `cache.len` positions in
    /// `cache`, whose keys and values are appended. `pads`: each row's left padding;
    /// `bhyt_len`: the fixed T of BHyT's approximation (the training sequence length).
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
        let d = Decoding { new: t, offset: cache.len, key_mask, bhyt_len };
        let ctx = AttnContext::decoding(d, self.meta.rope, self.meta.compute, &device);
        let logits = self.run(tokens, ctx, Some(&mut cache.slots), Keep::LOGITS).logits;
        cache.len += t;
        logits
    }

    /// The same logits as a cached decode of `tokens` from the start, computed in one forward.
    pub fn forward_masked(&self, tokens: Tensor<2, Int>, pads: &[usize], bhyt_len: usize) -> Tensor<3> {
        let t = tokens.dims()[1];
        let device = tokens.device();
        let key_mask = pads.iter().any(|&p| p > 0).then(|| padding_mask(pads, t, &device));
        let d = Decoding { new: t, offset: 0, key_mask, bhyt_len };
        let ctx = AttnContext::decoding(d, self.meta.rope, self.meta.compute, &device);
        self.run(tokens, ctx, None, Keep::LOGITS).logits
    }
}
