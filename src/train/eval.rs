//! Validation loss and perplexity over fixed windows, without autodiff.

use crate::data::TokenFile;
use crate::data::pairs::render::{self, Example};
use crate::data::sampler::windows;
use crate::dist::Ranks;
use crate::model::Transformer;
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Mean next-token cross-entropy over the windows starting at `starts`, `batch` windows at a
/// time; returns `(loss, perplexity, tokens)`. `model` must live on `device` (no autodiff).
/// Over several `ranks`, each computes its share of the batches and the sums are reduced.
pub fn evaluate(
    model: &Transformer,
    tokens: &TokenFile,
    starts: &[usize],
    (seq_len, batch): (usize, usize),
    device: &Device,
    ranks: Ranks,
) -> (f64, f64, usize) {
    let (mut total, mut count) = (0.0, 0.0);
    let chunks: Vec<&[usize]> = starts.chunks(batch.max(1)).collect();
    for chunk in &chunks[ranks.share(chunks.len())] {
        let b = windows(tokens, chunk, seq_len);
        let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq_len]), device);
        let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, seq_len]), device);
        let ce: f32 = model.cross_entropy_of(x, y, false, false).0.into_scalar();
        let n = (b.batch * seq_len) as f64;
        total += ce as f64 * n;
        count += n;
    }
    mean_over_ranks(total, count, ranks)
}

/// `(loss, perplexity, tokens)` from this rank's summed loss and token count.
fn mean_over_ranks(total: f64, count: f64, ranks: Ranks) -> (f64, f64, usize) {
    let mut sums = [total, count];
    ranks.sum_f64(&mut sums);
    let loss = sums[0] / sums[1].max(1.0);
    (loss, loss.exp(), sums[1] as usize)
}

/// Mean cross-entropy over the target tokens of every example, `batch` examples at a time (in
/// order, each batch padded to its longest); returns `(loss, perplexity, target tokens)`,
/// shared over `ranks` as [`evaluate`] is.
pub fn evaluate_pairs(
    model: &Transformer,
    examples: &[Example],
    (pad, batch): (u32, usize),
    device: &Device,
    ranks: Ranks,
) -> (f64, f64, usize) {
    let (mut total, mut count) = (0.0, 0.0);
    let chunks: Vec<&[Example]> = examples.chunks(batch.max(1)).collect();
    for chunk in &chunks[ranks.share(chunks.len())] {
        let b = render::batch(&chunk.iter().collect::<Vec<_>>(), pad);
        let n = b.targets.iter().filter(|&&t| t >= 0).count() as f64;
        let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, b.seq_len]), device);
        let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, b.seq_len]), device);
        let ce: f32 = model.cross_entropy_of(x, y, true, false).0.into_scalar();
        total += ce as f64 * n;
        count += n;
    }
    mean_over_ranks(total, count, ranks)
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
