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
//! path, [`super::transformer::masked_cross_entropy`], is the reference.
//!
//! # Shapes
//! The three matmuls run in the model's precision (as autocast runs the projection and its
//! backward), the softmax and the sums in f32.
//!
//! - `h`: `[N, d]` final hidden states, `w`: `[d, V]` output projection, `targets`: `[N]`
//!   (−1: not counted) → `[1]`, the mean over counted targets.

use crate::kernels::{Precision, widen};
use burn::tensor::{IndexingUpdateOp, Int, Tensor};

/// Mean cross-entropy of `softmax(h w)` against `targets`, `chunk` rows at a time.
pub fn chunked_cross_entropy(
    h: Tensor<2>,
    w: Tensor<2>,
    targets: Tensor<1, Int>,
    chunk: usize,
    p: Precision,
) -> Tensor<1> {
    let [n, _] = h.dims();
    let grads = h.is_tracked() || w.is_tracked();
    // Off the autodiff tape altogether: nothing of a chunk outlives it.
    let (hd, wd, targets) = (h.clone().without_autodiff(), w.clone().without_autodiff(), targets.without_autodiff());
    let wt = p.compute(wd.clone().transpose());
    let wc = p.compute(wd.clone());
    let keep = targets.clone().greater_equal_elem(0);
    let count = keep.clone().int().sum().float().clamp_min(1.0);
    let mut loss_sum: Option<Tensor<1>> = None;
    let (mut gh, mut gw) = (Vec::new(), None::<Tensor<2>>);
    for start in (0..n).step_by(chunk.max(1)) {
        let len = chunk.max(1).min(n - start);
        let (hc, tc) = (hd.clone().narrow(0, start, len), targets.clone().narrow(0, start, len));
        let mask = hc.zeros_like().narrow(1, 0, 1).mask_fill(keep.clone().narrow(0, start, len).unsqueeze_dim(1), 1.0);
        let tc = tc.clamp_min(0).unsqueeze_dim::<2>(1);
        let logits = widen(p.matmul(hc.clone(), wc.clone()));
        let max = logits.clone().max_dim(1);
        let shifted = logits - max;
        let lse = shifted.clone().exp().sum_dim(1).log();
        let nll = (lse.clone() - shifted.clone().gather(1, tc.clone())) * mask.clone();
        let s = nll.sum();
        loss_sum = Some(match loss_sum {
            Some(a) => a + s,
            None => s,
        });
        if grads {
            let onehot = shifted.zeros_like().scatter(1, tc, mask.clone(), IndexingUpdateOp::Add);
            let dlogits = ((shifted - lse).exp() * mask - onehot) / count.clone().unsqueeze_dim(1);
            gh.push(widen(p.matmul(dlogits.clone(), wt.clone())));
            let g = widen(p.matmul(hc.transpose(), dlogits));
            gw = Some(match gw {
                Some(a) => a + g,
                None => g,
            });
        }
    }
    let loss = loss_sum.expect("at least one row") / count;
    match (grads, gw) {
        (true, Some(gw)) => {
            let s = (h * Tensor::cat(gh, 0)).sum() + (w * gw).sum();
            loss + (s.clone() - s.detach())
        }
        _ => loss,
    }
}
