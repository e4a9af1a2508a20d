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
}

impl Transformer {
    /// This model after its recipe's hooks; `logit_maxima` are the step's per-head largest
    /// attention logits (`[layer][head]`, recorded by the forward when QK-clip asks for them).
    pub fn after_step(self, logit_maxima: &[Vec<f64>]) -> (Transformer, AfterStepEvents) {
        let mut events = AfterStepEvents::default();
        let hooks = self.meta.after_step.clone();
        let model = hooks.into_iter().fold(self, |model, hook| match hook {
            AfterStep::QkClip(clip) => {
                let (model, event) = qk_clip::apply(model, logit_maxima, clip);
                events.qk_clip = Some(event);
                model
            }
            AfterStep::ProjectToSphere(_) => model.project_to_sphere(),
        });
        (model, events)
    }
}
