//! ZClip ("ZClip: Adaptive Spike Mitigation for LLM Pre-Training", the authors' `zclip.py`):
//! the global gradient norm `g_t` judged by its z-score against an exponential moving mean and
//! variance of the norms seen so far, and clipped to a threshold the z-score sets.
//!
//! - warm-up (steps 1..=`warmup_steps`): the norms are kept; only the fixed cap clips; at step
//!   `warmup_steps` the mean and the population variance of the kept norms start the statistics;
//! - then `z = (g − μ)/(σ + ε)`; when `z > z_thresh` the step is a spike and its threshold is
//!   `(μ + z_thresh²·σ/z)·clip_factor` (`adaptive-scaling`) or `μ` (`mean`); the gradient is
//!   clipped to `min(threshold, cap)` (`g` when no spike), by `min(1, that/(g + 10⁻⁶))`;
//! - the statistics move towards the threshold on a spike and towards `g` otherwise:
//!   `μ ← αμ + (1−α)x`, `σ² ← ασ² + (1−α)(x − μ)²` with the new `μ` (not on a spike when
//!   `skip_update_on_spike`).
//!
//! The norm is the one after the ranks' all-reduce, so every rank takes the same decisions.

use super::clip_rule::{ZClipOption, ZClipSettings};
use serde::{Deserialize, Serialize};

/// ZClip's statistics between steps (kept in checkpoints, so a resumed run clips as the
/// uninterrupted one did).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZClipState {
    /// The norms of the warm-up so far.
    WarmingUp(Vec<f64>),
    /// The moving mean and variance of the norms.
    Tracking { mean: f64, var: f64 },
}

impl Default for ZClipState {
    fn default() -> Self {
        Self::WarmingUp(Vec::new())
    }
}

/// What ZClip decided at one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZClipDecision {
    /// The norm's z-score (`None` during the warm-up).
    pub z: Option<f64>,
    /// The threshold the z-score set, on a spike.
    pub spike_threshold: Option<f64>,
    /// The threshold the gradient is clipped to: `min(spike threshold, cap)`, the cap alone,
    /// or none.
    pub threshold: Option<f64>,
}

impl ZClipState {
    /// Whether no norm has been seen (a run under another rule).
    pub fn is_unused(&self) -> bool {
        matches!(self, Self::WarmingUp(kept) if kept.is_empty())
    }

    /// Judges the norm `g` of this step under `settings` and the fixed `cap` (`None`: no cap),
    /// and moves the statistics on.
    pub fn step(&mut self, settings: &ZClipSettings, g: f64, cap: Option<f64>) -> ZClipDecision {
        match self {
            Self::WarmingUp(kept) => {
                kept.push(g);
                if kept.len() >= settings.warmup_steps {
                    *self = start(kept);
                }
                ZClipDecision { z: None, spike_threshold: None, threshold: cap }
            }
            Self::Tracking { mean, var } => {
                let std = var.sqrt();
                let z = (g - *mean) / (std + settings.eps);
                let spike_threshold = (z > settings.z_thresh).then(|| match settings.clip_option {
                    ZClipOption::AdaptiveScaling => {
                        (*mean + settings.z_thresh * std / (z / settings.z_thresh)) * settings.clip_factor
                    }
                    ZClipOption::Mean => *mean,
                });
                let threshold = match (spike_threshold, cap) {
                    (Some(t), Some(c)) => Some(t.min(c)),
                    (t, c) => t.or(c),
                };
                if spike_threshold.is_none() || !settings.skip_update_on_spike {
                    let x = spike_threshold.unwrap_or(g);
                    let alpha = settings.alpha;
                    *mean = alpha * *mean + (1.0 - alpha) * x;
                    *var = alpha * *var + (1.0 - alpha) * (x - *mean).powi(2);
                }
                ZClipDecision { z: Some(z), spike_threshold, threshold }
            }
        }
    }
}

/// The statistics the warm-up's norms start: their mean and population variance.
fn start(kept: &[f64]) -> ZClipState {
    let n = kept.len() as f64;
    let mean = kept.iter().sum::<f64>() / n;
    let var = kept.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    ZClipState::Tracking { mean, var }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn fixture(name: &str) -> Vec<Value> {
        let path = format!("{}/tests/fixtures/clipping/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the clipping fixtures")).expect("JSON")
    }

    fn settings_of(s: &Value) -> (ZClipSettings, Option<f64>) {
        let clip_option = match s["clip_option"].as_str() {
            Some("mean") => ZClipOption::Mean,
            _ => ZClipOption::AdaptiveScaling,
        };
        let settings = ZClipSettings {
            alpha: s["alpha"].as_f64().unwrap(),
            z_thresh: s["z_thresh"].as_f64().unwrap(),
            eps: s["eps"].as_f64().unwrap(),
            warmup_steps: s["warmup_steps"].as_u64().unwrap() as usize,
            clip_option,
            clip_factor: s["clip_factor"].as_f64().unwrap(),
            skip_update_on_spike: s["skip_update_on_spike"].as_bool().unwrap(),
        };
        (settings, s["max_grad_norm"].as_f64())
    }

    fn close(a: f64, b: f64, what: &str) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{what}: {a} vs the reference's {b}");
    }

    /// Every case of the independent reference (the ZClip authors' `zclip.py`, re-run in numpy
    /// by someone who had not read this code: tools/reference_clipping.py): the threshold, the
    /// factor and the statistics after each of 80 steps with spikes in and after the warm-up.
    #[test]
    fn zclip_follows_the_authors_code_step_by_step() {
        for case in fixture("zclip.json") {
            let name = case["name"].as_str().unwrap();
            let (settings, cap) = settings_of(&case["settings"]);
            let mut state = ZClipState::default();
            for (g, want) in case["norms"].as_array().unwrap().iter().zip(case["expected"].as_array().unwrap()) {
                let g = g.as_f64().unwrap();
                let step = want["step"].as_u64().unwrap();
                let at = |what: &str| format!("{name}, step {step}: {what}");
                let d = state.step(&settings, g, cap);
                assert_eq!(d.spike_threshold.is_some(), want["spike"].as_bool().unwrap(), "{}", at("spike"));
                match (d.threshold, want["threshold"].as_f64()) {
                    (Some(t), Some(w)) => close(t, w, &at("threshold")),
                    (t, w) => assert_eq!(t, w, "{}", at("threshold")),
                }
                // torch's clip_grad_norm_ factor, which the trainer's global clip applies.
                let scale = d.threshold.filter(|&t| g > t).map_or(1.0, |t| t / (g + 1e-6));
                close(scale, want["scale"].as_f64().unwrap(), &at("scale"));
                match (&state, want["mean"].as_f64(), want["var"].as_f64()) {
                    (ZClipState::Tracking { mean, var }, Some(m), Some(v)) => {
                        close(*mean, m, &at("mean"));
                        close(*var, v, &at("var"));
                    }
                    (ZClipState::WarmingUp(_), None, None) => {}
                    (s, m, v) => panic!("{}: state {s:?}, reference mean {m:?} var {v:?}", at("state")),
                }
            }
        }
    }

    /// A checkpoint's state reads back as it was written, bit for bit.
    #[test]
    fn zclip_state_reads_back_exactly() {
        for s in [ZClipState::WarmingUp(vec![0.1, 1.0 / 3.0]), ZClipState::Tracking { mean: 0.7, var: 1e-17 / 3.0 }] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<ZClipState>(&json).unwrap(), s, "{json}");
        }
    }
}
