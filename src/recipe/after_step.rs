//! What a recipe does to the weights after every optimizer step, declared by the recipe and
//! applied once, in this order, by the trainer (see `Transformer::after_step`): QK-clip
//! (Kimi K2) rescales the query and key projections of heads whose logit went past τ; nGPT
//! projects its weights back onto the hypersphere; TaperNorm moves its gate and calibration.

use super::attention::QkClip;
use super::hypersphere::Hypersphere;
use super::resolve::ResolvedRecipe;
use super::taper::Taper;

/// One after-step hook.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AfterStep {
    /// QK-clip's rescaling of `W_q`, `W_k` per head.
    QkClip(QkClip),
    /// nGPT's projection of the embedding and every weight vector along `d` onto the unit sphere.
    ProjectToSphere(Hypersphere),
    /// TaperNorm's schedule: the calibration averages, `c` and γ̃ at the start, the gate.
    Taper(Taper),
}

impl ResolvedRecipe {
    /// This recipe's after-step hooks, in the order they apply.
    pub fn after_step(&self) -> Vec<AfterStep> {
        let clip = self.attention.qk_clip.map(AfterStep::QkClip);
        let sphere = self.residual.hypersphere().map(AfterStep::ProjectToSphere);
        let taper = self.taper.map(AfterStep::Taper);
        clip.into_iter().chain(sphere).chain(taper).collect()
    }
}
