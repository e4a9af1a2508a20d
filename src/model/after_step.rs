//! The recipe's after-step hooks ([`crate::recipe::AfterStep`]) applied to a model after an
//! optimizer step, in the recipe's order, and what they did.

use super::qk_clip::{self, ClipEvent};
use super::transformer::Transformer;
use crate::recipe::AfterStep;

/// What the hooks of one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AfterStepEvents {
    /// QK-clip's rescaled heads and the step's largest logit, for a QK-clip recipe.
    pub qk_clip: Option<ClipEvent>,
    /// TaperNorm's gate for the next step, for a TaperNorm recipe.
    pub taper_gate: Option<f64>,
}

/// What the hooks read of the step just taken.
#[derive(Clone, Copy, Debug)]
pub struct StepSeen<'a> {
    /// The step's per-head largest attention logits `[layer][head]` (recorded by the forward
    /// when QK-clip asks for them).
    pub logit_maxima: &'a [Vec<f64>],
    /// The step's calibration statistics per `tapernorm` slot (recorded when TaperNorm asks).
    pub taper_stats: &'a [[f64; 2]],
    /// Optimizer steps done, this one included.
    pub done: usize,
    /// The run's optimizer steps and its learning-rate warm-up, in steps.
    pub total: usize,
    pub warmup: usize,
}

impl Transformer {
    /// This model after its recipe's hooks for the step `seen`.
    pub fn after_step(self, seen: StepSeen<'_>) -> (Transformer, AfterStepEvents) {
        let mut events = AfterStepEvents::default();
        let hooks = self.meta.after_step.clone();
        let model = hooks.into_iter().fold(self, |model, hook| match hook {
            AfterStep::QkClip(clip) => {
                let (model, event) = qk_clip::apply(model, seen.logit_maxima, clip);
                events.qk_clip = Some(event);
                model
            }
            AfterStep::ProjectToSphere(_) => model.project_to_sphere(),
            AfterStep::Taper(taper) => {
                let steps = taper.steps(seen.total, seen.warmup);
                events.taper_gate = Some(steps.gate(seen.done));
                super::taper::apply(model, taper, steps, seen.done, seen.taper_stats)
            }
        });
        (model, events)
    }
}
