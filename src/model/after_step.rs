//! The recipe's after-step hooks ([`crate::recipe::AfterStep`]) applied to a model after an
//! optimizer step, in the recipe's order, and what they did; then a MoE model's bias
//! balancing (`[model.moe.router] bias_update`).

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
    /// The step's assignments per expert of every MoE layer `[layer][expert]`, over its
    /// micro-batches and ranks (empty for a dense model).
    pub expert_load: &'a [Vec<f64>],
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
        let model = match model.meta.moe.and_then(|m| m.bias_step) {
            Some(gamma) => model.balance_experts(seen.expert_load, gamma),
            None => model,
        };
        (model, events)
    }

    /// DeepSeek V3's auxiliary-loss-free balancing: each MoE layer's selection bias moved by
    /// `γ · sign(mean load − load)` ([`super::moe_balance::update_bias`]).
    fn balance_experts(mut self, loads: &[Vec<f64>], gamma: f64) -> Transformer {
        let blocks = self.layers.iter_mut().filter_map(|l| match &mut l.ffn.f {
            super::ffn_block::Ffn::Moe(m) => Some(m),
            super::ffn_block::Ffn::Dense(_) => None,
        });
        for (moe, load) in blocks.zip(loads) {
            if let Some(b) = moe.selection_bias.take() {
                moe.selection_bias = Some(b.map(|t| super::moe_balance::update_bias(t, load, gamma)));
            }
        }
        self
    }
}
