//! `[optim.clip]`: the rule that clips a step's gradients (`rule`), with the fixed global cap
//! `optim.grad_clip` (0: none) applied under every rule:
//!
//! | rule | what clips | the cap |
//! |---|---|---|
//! | `global` | `g ← g·min(1, c/‖g‖)`, `‖g‖` over all parameters together | is the rule |
//! | `zclip` | ZClip: the threshold a z-score of `‖g‖` against its moving statistics sets ([`crate::run::zclip`]) | `min(threshold, c)` (ZClip's `max_grad_norm`, 1.0 by default there too) |
//! | `agc` | AGC (NFNets): each unit's gradient to `λ·max(‖W_u‖, ε)` ([`crate::train::agc`]) | first, on `‖g‖` before AGC |

use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// How a step's gradients are clipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ClipRule {
    /// The global norm to `optim.grad_clip` alone.
    #[default]
    Global,
    /// ZClip's adaptive threshold, then the cap.
    Zclip(ZClipSettings),
    /// AGC's unit-wise clipping after the cap.
    Agc(AgcSettings),
}

/// ZClip's settings, named and defaulted as in the authors' `ZClip` class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZClipSettings {
    /// The moving statistics' decay α (0.97).
    pub alpha: f64,
    /// The z-score above which a step is a spike (2.5).
    pub z_thresh: f64,
    /// Added to σ in the z-score's denominator (10⁻⁶).
    pub eps: f64,
    /// Steps whose norms start the statistics; only the cap clips during them (25).
    pub warmup_steps: usize,
    /// The threshold on a spike (`adaptive-scaling`).
    pub clip_option: ZClipOption,
    /// Multiplies the `adaptive-scaling` threshold (1.0).
    pub clip_factor: f64,
    /// A spike leaves the statistics as they were (false: they move towards its threshold).
    pub skip_update_on_spike: bool,
}

impl Default for ZClipSettings {
    fn default() -> Self {
        Self {
            alpha: 0.97,
            z_thresh: 2.5,
            eps: 1e-6,
            warmup_steps: 25,
            clip_option: ZClipOption::AdaptiveScaling,
            clip_factor: 1.0,
            skip_update_on_spike: false,
        }
    }
}

/// ZClip's threshold on a spike of z-score `z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZClipOption {
    /// `(μ + z_thresh²·σ/z)·clip_factor`: the further out the spike, the closer to `μ`.
    AdaptiveScaling,
    /// `μ`.
    Mean,
}

/// AGC's settings, named and defaulted as in the NFNets reference code.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgcSettings {
    /// λ: a unit's gradient norm is kept at most λ times its weight norm (0.01).
    pub clipping: f64,
    /// The floor on a unit's weight norm, so units starting at zero can move (10⁻³).
    pub eps: f64,
    /// Leaves the output projection unclipped (NFNets: "always better not to clip the final
    /// linear layer"; true). Under tied embeddings the shared table is clipped as the embedding.
    pub skip_output: bool,
}

impl Default for AgcSettings {
    fn default() -> Self {
        Self { clipping: 0.01, eps: 1e-3, skip_output: true }
    }
}

impl ClipRule {
    /// Every setting's range; the config check calls it once.
    pub fn check(&self) -> anyhow::Result<()> {
        match self {
            Self::Global => {}
            Self::Zclip(z) => {
                ensure!(z.alpha > 0.0 && z.alpha < 1.0, "optim.clip.alpha must be in (0, 1) (ZClip: 0.97)");
                ensure!(z.z_thresh > 0.0 && z.z_thresh.is_finite(), "optim.clip.z_thresh must be > 0 (ZClip: 2.5)");
                ensure!(z.eps > 0.0 && z.eps.is_finite(), "optim.clip.eps must be > 0 (ZClip: 1e-6)");
                ensure!(z.warmup_steps >= 1, "optim.clip.warmup_steps must be ≥ 1 (ZClip: 25)");
                ensure!(
                    z.clip_factor > 0.0 && z.clip_factor.is_finite(),
                    "optim.clip.clip_factor must be > 0 (ZClip: 1.0)"
                );
            }
            Self::Agc(a) => {
                ensure!(a.clipping > 0.0 && a.clipping.is_finite(), "optim.clip.clipping must be > 0 (NFNets: 0.01)");
                ensure!(a.eps > 0.0 && a.eps.is_finite(), "optim.clip.eps must be > 0 (NFNets: 1e-3)");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[optim]` as far as the clip goes.
    #[derive(Deserialize)]
    struct Optim {
        #[serde(default)]
        clip: ClipRule,
    }

    fn parse(toml_text: &str) -> Result<ClipRule, String> {
        toml::from_str::<Optim>(toml_text).map(|o| o.clip).map_err(|e| e.to_string())
    }

    /// The rule is named in `[optim.clip]`, each with the defaults its authors' code has.
    #[test]
    fn the_clip_rule_reads_from_the_config_with_its_authors_defaults() {
        assert_eq!(parse("").unwrap(), ClipRule::Global);
        let z = parse("[clip]\nrule = \"zclip\"\nz_thresh = 2.0\nclip_option = \"mean\"").unwrap();
        let want = ZClipSettings { z_thresh: 2.0, clip_option: ZClipOption::Mean, ..Default::default() };
        assert_eq!(z, ClipRule::Zclip(want));
        let ZClipSettings { alpha, eps, warmup_steps, clip_factor, skip_update_on_spike, .. } = want;
        assert_eq!((alpha, eps, warmup_steps, clip_factor, skip_update_on_spike), (0.97, 1e-6, 25, 1.0, false));
        let a = parse("[clip]\nrule = \"agc\"").unwrap();
        assert_eq!(a, ClipRule::Agc(AgcSettings { clipping: 0.01, eps: 1e-3, skip_output: true }));
    }

    /// A misspelt rule or setting, and a setting out of range, are refused by name.
    #[test]
    fn a_wrong_clip_setting_is_refused_by_name() {
        assert!(parse("[clip]\nrule = \"zclipp\"").unwrap_err().contains("zclip"));
        assert!(parse("[clip]\nrule = \"agc\"\nz_thresh = 2.0").unwrap_err().contains("z_thresh"));
        let bad = parse("[clip]\nrule = \"zclip\"\nalpha = 1.0").unwrap();
        assert!(bad.check().unwrap_err().to_string().contains("optim.clip.alpha"));
        let bad = parse("[clip]\nrule = \"agc\"\nclipping = 0").unwrap();
        assert!(bad.check().unwrap_err().to_string().contains("optim.clip.clipping"));
    }
}
