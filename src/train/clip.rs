//! Global gradient-norm clipping: `g ← g · min(1, c / ‖g‖)` with `‖g‖` the L2 norm over all
//! parameters together. burn's built-in clipping works per tensor, which is a different rule.
//! The norms are measured by [`crate::probe::grads::measure`] (or read with the step's losses,
//! [`crate::probe::grads::GradSquares`]), which the probes share.

use crate::model::base::params::param_table;
use crate::probe::grads::{GradNorms, measure};
use burn::module::Module;
use burn::optim::GradientsParams;

/// The factor `min(1, c / (‖g‖ + 10⁻⁶))`; 1 when `max_norm` is 0 (clipping off).
pub fn clip_scale(total: f64, max_norm: f64) -> f64 {
    if max_norm > 0.0 && total > max_norm { max_norm / (total + 1e-6) } else { 1.0 }
}

/// Measures the gradients and, when `max_norm > 0` and the total exceeds it, rescales them.
/// Returns the gradients, the norms before clipping and the factor applied.
pub fn clip_global<M: Module>(model: &M, grads: GradientsParams, max_norm: f64) -> (GradientsParams, GradNorms, f64) {
    let norms = measure(model, &grads);
    let (grads, scale) = clip_to(model, grads, norms.total, max_norm);
    (grads, norms, scale)
}

/// The gradients, whose global norm is `total`, rescaled when `max_norm > 0` and `total`
/// exceeds it; and the factor applied.
pub fn clip_to<M: Module>(model: &M, grads: GradientsParams, total: f64, max_norm: f64) -> (GradientsParams, f64) {
    let scale = clip_scale(total, max_norm);
    let grads = if scale != 1.0 { scale_all(model, grads, scale) } else { grads };
    (grads, scale)
}

/// Every parameter's gradient multiplied by `factor` (clipping; undoing a loss scale).
pub fn scale_all<M: Module>(model: &M, mut grads: GradientsParams, factor: f64) -> GradientsParams {
    for p in &param_table(model) {
        match p.shape.len() {
            1 => rescale::<1>(&mut grads, p.id, factor),
            _ => rescale::<2>(&mut grads, p.id, factor),
        }
    }
    grads
}

fn rescale<const D: usize>(grads: &mut GradientsParams, id: burn::module::ParamId, scale: f64) {
    if let Some(g) = grads.remove::<D>(id) {
        grads.register(id, g.mul_scalar(scale));
    }
}
