//! A step's clipping under `[optim.clip]` ([`crate::run::clip_rule`]): global gradient-norm
//! clipping `g ← g · min(1, c / ‖g‖)` with `‖g‖` the L2 norm over all parameters together (burn's
//! built-in clipping works per tensor, which is a different rule), ZClip's threshold
//! ([`crate::run::zclip`]) as `c`, and AGC ([`super::agc`]) after the cap.
//! The norms are measured by [`crate::probe::grads::measure`] (or read with the step's losses,
//! [`crate::probe::grads::GradSquares`]), which the probes share.

use super::agc::clip_units;
use crate::model::base::params::param_table;
use crate::probe::grads::{GradNorms, measure};
use crate::run::clip_rule::{AgcSettings, ClipRule, ZClipSettings};
use crate::run::config::OptimConfig;
use crate::run::metrics::ClipStepRecord;
use crate::run::zclip::{ZClipDecision, ZClipState};
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

/// A step's clipping under `[optim.clip]`: the rule, the fixed cap `optim.grad_clip` (0: none)
/// and, under ZClip, its statistics (the trainer's, kept in checkpoints).
pub enum Clipper<'a> {
    Global { cap: f64 },
    Zclip { settings: ZClipSettings, cap: f64, state: &'a mut ZClipState },
    Agc { settings: AgcSettings, cap: f64 },
}

impl<'a> Clipper<'a> {
    /// The clipping `optim` declares; `zclip` is the run's ZClip state.
    pub fn new(optim: &OptimConfig, zclip: &'a mut ZClipState) -> Self {
        let cap = optim.grad_clip;
        match optim.clip {
            ClipRule::Global => Self::Global { cap },
            ClipRule::Zclip(settings) => Self::Zclip { settings, cap, state: zclip },
            ClipRule::Agc(settings) => Self::Agc { settings, cap },
        }
    }

    /// `grads`, whose global norm is `total`, clipped; the factor the global part applied (1:
    /// none) and what the rule did. A non-finite norm (a step the trainer will refuse) leaves
    /// ZClip's statistics as they were.
    pub fn clip<M: Module>(
        self,
        model: &M,
        grads: GradientsParams,
        total: f64,
    ) -> anyhow::Result<(GradientsParams, f64, Option<ClipStepRecord>)> {
        match self {
            Self::Global { cap } => {
                let (grads, scale) = clip_to(model, grads, total, cap);
                Ok((grads, scale, None))
            }
            Self::Zclip { settings, cap, state } => {
                let cap = (cap > 0.0).then_some(cap);
                let decision = match total.is_finite() {
                    true => state.step(&settings, total, cap),
                    false => ZClipDecision { z: None, spike_threshold: None, threshold: cap },
                };
                let (grads, scale) = clip_to(model, grads, total, decision.threshold.unwrap_or(0.0));
                let record = ClipStepRecord::Zclip {
                    z: decision.z,
                    spike: decision.spike_threshold.is_some(),
                    threshold: decision.threshold,
                };
                Ok((grads, scale, Some(record)))
            }
            Self::Agc { settings, cap } => {
                let (grads, scale) = clip_to(model, grads, total, cap);
                let (grads, count) = clip_units(model, grads, &settings)?;
                Ok((grads, scale, Some(ClipStepRecord::Agc { clipped: count.clipped, units: count.units })))
            }
        }
    }
}
