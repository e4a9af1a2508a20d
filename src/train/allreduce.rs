//! Gradients summed over the ranks of a data-parallel job: every parameter's gradient, in the
//! model's parameter order, laid end to end in one f32 vector (one read from the device), summed
//! by [`Ranks::sum_f32`] in fixed-size buckets, and put back with each gradient's shape and
//! dtype. A lone process returns the gradients untouched.

use crate::dist::Ranks;
use crate::model::params::{ParamEntry, param_table};
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
    let parts: Vec<(&ParamEntry, Tensor<1>, DType)> =
        table.iter().filter_map(|p| take_flat(&mut grads, p).map(|(g, dtype)| (p, g, dtype))).collect();
    let Some(device) = parts.first().map(|(_, g, _)| g.device()) else {
        return Ok(grads);
    };
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
