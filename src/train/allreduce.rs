//! Gradients summed over the ranks of a data-parallel job: every parameter's gradient, in the
//! model's parameter order, laid end to end in one f32 vector (one read from the device), summed
//! by [`Ranks::sum_f32`] in fixed-size buckets, and put back with each gradient's shape and
//! dtype. A parameter may have a gradient on some ranks only (a routed expert no token of one
//! rank's micro-batches reached): the ranks first agree which parameters have one anywhere, and
//! a rank without it sends zeros, so every rank sends the same layout and the sum is the one a
//! single process accumulates; a parameter without a gradient on any rank stays without one. A
//! lone process returns the gradients untouched.

use crate::dist::Ranks;
use crate::model::base::params::{ParamEntry, param_table};
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{DType, Tensor, TensorData};

/// `grads` summed over `ranks`.
pub fn sum_over_ranks<M: Module>(
    model: &M,
    mut grads: GradientsParams,
    ranks: Ranks,
) -> anyhow::Result<GradientsParams> {
    if ranks.size() == 1 {
        return Ok(grads);
    }
    let table = param_table(model);
    let anywhere = present_on_some_rank(&table, &grads, ranks);
    let Some(device) = table.iter().find_map(|p| grad_device(&grads, p)) else {
        return Ok(grads);
    };
    let parts: Vec<(&ParamEntry, Tensor<1>, DType)> = table
        .iter()
        .zip(&anywhere)
        .filter(|(_, here)| **here)
        .map(|(p, _)| {
            let (g, dtype) = take_flat(&mut grads, p).unwrap_or_else(|| {
                // Training parameters are f32 (the precision casts happen in the forward).
                (Tensor::<1>::zeros([p.shape.iter().product::<usize>()], (&device, DType::F32)), DType::F32)
            });
            (p, g, dtype)
        })
        .collect();
    let flat = Tensor::cat(parts.iter().map(|(_, g, _)| g.clone().cast(DType::F32)).collect(), 0);
    let mut values = flat
        .into_data()
        .try_into_vec::<f32>()
        .map_err(|e| anyhow::anyhow!("reading the step's gradients from the device failed: {e:?}"))?;
    ranks.sum_f32(&mut values);
    let total = values.len();
    let summed = Tensor::<1>::from_data(TensorData::new(values, [total]), &device);
    let mut at = 0;
    for (p, g, dtype) in parts {
        let len = g.dims()[0];
        let t = summed.clone().slice(at..at + len).cast(dtype);
        put_back(&mut grads, p, t);
        at += len;
    }
    Ok(grads)
}

/// Per parameter of `table`, whether some rank has its gradient.
fn present_on_some_rank(table: &[ParamEntry], grads: &GradientsParams, ranks: Ranks) -> Vec<bool> {
    let mut flags: Vec<f32> = table.iter().map(|p| f32::from(u8::from(grad_device(grads, p).is_some()))).collect();
    ranks.sum_f32(&mut flags);
    flags.into_iter().map(|f| f > 0.0).collect()
}

/// The device of `p`'s gradient in `grads`, when it has one (read at `p`'s rank: a gradient
/// is stored under its parameter's).
fn grad_device(grads: &GradientsParams, p: &ParamEntry) -> Option<burn::tensor::Device> {
    match p.shape.len() {
        1 => grads.get::<1>(p.id).map(|g| g.device()),
        _ => grads.get::<2>(p.id).map(|g| g.device()),
    }
}

/// A parameter's gradient taken out of `grads`, flattened, with its dtype.
fn take_flat(grads: &mut GradientsParams, p: &ParamEntry) -> Option<(Tensor<1>, DType)> {
    let flat = match p.shape.len() {
        1 => grads.remove::<1>(p.id)?,
        _ => grads.remove::<2>(p.id)?.flatten::<1>(0, 1),
    };
    let dtype = flat.dtype();
    Some((flat, dtype))
}

fn put_back(grads: &mut GradientsParams, p: &ParamEntry, flat: Tensor<1>) {
    match p.shape.len() {
        1 => grads.register(p.id, flat),
        _ => grads.register(p.id, flat.reshape([p.shape[0], p.shape[1]])),
    }
}
