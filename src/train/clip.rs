//! Global gradient-norm clipping: `g ← g · min(1, c / ‖g‖)` with `‖g‖` the L2 norm over all
//! parameters together. burn's built-in clipping works per tensor, which is a different rule.
//! The per-parameter norms come out too (the probes and the divergence check use them).

use crate::model::params::param_table;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// Norms before clipping.
#[derive(Clone, Debug)]
pub struct GradNorms {
    /// `‖g‖₂` over every parameter.
    pub total: f64,
    /// `(name, ‖g_p‖₂)` per parameter, in module order (0 for a parameter without gradient).
    pub per_param: Vec<(String, f64)>,
    /// The factor the gradients were multiplied by (1 when not clipped).
    pub scale: f64,
}

/// Measures the gradients and, when `max_norm > 0` and the total exceeds it, rescales them.
pub fn clip_global<M: Module>(model: &M, mut grads: GradientsParams, max_norm: f64) -> (GradientsParams, GradNorms) {
    let table = param_table(model);
    let mut squares: Vec<Tensor<1>> = Vec::with_capacity(table.len());
    let mut present = Vec::with_capacity(table.len());
    for p in &table {
        let sq = match p.shape.len() {
            1 => grads.get::<1>(p.id).map(|g| g.square().sum()),
            2 => grads.get::<2>(p.id).map(|g| g.square().sum()),
            r => unreachable!("parameters are vectors or matrices, found rank {r}"),
        };
        present.push(sq.is_some());
        squares.extend(sq);
    }
    // One transfer for all parameters rather than one per tensor.
    let values: Vec<f32> =
        if squares.is_empty() { Vec::new() } else { Tensor::cat(squares, 0).into_data().convert::<f32>().try_into_vec::<f32>().unwrap() };
    let mut it = values.into_iter();
    let per_param: Vec<(String, f64)> = table
        .iter()
        .zip(&present)
        .map(|(p, &has)| (p.name.clone(), if has { (it.next().unwrap() as f64).sqrt() } else { 0.0 }))
        .collect();
    let total = per_param.iter().map(|(_, n)| n * n).sum::<f64>().sqrt();
    let scale = if max_norm > 0.0 && total > max_norm { max_norm / (total + 1e-6) } else { 1.0 };
    if scale != 1.0 {
        for p in &table {
            match p.shape.len() {
                1 => rescale::<1>(&mut grads, p.id, scale),
                _ => rescale::<2>(&mut grads, p.id, scale),
            }
        }
    }
    (grads, GradNorms { total, per_param, scale })
}

fn rescale<const D: usize>(grads: &mut GradientsParams, id: burn::module::ParamId, scale: f64) {
    if let Some(g) = grads.remove::<D>(id) {
        grads.register(id, g.mul_scalar(scale));
    }
}
