//! One optimizer step's gradients: forward and backward over the micro-batches (each loss
//! divided by their number, so the accumulated gradient is the mean loss's), summed over the
//! ranks of a data-parallel job (each computed its share of the micro-batches), then
//! global-norm clipping. The trainer and the trajectory test against PyTorch (`tests/reference.rs`) both
//! call this, so that test checks the training loop's own arithmetic.

use super::allreduce::sum_over_ranks;
use super::clip::{clip_to, scale_all};
use super::router_step::RouterStep;
use crate::dist::Ranks;
use crate::kernels::widen;
use crate::model::Transformer;
use crate::model::transformer::{LossParts, Objective};
use crate::probe::grads::{GradNorms, GradSquares};
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
    /// MoE models: the mean balancing loss and router z-loss (before their coefficients; 0
    /// for a dense model), and every MoE layer's routing over the step's micro-batches and
    /// ranks (empty for a dense model).
    pub balance: f64,
    pub router_z: f64,
    pub routers: Vec<RouterStep>,
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
    let mut routers: Vec<RouterStep> = Vec::new();
    for (x, y) in micro_batches {
        let LossParts { loss, ce, reg, z, head_max, taper: stats, balance, router_z, routers: records } =
            model.loss_parts(x, y, objective);
        RouterStep::add(&mut routers, &records);
        taper = if taper.is_empty() { stats } else { taper.into_iter().zip(stats).map(|(a, b)| a + b).collect() };
        let grads = loss.clone().div_scalar(n as f64 / loss_scale).backward();
        acc.accumulate(model, GradientsParams::from_grads(grads, model));
        let reg = reg.unwrap_or_else(|| ce.zeros_like());
        let [z, balance, router_z] = [z, balance, router_z].map(|t| t.unwrap_or_else(|| ce.zeros_like()).detach());
        values.push(Tensor::cat(vec![loss.detach(), ce.detach(), reg.detach(), z, balance, router_z], 0));
        maxima = if maxima.is_empty() {
            head_max
        } else {
            maxima.into_iter().zip(head_max).map(|(a, b)| a.max_pair(b)).collect()
        };
    }
    let grads = sum_over_ranks(model, acc.grads(), step.ranks)?;
    let grads = if loss_scale == 1.0 { grads } else { scale_all(model, grads, 1.0 / loss_scale) };
    let read = read_step(values, taper, maxima, GradSquares::of(model, &grads), step)?;
    let (grads, scale) = clip_to(model, grads, read.norms.total, grad_clip);
    let [loss, ce, reg, z, balance, router_z] = read.means;
    let StepRead { norms, logit_maxima, taper_stats, .. } = read;
    RouterStep::over_ranks(&mut routers, n, step.ranks);
    Ok(StepGradients { grads, norms, scale, loss, ce, reg, z, logit_maxima, taper_stats, balance, router_z, routers })
}

/// What a step brings to the host, over the ranks: the means of `[loss, ce, reg, z, balance, router_z]` and of
/// each TaperNorm slot's statistics, the per-layer per-head logit maxima, the gradient norms.
struct StepRead {
    means: [f64; VALUES],
    taper_stats: Vec<[f64; 2]>,
    logit_maxima: Vec<Vec<f64>>,
    norms: GradNorms,
}

/// One read from the device for the whole step, none per micro-batch: `values` (one `[VALUES]` per
/// micro-batch of this rank), `taper` (one `[2]` per slot, summed over this rank's
/// micro-batches, which all have as many tokens), `maxima` (one `[heads]` per layer, the
/// largest over this rank's micro-batches) and the summed gradients' squares (the same on
/// every rank). Then the sums and maxima over the ranks, on the host.
fn read_step(
    values: Vec<Tensor<1>>,
    taper: Vec<Tensor<1>>,
    maxima: Vec<Tensor<1>>,
    squares: GradSquares,
    step: Share,
) -> anyhow::Result<StepRead> {
    let heads = maxima.first().map_or(0, |m| m.dims()[0]);
    let sizes = [VALUES * values.len(), 2 * taper.len(), heads * maxima.len()];
    // The losses are on the autodiff device, the gradients' squares off it: one kind, f32.
    let parts = values.into_iter().chain(taper).chain(maxima).chain(squares.squares.clone());
    let parts = parts.map(|t| widen(t.without_autodiff())).collect();
    let v =
        Tensor::cat(parts, 0).into_data().convert::<f64>().try_into_vec::<f64>().map_err(|e| {
            anyhow::anyhow!("reading the step's losses and gradient norms from the device failed: {e:?}")
        })?;
    let (losses, rest) = v.split_at(sizes[0]);
    let (stats, rest) = rest.split_at(sizes[1]);
    let (maxima, squared) = rest.split_at(sizes[2]);
    let (means, taper_stats) = step_means(losses, stats, step);
    let mut maxima = maxima.to_vec();
    if heads > 0 {
        step.ranks.max_f64(&mut maxima);
    }
    let logit_maxima = maxima.chunks(heads.max(1)).map(<[f64]>::to_vec).collect();
    Ok(StepRead { means, taper_stats, logit_maxima, norms: squares.norms(squared) })
}

/// The step's means over its micro-batches and ranks of `[loss, ce, reg, z, balance, router_z]` (`losses`: six
/// per micro-batch of this rank) and of each TaperNorm slot's two statistics (`stats`, summed
/// over this rank's micro-batches): one sum over the ranks.
fn step_means(losses: &[f64], stats: &[f64], step: Share) -> ([f64; VALUES], Vec<[f64; 2]>) {
    let mut sums: Vec<f64> = (0..VALUES).map(|k| losses.iter().skip(k).step_by(VALUES).sum::<f64>()).collect();
    sums.extend_from_slice(stats);
    step.ranks.sum_f64(&mut sums);
    let means: Vec<f64> = sums.iter().map(|s| s / step.micro_batches as f64).collect();
    let taper_stats = means[VALUES..].chunks(2).map(|c| [c[0], c[1]]).collect();
    (std::array::from_fn(|k| means[k]), taper_stats)
}

/// The loss terms a micro-batch reports: loss, CE, R, z, the MoE balancing loss and router z.
const VALUES: usize = 6;

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
