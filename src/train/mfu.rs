//! What the progress line needs for MFU: a run's train FLOPs per token and its device's
//! stated peak (`device::peak`).

use super::trainer::Trainer;
use crate::device::peak::{FlopShape, device_peak, train_flops_per_token};

impl Trainer {
    /// Train FLOPs per token and the stated peak (TFLOP/s) of the run's device in its precision,
    /// when the peak is known (a GPU the table of `device::peak` names, or
    /// `NORMLAB_PEAK_TFLOPS`). The rate shown counts every rank's tokens, so with `ranks`
    /// processes the peak is all their devices'.
    pub fn mfu_basis(&self, ranks: usize) -> Option<(f64, f64)> {
        let cfg = &self.cfg;
        let gpu = !cfg.run.device.is_cpu();
        let peak = device_peak(gpu, cfg.train.precision.half().is_some())?;
        let shape = FlopShape {
            matmul_params: crate::model::base::params::matmul_params(&self.model),
            layers: cfg.model.n_layers,
            d_model: cfg.model.d_model,
            seq_len: cfg.train.seq_len,
        };
        Some((train_flops_per_token(shape), peak * ranks as f64))
    }
}
