//! Validation loss and perplexity over fixed windows, without autodiff.

use crate::data::TokenFile;
use crate::data::pairs::render::{self, Example};
use crate::data::sampler::windows;
use crate::model::Transformer;
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Mean next-token cross-entropy over the windows starting at `starts`, `batch` windows at a
/// time; returns `(loss, perplexity, tokens)`. `model` must live on `device` (no autodiff).
pub fn evaluate(
    model: &Transformer,
    tokens: &TokenFile,
    starts: &[usize],
    seq_len: usize,
    batch: usize,
    device: &Device,
) -> (f64, f64, usize) {
    let mut total = 0.0;
    let mut count = 0usize;
    for chunk in starts.chunks(batch.max(1)) {
        let b = windows(tokens, chunk, seq_len);
        let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq_len]), device);
        let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, seq_len]), device);
        let ce: f32 = model.cross_entropy_of(x, y, false, false).0.into_scalar();
        let n = b.batch * seq_len;
        total += ce as f64 * n as f64;
        count += n;
    }
    let loss = total / count.max(1) as f64;
    (loss, loss.exp(), count)
}

/// Mean cross-entropy over the target tokens of every example, `batch` examples at a time (in
/// order, each batch padded to its longest); returns `(loss, perplexity, target tokens)`.
pub fn evaluate_pairs(
    model: &Transformer,
    examples: &[Example],
    pad: u32,
    batch: usize,
    device: &Device,
) -> (f64, f64, usize) {
    let (mut total, mut count) = (0.0, 0.0);
    for chunk in examples.chunks(batch.max(1)) {
        let b = render::batch(&chunk.iter().collect::<Vec<_>>(), pad);
        let n = b.targets.iter().filter(|&&t| t >= 0).count() as f64;
        let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, b.seq_len]), device);
        let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, b.seq_len]), device);
        let ce: f32 = model.cross_entropy_of(x, y, true, false).0.into_scalar();
        total += ce as f64 * n;
        count += n;
    }
    let loss = total / count.max(1.0);
    (loss, loss.exp(), count as usize)
}

/// Non-overlapping windows covering a whole token file (for `normlab eval --data`), at most
/// `limit` of them.
pub fn tiling_starts(len: usize, seq_len: usize, limit: Option<usize>) -> Vec<usize> {
    let n = (len.saturating_sub(1)) / seq_len;
    let all: Vec<usize> = (0..n).map(|i| i * seq_len).collect();
    match limit {
        Some(l) if l < all.len() => (0..l).map(|i| all[i * all.len() / l]).collect(),
        _ => all,
    }
}
