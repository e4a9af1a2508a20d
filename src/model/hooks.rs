//! What changes a model's weights after an optimizer step, in order: the recipe's hooks
//! ([`crate::recipe::AfterStep`]: QK-clip, nGPT's projection, TaperNorm's schedule), then a
//! MoE model's bias balancing (`[model.moe.router] bias_update`). Each hook reads what it needs
//! of the step by name ([`StepReadings`]).

use crate::model::attention::qk_clip::{self, ClipEvent};
use crate::model::attention::self_attention::HEAD_MAX;
use crate::model::base::terms::StepReadings;
use crate::model::ffn::moe::balance::LOAD;
use crate::model::hook::Hook;
use crate::model::layer::TAPER_CALIBRATION;
use crate::model::transformer::Transformer;
use crate::recipe::{AfterStep, QkClip};

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
                let (model, event) = model.clip_logits(seen.readings.rows(HEAD_MAX.name), clip);
                events.qk_clip = Some(event);
                model
            }
            Hook::Recipe(AfterStep::ProjectToSphere(_)) => model.project_to_sphere(),
            Hook::Recipe(AfterStep::Taper(taper)) => {
                let steps = taper.steps(seen.total, seen.warmup);
                events.taper_gate = Some(steps.gate(seen.done));
                let stats = seen.readings.rows(TAPER_CALIBRATION.name);
                crate::model::taper_schedule::apply(model, taper, steps, seen.done, stats)
            }
            Hook::BalanceExperts { gamma } => model.balance_experts(seen.readings.rows(LOAD), gamma),
        });
        (model, events)
    }

    /// QK-clip: every layer's `W_q`, `W_k` rescaled by the per-head factors of `maxima`
    /// (`[layer][head]`, [`qk_clip::clip_heads`]), and what the clip did.
    fn clip_logits(mut self, maxima: &[Vec<f64>], clip: QkClip) -> (Transformer, ClipEvent) {
        let mut event = ClipEvent::default();
        for (layer, heads) in self.layers.iter_mut().zip(maxima) {
            event.max_logit = heads.iter().fold(event.max_logit, |m, &s| m.max(s));
            event.heads_clipped += qk_clip::clip_heads(&mut layer.attn.f, heads, clip);
        }
        (self, event)
    }

    /// DeepSeek V3's auxiliary-loss-free balancing: each MoE layer's selection bias moved by
    /// `γ · sign(mean load − load)` ([`crate::model::ffn::moe::balance::update_bias`]).
    fn balance_experts(mut self, loads: &[Vec<f64>], gamma: f64) -> Transformer {
        let blocks = self.layers.iter_mut().filter_map(|l| match &mut l.ffn.f {
            crate::model::ffn_block::FfnBlock::Moe(m) => Some(m),
            crate::model::ffn_block::FfnBlock::Dense(_) => None,
        });
        for (moe, load) in blocks.zip(loads) {
            if let Some(b) = moe.selection_bias.take() {
                moe.selection_bias = Some(b.map(|t| crate::model::ffn::moe::balance::update_bias(t, load, gamma)));
            }
        }
        self
    }
}
