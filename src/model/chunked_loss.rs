//! Output projection and cross-entropy over chunks of tokens, so that the `[N, V]` logits are
//! never materialised whole (the Liger / "cut cross-entropy" idea): memory for the loss is
//! O(chunk × V) on every backend, and no single buffer outgrows a backend's limit (wgpu's
//! 4 GiB: the Table-1 micro-batch 32 × 2048 × 50257 in f32 is 13 GB).
//!
//! Each chunk's logits give its share of the loss and, in the same pass, of the gradient:
//! with `p = softmax(h W)`, `∂L/∂(hW) = (p − onehot(t)) / n`, so `∂L/∂h = (p − onehot) Wᵀ / n`
//! and `∂L/∂W = hᵀ (p − onehot) / n`, accumulated over chunks. The returned loss carries these
//! gradients through a surrogate, `L + (S − detach(S))` with `S = Σ h ⊙ ∂L/∂h + Σ W ⊙ ∂L/∂W`:
//! its value is `L` exactly and its gradient with respect to `h` and `W` is the true one (the
//! loss enters the training objective linearly, so any upstream factor scales it correctly).
//! Three matmuls per chunk, as forward plus backward of the unchunked loss; the composite
//! path, [`crate::model::transformer::masked_cross_entropy`], is the reference. The products go
//! through [`Kernels::matmul`] (cuBLAS under `model.kernels = "cublas"` on `cuda`). On a GPU
//! device with fused kernels, a chunk's softmax, loss terms and logits' gradient are one
//! kernel ([`chunk_cross_entropy`]) instead of the composite ops over the `[chunk, V]` logits,
//! which stay its reference (`model.kernels = "composite"`).
//!
//! With PaLM's z-loss `c · mean log²Z` (`log Z` the log-sum-exp of a row) the logits' gradient
//! gains `2c · log Z · p / n`, so a chunk's factor is `(p ⊙ (1 + 2c·log Z) − onehot) / n`.
//!
//! With soft-capped logits `ℓ = c·tanh(u/c)`, `u = hW`, the chain rule adds one factor:
//! `∂L/∂u = ∂L/∂ℓ ⊙ (1 − (ℓ/c)²)`.
//!
//! # Shapes
//! The three matmuls run in the model's precision (as autocast runs the projection and its
//! backward), the softmax and the sums in f32.
//!
//! - `h`: `[N, d]` final hidden states, `w`: `[d, V]` output projection, `targets`: `[N]`
//!   (−1: not counted) → `[1]`, the mean over counted targets.

use crate::kernels::{Kernels, Precision, chunk_cross_entropy, widen};
use crate::model::base::compute::Compute;
use burn::tensor::{IndexingUpdateOp, Int, Tensor};

/// The loss over all chunks: `objective` = CE + c·z carrying the gradients, and the CE and
/// z (mean log²Z; only with a z-loss) values.
pub struct ChunkedLoss {
    pub objective: Tensor<1>,
    pub ce: Tensor<1>,
    pub z: Option<Tensor<1>>,
}

/// Mean cross-entropy of `softmax(h w)` against `targets` plus `z_loss ·` mean log²Z, `chunk`
/// rows at a time.
pub fn chunked_cross_entropy(
    h: Tensor<2>,
    w: Tensor<2>,
    targets: Tensor<1, Int>,
    chunk: usize,
    compute: Compute,
    softcap: Option<f64>,
    z_loss: f64,
) -> ChunkedLoss {
    let [n, _] = h.dims();
    let p = compute.precision;
    let grads = h.is_tracked() || w.is_tracked();
    // Off the autodiff tape altogether: nothing of a chunk outlives it.
    let hd = h.clone().without_autodiff();
    let wd = w.clone().without_autodiff();
    let targets = targets.without_autodiff();
    let keep = targets.clone().greater_equal_elem(0);
    let count = keep.clone().int().sum().float().clamp_min(1.0);
    let wt = p.compute(wd.clone().transpose());
    let ids = targets.clone().float();
    let kernels = compute.kernels;
    let whole = Whole { wt, wc: p.compute(wd), hd, targets, ids, keep, count, p, kernels, softcap, z_loss };
    let step = chunk.max(1);
    let mut loss_sum = Tensor::zeros([1], &whole.count.device());
    let mut z_sum = loss_sum.clone();
    let (mut gh, mut gw) = (Vec::new(), None::<Tensor<2>>);
    // One chunk at a time: its logits and its [d, V] share are gone before the next.
    for start in (0..n).step_by(step) {
        let part = whole.chunk(start, step.min(n - start), grads);
        loss_sum = loss_sum + part.loss;
        z_sum = z_sum + part.z;
        if let Some((h_rows, w_share)) = part.grads {
            gh.push(h_rows);
            gw = Some(match gw {
                Some(a) => a + w_share,
                None => w_share,
            });
        }
    }
    let ce = loss_sum / whole.count.clone();
    let z = (z_loss > 0.0).then(|| z_sum / whole.count);
    let value = match &z {
        Some(z) => ce.clone() + z.clone() * z_loss,
        None => ce.clone(),
    };
    let objective = match gw {
        Some(gw) => {
            let s = (h * Tensor::cat(gh, 0)).sum() + (w * gw).sum();
            value + (s.clone() - s.detach())
        }
        None => value,
    };
    ChunkedLoss { objective, ce, z }
}

/// What every chunk reads: the detached hidden states, the projection in the compute type
/// (and its transpose), the targets (also as f32 ids for the fused kernel), which of them
/// count, and how many do.
struct Whole {
    hd: Tensor<2>,
    wc: Tensor<2>,
    wt: Tensor<2>,
    targets: Tensor<1, Int>,
    ids: Tensor<1>,
    keep: Tensor<1, burn::tensor::Bool>,
    count: Tensor<1>,
    p: Precision,
    kernels: Kernels,
    softcap: Option<f64>,
    z_loss: f64,
}

/// One chunk's summed loss and, when gradients are wanted, its rows of `∂L/∂h` and its share
/// of `∂L/∂W`.
struct Chunk {
    loss: Tensor<1>,
    /// Σ log²Z over the chunk's counted rows.
    z: Tensor<1>,
    grads: Option<(Tensor<2>, Tensor<2>)>,
}

impl Whole {
    fn chunk(&self, start: usize, len: usize, grads: bool) -> Chunk {
        let hc = self.hd.clone().narrow(0, start, len);
        let raw = widen(self.kernels.matmul(self.p, hc.clone(), self.wc.clone()));
        if self.kernels.fuse_loss(&raw) {
            return self.fused(raw, hc, start, grads);
        }
        let counted = self.keep.clone().narrow(0, start, len).unsqueeze_dim(1);
        let mask = hc.zeros_like().narrow(1, 0, 1).mask_fill(counted, 1.0);
        let tc = self.targets.clone().narrow(0, start, len).clamp_min(0).unsqueeze_dim::<2>(1);
        // Each `[len, V]` buffer is consumed by the next operation (computed in place when it
        // is the only owner): at most two live at once, the capped logits a third under a
        // soft-cap (its gradient needs them).
        let (logits, capped) = match self.softcap {
            Some(c) => {
                let l = crate::model::base::softcap::softcap(raw, c);
                (l.clone(), Some(l))
            }
            None => (raw, None),
        };
        let max = logits.clone().max_dim(1);
        let shifted = logits - max.clone();
        let lse = shifted.clone().exp().sum_dim(1).log();
        let nll = (lse.clone() - shifted.clone().gather(1, tc.clone())) * mask.clone();
        let loss = nll.sum();
        let log_z = lse.clone() + max;
        let z = (log_z.clone().square() * mask.clone()).sum();
        if !grads {
            return Chunk { loss, z, grads: None };
        }
        // (p ⊙ (1 + 2c·log Z) − onehot(t)) ⊙ mask / n: the probabilities, then −1 at each
        // counted target.
        let mut probs = (shifted - lse).exp() * mask.clone();
        if self.z_loss > 0.0 {
            probs = probs * (log_z * (2.0 * self.z_loss) + 1.0);
        }
        let mut dlogits = probs.scatter(1, tc, -mask, IndexingUpdateOp::Add) / self.count.clone().unsqueeze_dim(1);
        if let (Some(c), Some(l)) = (self.softcap, capped) {
            dlogits = dlogits * (-(l / c).square() + 1.0);
        }
        Chunk { loss, z, grads: Some(self.shares(hc, dlogits)) }
    }

    /// The chunk at `start` by the fused GPU kernel ([`chunk_cross_entropy`]) from its raw
    /// logits `raw` and hidden rows `hc`.
    fn fused(&self, raw: Tensor<2>, hc: Tensor<2>, start: usize, grads: bool) -> Chunk {
        let ids = self.ids.clone().narrow(0, start, hc.dims()[0]);
        let inv_count = self.count.clone().recip();
        let (terms, dlogits) = chunk_cross_entropy(raw, ids, inv_count, self.softcap, self.z_loss, grads);
        let loss = terms.clone().narrow(1, 0, 1).sum();
        let z = terms.narrow(1, 1, 1).sum();
        Chunk { loss, z, grads: dlogits.map(|d| self.shares(hc, d)) }
    }

    /// The chunk's rows of `∂L/∂h` and share of `∂L/∂W` from its logits' gradient.
    fn shares(&self, hc: Tensor<2>, dlogits: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let (k, p) = (self.kernels, self.p);
        (widen(k.matmul(p, dlogits.clone(), self.wt.clone())), widen(k.matmul(p, hc.transpose(), dlogits)))
    }
}
