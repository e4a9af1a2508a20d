//! What changes a model's weights after an optimizer step, in order: the recipe's hooks
//! ([`crate::recipe::AfterStep`]: QK-clip, nGPT's projection, TaperNorm's schedule), then a
//! MoE model's bias balancing (`[model.moe.router] bias_update`). Each hook reads what it needs
//! of the step by name ([`StepReadings`]).

use super::attention::HEAD_MAX;
use super::hook::Hook;
use super::layer::TAPER_CALIBRATION;
use super::moe_balance::LOAD;
use super::qk_clip::{self, ClipEvent};
use super::terms::StepReadings;
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
    /// The step's readings over its micro-batches and ranks: QK-clip's per-head largest logits
    /// `[layer][head]`, TaperNorm's calibration per slot, the experts' load `[layer][expert]`.
    pub readings: &'a StepReadings,
    /// Optimizer steps done, this one included.
    pub done: usize,
    /// The run's optimizer steps and its learning-rate warm-up, in steps.
    pub total: usize,
    pub warmup: usize,
}

impl Transformer {
    /// This model after its hooks for the step `seen`.
    pub fn after_step(self, seen: StepSeen<'_>) -> (Transformer, AfterStepEvents) {
        let mut events = AfterStepEvents::default();
        let hooks = self.meta.after_step.clone();
        let model = hooks.into_iter().fold(self, |model, hook| match hook {
            Hook::Recipe(AfterStep::QkClip(clip)) => {
                let (model, event) = qk_clip::apply(model, seen.readings.rows(HEAD_MAX.name), clip);
                events.qk_clip = Some(event);
                model
            }
            Hook::Recipe(AfterStep::ProjectToSphere(_)) => model.project_to_sphere(),
            Hook::Recipe(AfterStep::Taper(taper)) => {
                let steps = taper.steps(seen.total, seen.warmup);
                events.taper_gate = Some(steps.gate(seen.done));
                let stats = seen.readings.rows(TAPER_CALIBRATION.name);
                super::taper::apply(model, taper, steps, seen.done, stats)
            }
            Hook::BalanceExperts { gamma } => model.balance_experts(seen.readings.rows(LOAD), gamma),
        });
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
