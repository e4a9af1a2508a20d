//! One optimizer step's gradients: forward and backward over the micro-batches (each loss
//! divided by their number, so the accumulated gradient is the mean loss's), summed over the
//! ranks of a data-parallel job (each computed its share of the micro-batches), then
//! global-norm clipping. The trainer and the trajectory test against PyTorch (`tests/reference.rs`) both
//! call this, so that test checks the training loop's own arithmetic.

use super::allreduce::sum_over_ranks;
use super::clip::{clip_global, scale_all};
use crate::dist::Ranks;
use crate::model::Transformer;
use crate::model::transformer::{LossParts, Objective};
use crate::probe::grads::GradNorms;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Int, Tensor};

/// The clipped gradients of one step and what was measured on the way.
pub struct StepGradients {
    pub grads: GradientsParams,
    /// Norms before clipping.
    pub norms: GradNorms,
    /// The clipping factor applied (1 when not clipped).
    pub scale: f64,
    /// Mean over the micro-batches of CE + λ·R + c·z, of CE, of R (0 without a regulariser)
    /// and of z, the mean log²Z (0 without a z-loss).
    pub loss: f64,
    pub ce: f64,
    pub reg: f64,
    pub z: f64,
    /// QK-clip recipes: every attention sublayer's per-head largest logit over the step's
    /// micro-batches (and ranks), `[layer][head]`; empty otherwise.
    pub logit_maxima: Vec<Vec<f64>>,
    /// TaperNorm recipes: every `tapernorm` slot's calibration statistics
    /// ([`crate::norm::TaperNorm::calibration`]), the mean over the micro-batches and ranks;
    /// empty otherwise.
    pub taper_stats: Vec<[f64; 2]>,
}

/// Gradients of the mean loss over a step's micro-batches (inputs, targets), clipped to a global
/// norm of `grad_clip` (0: no clipping). This rank computes `micro_batches`, its share of the
/// step's `step.micro_batches`; the gradients and losses are summed over `step.ranks`. Under a
/// masked `objective`, targets below 0 are ignored and each micro-batch's loss is its mean over
/// its counted targets (as Hugging Face's trainer does); its z-loss is added to each loss.
/// `loss_scale` multiplies the loss before each backward pass and divides the accumulated
/// gradients before they are measured (f16's dynamic scaling; 1 otherwise).
pub fn gradients(
    model: &Transformer,
    micro_batches: impl ExactSizeIterator<Item = (Tensor<2, Int>, Tensor<2, Int>)>,
    step: Share,
    grad_clip: f64,
    objective: Objective,
    loss_scale: f64,
) -> anyhow::Result<StepGradients> {
    let n = step.micro_batches;
    let mut acc = GradientsAccumulator::<Transformer>::new();
    let mut values = Vec::with_capacity(n);
    let mut maxima: Vec<Tensor<1>> = Vec::new();
    let mut taper: Vec<Tensor<1>> = Vec::new();
    for (x, y) in micro_batches {
        let LossParts { loss, ce, reg, z, head_max, taper: stats } = model.loss_parts(x, y, objective);
        taper = if taper.is_empty() { stats } else { taper.into_iter().zip(stats).map(|(a, b)| a + b).collect() };
        let grads = loss.clone().div_scalar(n as f64 / loss_scale).backward();
        acc.accumulate(model, GradientsParams::from_grads(grads, model));
        let reg = reg.unwrap_or_else(|| ce.zeros_like());
        let z = z.unwrap_or_else(|| ce.zeros_like());
        values.push(Tensor::cat(vec![loss.detach(), ce.detach(), reg.detach(), z.detach()], 0));
        maxima = if maxima.is_empty() {
            head_max
        } else {
            maxima.into_iter().zip(head_max).map(|(a, b)| a.max_pair(b)).collect()
        };
    }
    let logit_maxima = logit_maxima(maxima, step.ranks)?;
    let grads = sum_over_ranks(model, acc.grads(), step.ranks)?;
    let grads = if loss_scale == 1.0 { grads } else { scale_all(model, grads, 1.0 / loss_scale) };
    let (grads, norms, scale) = clip_global(model, grads, grad_clip);
    let ([loss, ce, reg, z], taper_stats) = step_means(values, taper, step)?;
    Ok(StepGradients { grads, norms, scale, loss, ce, reg, z, logit_maxima, taper_stats })
}

/// The step's means over its micro-batches (and ranks) of `[loss, ce, reg, z]` (`values`: one
/// `[4]` per micro-batch of this rank) and of each TaperNorm slot's statistics (`taper`: one
/// `[2]` per slot, summed over this rank's micro-batches, which all have as many tokens). One
/// read from the device for all of them at the end, none per micro-batch, and one sum over
/// the ranks.
fn step_means(values: Vec<Tensor<1>>, taper: Vec<Tensor<1>>, step: Share) -> anyhow::Result<([f64; 4], Vec<[f64; 2]>)> {
    let local = 4 * values.len();
    let v = Tensor::cat(values.into_iter().chain(taper).collect(), 0)
        .into_data()
        .convert::<f64>()
        .try_into_vec::<f64>()
        .map_err(|e| anyhow::anyhow!("reading the step's losses from the device failed: {e:?}"))?;
    let (losses, stats) = v.split_at(local);
    let mut sums: Vec<f64> = (0..4).map(|k| losses.iter().skip(k).step_by(4).sum::<f64>()).collect();
    sums.extend_from_slice(stats);
    step.ranks.sum_f64(&mut sums);
    let means: Vec<f64> = sums.iter().map(|s| s / step.micro_batches as f64).collect();
    let taper_stats = means[4..].chunks(2).map(|c| [c[0], c[1]]).collect();
    Ok(([means[0], means[1], means[2], means[3]], taper_stats))
}

/// The per-layer per-head logit maxima on the host, the largest over the ranks.
fn logit_maxima(maxima: Vec<Tensor<1>>, ranks: crate::dist::Ranks) -> anyhow::Result<Vec<Vec<f64>>> {
    if maxima.is_empty() {
        return Ok(Vec::new());
    }
    let heads = maxima[0].dims()[0];
    let mut flat = Tensor::cat(maxima, 0)
        .into_data()
        .convert::<f64>()
        .try_into_vec::<f64>()
        .map_err(|e| anyhow::anyhow!("reading the step's attention-logit maxima from the device failed: {e:?}"))?;
    ranks.max_f64(&mut flat);
    Ok(flat.chunks(heads).map(<[f64]>::to_vec).collect())
}

/// Which part of a step this process computes.
#[derive(Clone, Copy, Debug)]
pub struct Share {
    /// The step's micro-batches over all ranks.
    pub micro_batches: usize,
    pub ranks: Ranks,
}

impl Share {
    /// A lone process computing all `micro_batches`.
    pub fn all(micro_batches: usize) -> Self {
        Self { micro_batches, ranks: Ranks::single() }
    }
}
