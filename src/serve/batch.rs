//! The KV cache of the rows decoded together, which rows may join and leave between steps.
//!
//! Rows of different lengths share one cache by left padding (zeros, hidden from every query
//! by the key mask of [`Transformer::forward_cached`]); RoPE depends only on relative
//! positions, so a row's shift leaves its attention unchanged. A joining row is prefilled
//! alone and its cache padded to the batch's length (or the batch's to its); a leaving row is
//! dropped and the padding every remaining row shares is trimmed.

use crate::model::{KvCache, Transformer};
use burn::tensor::{Device, Int, Tensor, TensorData};

/// The batch's cache and each row's left padding.
pub struct BatchCache {
    cache: Option<KvCache>,
    pads: Vec<usize>,
}

/// `t` `[B, H, len, h]` with `n` zero positions prepended.
fn left_pad(t: Tensor<4>, n: usize) -> Tensor<4> {
    if n == 0 {
        return t;
    }
    let [b, h, _, d] = t.dims();
    let zeros = Tensor::<4>::zeros([b, h, n, d], &t.device());
    Tensor::cat(vec![zeros, t], 2)
}

impl BatchCache {
    pub fn new() -> Self {
        Self { cache: None, pads: Vec::new() }
    }

    pub fn rows(&self) -> usize {
        self.pads.len()
    }

    /// Adds a row whose cache (batch 1, no padding) was filled by its prompt's forward.
    pub fn join(&mut self, row: KvCache) {
        let Some(batch) = self.cache.take() else {
            self.pads = vec![0];
            self.cache = Some(row);
            return;
        };
        let len = batch.len.max(row.len);
        let (grow_batch, grow_row) = (len - batch.len, len - row.len);
        let slots = batch
            .slots
            .into_iter()
            .zip(row.slots)
            .map(|(a, b)| match (a, b) {
                (Some((ka, va)), Some((kb, vb))) => Some((
                    Tensor::cat(vec![left_pad(ka, grow_batch), left_pad(kb, grow_row)], 0),
                    Tensor::cat(vec![left_pad(va, grow_batch), left_pad(vb, grow_row)], 0),
                )),
                _ => None,
            })
            .collect();
        self.pads.iter_mut().for_each(|p| *p += grow_batch);
        self.pads.push(grow_row);
        self.cache = Some(KvCache { slots, len });
    }

    /// Keeps the rows whose `keep` is true (in order); trims the padding they all share.
    pub fn retain(&mut self, keep: &[bool]) {
        let idx: Vec<i64> = (0..keep.len()).filter(|&i| keep[i]).map(|i| i as i64).collect();
        if idx.is_empty() {
            *self = Self::new();
            return;
        }
        let Some(mut c) = self.cache.take() else { return };
        self.pads = idx.iter().map(|&i| self.pads[i as usize]).collect();
        let trim = self.pads.iter().copied().min().unwrap_or(0);
        let all = idx.len() == keep.len();
        for slot in c.slots.iter_mut() {
            if let Some((k, v)) = slot.take() {
                let pick = |t: Tensor<4>| {
                    let t = if all {
                        t
                    } else {
                        let i = Tensor::<1, Int>::from_data(TensorData::new(idx.clone(), [idx.len()]), &t.device());
                        t.select(0, i)
                    };
                    let [b, h, len, d] = t.dims();
                    if trim > 0 { t.slice([0..b, 0..h, trim..len, 0..d]) } else { t }
                };
                *slot = Some((pick(k), pick(v)));
            }
        }
        c.len -= trim;
        self.pads.iter_mut().for_each(|p| *p -= trim);
        self.cache = Some(c);
    }

    /// The logits `[B, V]` of each row's next position after feeding it `tokens` (one per row).
    pub fn step(&mut self, model: &Transformer, tokens: &[u32], bhyt_len: usize, device: &Device) -> Tensor<2> {
        let c = self.cache.as_mut().expect("a step needs a row");
        let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
        let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [tokens.len(), 1]), device);
        let logits = model.forward_cached(x, c, &self.pads, bhyt_len);
        let [b, _, v] = logits.dims();
        logits.reshape([b, v])
    }
}

impl Default for BatchCache {
    fn default() -> Self {
        Self::new()
    }
}
