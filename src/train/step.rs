//! One optimizer step's gradients: forward and backward over the micro-batches (each loss
//! divided by their number, so the accumulated gradient is the mean loss's), summed over the
//! ranks of a data-parallel job (each computed its share of the micro-batches), then
//! global-norm clipping. The trainer and the trajectory test against PyTorch (`tests/reference.rs`) both
//! call this, so that test checks the training loop's own arithmetic.

use super::allreduce::sum_over_ranks;
use super::clip::{Clipper, scale_all};
use crate::dist::Ranks;
use crate::kernels::widen;
use crate::model::Transformer;
use crate::model::base::terms::{Reading, Reduce, Row, StepReadings};
use crate::model::transformer::{LossParts, Objective};
use crate::probe::grads::{GradNorms, GradSquares};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Int, Tensor};

/// The clipped gradients of one step and what was measured on the way.
pub struct StepGradients {
    pub grads: GradientsParams,
    /// Norms before clipping.
    pub norms: GradNorms,
    /// The global clipping factor applied (1 when not clipped).
    pub scale: f64,
    /// What ZClip or AGC did (`None` under the global rule).
    pub clip: Option<crate::run::metrics::ClipStepRecord>,
    /// Mean over the micro-batches of the loss (CE plus every term times its weight) and of CE.
    pub loss: f64,
    pub ce: f64,
    /// Every loss term (the mean of its value before its weight) and every reading of the
    /// forward, combined over the step's micro-batches and ranks as each says, by name.
    pub readings: StepReadings,
}

/// The names under which a micro-batch reports its loss and its CE.
const LOSS: &str = "loss";
const CE: &str = "ce";

/// Gradients of the mean loss over a step's micro-batches (inputs, targets), clipped by
/// `clipper` (the global norm to `optim.grad_clip`, ZClip, AGC). This rank computes `micro_batches`, its share of the
/// step's `step.micro_batches`; the gradients and losses are summed over `step.ranks`. Under a
/// masked `objective`, targets below 0 are ignored and each micro-batch's loss is its mean over
/// its counted targets (as Hugging Face's trainer does); its z-loss is added to each loss.
/// `loss_scale` multiplies the loss before each backward pass and divides the accumulated
/// gradients before they are measured (f16's dynamic scaling; 1 otherwise).
pub fn gradients(
    model: &Transformer,
    micro_batches: impl ExactSizeIterator<Item = (Tensor<2, Int>, Tensor<2, Int>)>,
    step: Share,
    clipper: Clipper<'_>,
    objective: Objective,
    loss_scale: f64,
) -> anyhow::Result<StepGradients> {
    let n = step.micro_batches;
    let mut acc = GradientsAccumulator::<Transformer>::new();
    let mut reported = Vec::with_capacity(n);
    for (x, y) in micro_batches {
        let LossParts { loss, ce, terms, readings } = model.loss_parts(x, y, objective);
        let grads = loss.clone().div_scalar(n as f64 / loss_scale).backward();
        acc.accumulate(model, GradientsParams::from_grads(grads, model));
        let scalars = [(LOSS, loss), (CE, ce)].into_iter().chain(terms.into_iter().map(|t| (t.name, t.value)));
        let mut all: Vec<Reading> =
            scalars.map(|(name, v)| Reading::device(name, Reduce::Mean, vec![v.detach()])).collect();
        all.extend(readings);
        reported.push(all);
    }
    let grads = sum_over_ranks(model, acc.grads(), step.ranks)?;
    let grads = if loss_scale == 1.0 { grads } else { scale_all(model, grads, 1.0 / loss_scale) };
    let squares = GradSquares::of(model, &grads);
    let (readings, squared) = read_step(reported, squares.squares.clone(), step)?;
    let norms = squares.norms(&squared);
    let (grads, scale, clip) = clipper.clip(model, grads, norms.total)?;
    let (loss, ce) = (readings.scalar(LOSS).unwrap_or(f64::NAN), readings.scalar(CE).unwrap_or(f64::NAN));
    Ok(StepGradients { grads, norms, scale, clip, loss, ce, readings })
}

/// One read from the device for the whole step, none per micro-batch: every device row of every
/// micro-batch's readings and `squares`, the summed gradients' squares (the same on every rank),
/// returned as they are. Then, on the host, each reading combined over this rank's micro-batches
/// and over the ranks.
fn read_step(
    reported: Vec<Vec<Reading>>,
    squares: Option<Tensor<1>>,
    step: Share,
) -> anyhow::Result<(StepReadings, Vec<f64>)> {
    let device_rows = reported.iter().flatten().flat_map(|r| &r.rows).filter_map(|row| match row {
        Row::Device(t) => Some(t.clone()),
        Row::Host(_) => None,
    });
    // The losses are on the autodiff device, the gradients' squares off it: one kind, f32.
    let parts = device_rows.chain(squares).map(|t| widen(t.without_autodiff())).collect();
    let v =
        Tensor::cat(parts, 0).into_data().convert::<f64>().try_into_vec::<f64>().map_err(|e| {
            anyhow::anyhow!("reading the step's losses and gradient norms from the device failed: {e:?}")
        })?;
    let mut values = v.into_iter();
    let mut host = |row: &Row| match row {
        Row::Device(t) => values.by_ref().take(t.dims()[0]).collect(),
        Row::Host(v) => v.clone(),
    };
    let mut combined: Vec<Combined> = Vec::new();
    for batch in &reported {
        for (i, reading) in batch.iter().enumerate() {
            let rows: Vec<Vec<f64>> = reading.rows.iter().map(&mut host).collect();
            match combined.get_mut(i) {
                Some(c) => c.add(rows),
                None => combined.push(Combined { name: reading.name, reduce: reading.reduce, rows }),
            }
        }
    }
    let squared = values.collect();
    Ok((over_ranks(combined, step), squared))
}

/// One reading combined over this rank's micro-batches so far.
struct Combined {
    name: &'static str,
    reduce: Reduce,
    rows: Vec<Vec<f64>>,
}

impl Combined {
    /// Adds one micro-batch's rows: summed (a mean's sum) or the element-wise largest.
    fn add(&mut self, rows: Vec<Vec<f64>>) {
        for (mine, theirs) in self.rows.iter_mut().zip(rows) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a = match self.reduce {
                    Reduce::Mean | Reduce::Sum => *a + b,
                    Reduce::Max => a.max(b),
                };
            }
        }
    }
}

/// Every reading over the ranks: one sum of the sums and means, one maximum of the maxima;
/// then each mean divided by the step's micro-batches.
fn over_ranks(mut combined: Vec<Combined>, step: Share) -> StepReadings {
    for maxima in [false, true] {
        let picked = |c: &&mut Combined| (c.reduce == Reduce::Max) == maxima;
        let mut flat: Vec<f64> = combined.iter_mut().filter(picked).flat_map(|c| c.rows.concat()).collect();
        if flat.is_empty() {
            continue;
        }
        match maxima {
            true => step.ranks.max_f64(&mut flat),
            false => step.ranks.sum_f64(&mut flat),
        }
        let mut flat = flat.into_iter();
        for c in combined.iter_mut().filter(picked) {
            c.rows.iter_mut().flatten().for_each(|x| *x = flat.next().unwrap_or(f64::NAN));
        }
    }
    let mut readings = StepReadings::default();
    for c in combined {
        let per = if c.reduce == Reduce::Mean { step.micro_batches as f64 } else { 1.0 };
        readings.insert(c.name, c.rows.into_iter().map(|r| r.into_iter().map(|x| x / per).collect()).collect());
    }
    readings
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::cpu;

    fn row(v: &[f32]) -> Tensor<1> {
        Tensor::from_floats(v, &cpu())
    }

    /// Two micro-batches of one rank, by hand: a mean halves the sum, a sum adds, a maximum
    /// takes the larger per element, on device and host rows alike, each by its name; the
    /// squares come back as read.
    #[test]
    fn each_reading_is_combined_as_its_reduction_says() {
        let batch = |a: f32, b: f32, h: f64| {
            vec![
                Reading::device("loss", Reduce::Mean, vec![row(&[a])]),
                Reading::device("maxima", Reduce::Max, vec![row(&[a, b]), row(&[b, a])]),
                Reading::host("load", Reduce::Sum, vec![vec![h, 1.0]]),
            ]
        };
        let reported = vec![batch(1.0, 4.0, 2.0), batch(3.0, 2.0, 5.0)];
        let (r, squared) = read_step(reported, Some(row(&[9.0, 16.0])), Share::all(2)).unwrap();
        assert_eq!(r.scalar("loss"), Some(2.0));
        assert_eq!(r.rows("maxima"), [vec![3.0, 4.0], vec![4.0, 3.0]]);
        assert_eq!(r.rows("load"), [vec![7.0, 2.0]]);
        assert_eq!(squared, [9.0, 16.0]);
        assert!(r.rows("absent").is_empty() && r.scalar("absent").is_none());
    }
}
