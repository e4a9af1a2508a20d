//! The `[probe]` section of a run config.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// Probe activations every this many steps (and at steps 1 and the last); 0 disables the
    /// activation probes. Gradient statistics are tracked every step regardless.
    pub every: usize,
    /// How many of the largest |x| to keep per hidden state.
    pub top_k: usize,
    /// Steps in the window of the windowed gradient-norm coefficient of variation.
    pub cv_window: usize,
    /// A spike is a global gradient norm above mean + `spike_sigma` · std of the previous
    /// `spike_window` steps (OLMo-core: 6σ over 128).
    pub spike_window: usize,
    pub spike_sigma: f64,
    /// Warn when the token alignment τ(z_l) after the residual addition of any sublayer after
    /// the first exceeds this.
    pub warn_tau: f64,
    /// Warn when the largest |z_l| grows by more than this factor between two probes and is
    /// above `warn_max_abs` (the growth from the tiny initial activations to their trained
    /// size is normal and is not compared: the baseline is the second probe).
    pub warn_growth: f64,
    pub warn_max_abs: f64,
    /// Also write TensorBoard event files to `RUN/tb/`.
    pub tensorboard: bool,
    /// With TensorBoard, also write per-sublayer histograms of the gradients and of the hidden
    /// states `X_l` at every activation-probe step (the Normalization chapter's frontier researcher).
    pub histograms: bool,
    /// Alert when the global gradient norm exceeds this multiple of its warm-up average (seed
    /// 004's applied engineer: 1.5); 0 turns the alert off.
    pub alert_warmup_factor: f64,
    /// A shell command run for every alert with its record as one JSON line on standard input.
    pub alert_command: Option<String>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            every: 50,
            top_k: 8,
            cv_window: 100,
            spike_window: 128,
            spike_sigma: 6.0,
            warn_tau: 0.95,
            warn_growth: 10.0,
            warn_max_abs: 100.0,
            tensorboard: true,
            histograms: true,
            alert_warmup_factor: 0.0,
            alert_command: None,
        }
    }
}

impl ProbeConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.top_k > 0, "probe.top_k must be > 0");
        anyhow::ensure!(self.cv_window >= 2, "probe.cv_window must be ≥ 2");
        anyhow::ensure!(self.spike_window >= 2, "probe.spike_window must be ≥ 2");
        anyhow::ensure!(self.spike_sigma > 0.0, "probe.spike_sigma must be > 0");
        anyhow::ensure!(self.warn_growth > 1.0, "probe.warn_growth must be > 1");
        anyhow::ensure!(
            self.alert_warmup_factor >= 0.0 && self.alert_warmup_factor.is_finite(),
            "probe.alert_warmup_factor must be ≥ 0 (0 turns the alert off)"
        );
        anyhow::ensure!(
            self.alert_command.as_deref().is_none_or(|c| !c.trim().is_empty()),
            "probe.alert_command is empty; remove it or give a shell command"
        );
        Ok(())
    }

    /// Whether step `s` (1-based) of `total` is an activation-probe step.
    pub fn is_probe_step(&self, s: usize, total: usize) -> bool {
        self.every > 0 && (s == 1 || s.is_multiple_of(self.every) || s == total)
    }
}
