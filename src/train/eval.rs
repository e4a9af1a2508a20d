//! Validation loss and perplexity over fixed windows, without autodiff.

use crate::data::TokenFile;
use crate::data::mixture::Mixture;
use crate::data::pairs::render::{self, Example};
use crate::data::windows::{validation_starts, windows};
use crate::dist::Ranks;
use crate::model::Transformer;
use crate::run::metrics::SourceLoss;
use burn::tensor::{Device, Int, Tensor, TensorData};

/// A model under evaluation and where it runs: `model` lives on `device` (no autodiff); over
/// several `ranks`, each computes its share of the batches and the sums are reduced.
#[derive(Clone, Copy)]
pub struct Evaluated<'a> {
    pub model: &'a Transformer,
    pub device: &'a Device,
    pub ranks: Ranks,
}

/// A validation result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValLoss {
    /// Mean cross-entropy per counted token (nats).
    pub loss: f64,
    pub perplexity: f64,
    /// Tokens counted.
    pub tokens: usize,
}

impl Evaluated<'_> {
    /// Mean next-token cross-entropy over the windows of `seq_len` tokens starting at `starts`,
    /// `batch` windows at a time.
    pub fn windows(&self, tokens: &TokenFile, starts: &[usize], seq_len: usize, batch: usize) -> ValLoss {
        let mut total = 0.0;
        let mut count = 0.0;
        let chunks: Vec<&[usize]> = starts.chunks(batch.max(1)).collect();
        for chunk in &chunks[self.ranks.share(chunks.len())] {
            let b = windows(tokens, chunk, seq_len);
            let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq_len]), self.device);
            let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, seq_len]), self.device);
            let ce: f32 = self.model.cross_entropy_of(x, y, false, false).0.into_scalar();
            let n = (b.batch * seq_len) as f64;
            total += ce as f64 * n;
            count += n;
        }
        mean_over_ranks(total, count, self.ranks)
    }

    /// A mixture: each source on its share of `count` windows (evenly spaced in its validation
    /// range); the overall loss is over all of them (so weighted by the sources' weights).
    pub fn mixture(
        &self,
        tokens: &TokenFile,
        m: &Mixture,
        count: usize,
        seq_len: usize,
        batch: usize,
    ) -> (ValLoss, Vec<SourceLoss>) {
        let (mut total, mut n, mut out) = (0.0, 0usize, Vec::new());
        for (p, windows) in m.parts.iter().zip(m.val_windows(count)) {
            let starts: Vec<usize> =
                validation_starts(p.val.len(), seq_len, windows).into_iter().map(|s| s + p.val.start).collect();
            let v = self.windows(tokens, &starts, seq_len, batch);
            total += v.loss * v.tokens as f64;
            n += v.tokens;
            let val_bpb = p.val_bytes_per_token.map(|b| v.loss / std::f64::consts::LN_2 / b);
            out.push(SourceLoss { name: p.name.clone(), val_loss: v.loss, val_bpb, val_tokens: v.tokens });
        }
        let loss = total / n.max(1) as f64;
        (ValLoss { loss, perplexity: loss.exp(), tokens: n }, out)
    }

    /// Mean cross-entropy over the target tokens of every example, `batch` examples at a time
    /// (in order, each batch padded to its longest with `pad`).
    pub fn pairs(&self, examples: &[Example], pad: u32, batch: usize) -> ValLoss {
        let model = self.model;
        let device = self.device;
        let ranks = self.ranks;
        let mut total = 0.0;
        let mut count = 0.0;
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
}

/// The mean over every rank's summed loss and token count.
fn mean_over_ranks(total: f64, count: f64, ranks: Ranks) -> ValLoss {
    let mut sums = [total, count];
    ranks.sum_f64(&mut sums);
    let loss = sums[0] / sums[1].max(1.0);
    ValLoss { loss, perplexity: loss.exp(), tokens: sums[1] as usize }
}
