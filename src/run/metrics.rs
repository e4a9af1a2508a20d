//! `metrics.jsonl`: one [`MetricsRecord`] per line — `"type": "train"` for each step,
//! `"type": "eval"` for each validation pass, `"type": "diverged"` when a run stops on
//! divergence, `"type": "rollback"` when it goes back to a checkpoint (`[train.rollback]`; the
//! records after that checkpoint are replaced by this one). A resumed run truncates the file to the length recorded in its checkpoint, so
//! the file always matches the checkpointed state.

use crate::io::json::nan;
use crate::io::jsonl;
use crate::model::base::terms::StepReadings;
use crate::model::ffn::moe::balance;
use crate::stats::coefficient_of_variation;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainRecord {
    /// 1-based: the number of optimizer steps taken after this one.
    pub step: usize,
    /// Cross-entropy + λ·R, mean over the batch.
    #[serde(deserialize_with = "nan")]
    pub loss: f64,
    #[serde(deserialize_with = "nan")]
    pub ce: f64,
    /// The variance regulariser R (KiteNorm eq. 24), before λ; null without a regulariser.
    pub reg: Option<f64>,
    #[serde(deserialize_with = "nan")]
    pub lr: f64,
    /// Global gradient norm before clipping.
    #[serde(deserialize_with = "nan")]
    pub grad_norm: f64,
    pub clipped: bool,
    /// Set when the skip-step rule refused this step's update: why (`train.skip_step_sigma`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// f16 training: the loss scale this step's backward pass used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<f64>,
    pub tokens: u64,
    #[serde(deserialize_with = "nan")]
    pub tokens_per_s: f64,
    /// Seconds since the run started (summed over resumed sessions).
    #[serde(deserialize_with = "nan")]
    pub wall_s: f64,
    /// QK-clip recipes: the largest attention logit `q·k/√h` of the step (all layers and
    /// heads), before the clip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_logit: Option<f64>,
    /// QK-clip recipes: how many heads the clip rescaled after this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_clipped: Option<usize>,
    /// TaperNorm recipes: the gate `g` the next step's forward uses (1 → 0 over the taper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taper_gate: Option<f64>,
    /// SpikeScore so far (spikes per step, [`super::spike_score`]), from the 128th step on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spike_score: Option<f64>,
    /// This step's loss, or gradient norm, is a SpikeScore spike.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loss_spike: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grad_spike: bool,
    /// With a z-loss (`train.z_loss`): the mean log²Z over the batch, before its coefficient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z: Option<f64>,
    /// The applied update over all parameters: `RMS(ΔW)` and `‖ΔW‖/‖W‖` (absent on a
    /// skipped step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_rms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_ratio: Option<f64>,
    /// A MoE model's routing this step (absent for a dense model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<Box<MoeStepRecord>>,
    /// What ZClip or AGC did (absent under the global rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<Box<ClipStepRecord>>,
}

/// A MoE model's balancing and routing over one step: the balancing loss and router z-loss
/// before their coefficients, and per MoE layer (in layer order) the load's coefficient of
/// variation over the experts, the router's mean entropy (nats), its largest `|logit|`, the
/// experts that received no token and, under a capacity factor, the pairs dropped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeStepRecord {
    #[serde(deserialize_with = "nan")]
    pub balance: f64,
    #[serde(deserialize_with = "nan")]
    pub router_z: f64,
    pub load_cv: Vec<f64>,
    pub entropy: Vec<f64>,
    pub logit_max: Vec<f64>,
    pub dead: Vec<usize>,
    /// The (token, slot) pairs dropped over the experts' capacity (`model.moe.capacity`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<usize>,
}

impl MoeStepRecord {
    /// The record of a step's readings (the balancing terms and the routing, by name), when the
    /// model routes.
    pub fn from_readings(r: &StepReadings) -> Option<Self> {
        let loads = r.rows(balance::LOAD);
        if loads.is_empty() {
            return None;
        }
        let column =
            |name| r.rows(name).iter().map(|row| row.first().copied().unwrap_or(f64::NAN)).collect::<Vec<f64>>();
        let dropped = column(balance::DROPPED);
        Some(Self {
            balance: r.scalar(balance::BALANCE).unwrap_or(0.0),
            router_z: r.scalar(balance::ROUTER_Z).unwrap_or(0.0),
            load_cv: loads.iter().map(|l| coefficient_of_variation(l)).collect(),
            entropy: column(balance::ENTROPY),
            logit_max: column(balance::LOGIT_MAX),
            dead: loads.iter().map(|l| l.iter().filter(|&&c| c == 0.0).count()).collect(),
            dropped: match dropped.iter().any(|&d| d > 0.0) {
                true => dropped.iter().map(|&d| d as usize).collect(),
                false => Vec::new(),
            },
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    pub step: usize,
    #[serde(deserialize_with = "nan")]
    pub val_loss: f64,
    #[serde(deserialize_with = "nan")]
    pub val_ppl: f64,
    pub val_tokens: usize,
    #[serde(deserialize_with = "nan")]
    pub wall_s: f64,
    /// A mixture's sources, each on its share of the validation windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceLoss>,
}

/// One source's validation loss (`data.sources`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceLoss {
    pub name: String,
    #[serde(deserialize_with = "nan")]
    pub val_loss: f64,
    /// Bits per UTF-8 byte of its validation text: `val_loss / ln 2 · tokens / bytes` (absent
    /// for token shards, whose text is not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_bpb: Option<f64>,
    pub val_tokens: usize,
}

/// The step whose update was refused, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DivergedRecord {
    pub step: usize,
    pub reason: String,
}

/// Records lost before a resume: `metrics.jsonl` held fewer bytes than the checkpoint of
/// `step` recorded (`train --resume RUN --allow-lost-records`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LostRecord {
    /// The step the run resumed from.
    pub step: usize,
    /// Bytes of records missing before it.
    pub bytes: u64,
}

/// Downstream tasks evaluated at `step` (their metrics; the items are not kept here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TasksRecord {
    pub step: usize,
    pub results: Vec<crate::tasks::TaskResult>,
    /// Seconds the evaluation took.
    pub seconds: f64,
}

/// One line of `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum MetricsRecord {
    Train(TrainRecord),
    Eval(EvalRecord),
    Diverged(DivergedRecord),
    Lost(LostRecord),
    Tasks(TasksRecord),
    Rollback(super::rollback::RollbackRecord),
}

/// A run's metrics, split by kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    pub train: Vec<TrainRecord>,
    pub eval: Vec<EvalRecord>,
    pub diverged: Option<DivergedRecord>,
    /// Where records were lost before a resume.
    pub lost: Vec<LostRecord>,
    /// Downstream evaluations, in order.
    pub tasks: Vec<TasksRecord>,
    pub rollbacks: Vec<super::rollback::RollbackRecord>,
}

impl Metrics {
    /// Reads `metrics.jsonl`; a missing file reads as no records, a corrupt line is an error
    /// naming it.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        Ok(Self::from_records(jsonl::read_if_exists::<MetricsRecord>(path)?))
    }

    /// The records sorted by kind, in file order.
    pub fn from_records(records: Vec<MetricsRecord>) -> Self {
        let mut m = Self::default();
        for r in records {
            match r {
                MetricsRecord::Train(t) => m.train.push(t),
                MetricsRecord::Eval(e) => m.eval.push(e),
                MetricsRecord::Diverged(d) => m.diverged = Some(d),
                MetricsRecord::Lost(l) => m.lost.push(l),
                MetricsRecord::Tasks(t) => m.tasks.push(t),
                MetricsRecord::Rollback(r) => m.rollbacks.push(r),
            }
        }
        m
    }
}

/// What the clipping rule (`[optim.clip]`) did at a step, beside `clipped` (absent under the
/// global rule, whose only decision that is).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum ClipStepRecord {
    /// ZClip: the norm's z-score (null during the warm-up), whether it was a spike, and the
    /// threshold the gradient was clipped to (null: none).
    Zclip { z: Option<f64>, spike: bool, threshold: Option<f64> },
    /// AGC: how many units were clipped, of how many.
    Agc { clipped: usize, units: usize },
}

impl ClipStepRecord {
    /// The record as scalars, under the names TensorBoard and the tracking server show.
    pub fn scalars(&self) -> Vec<(&'static str, f64)> {
        match self {
            Self::Zclip { z, spike, threshold } => {
                let mut v = vec![("clip/spike", f64::from(u8::from(*spike)))];
                v.extend(z.map(|z| ("clip/z", z)));
                v.extend(threshold.map(|t| ("clip/threshold", t)));
                v
            }
            Self::Agc { clipped, units } => {
                vec![
                    ("clip/agc_clipped", *clipped as f64),
                    ("clip/agc_fraction", *clipped as f64 / (*units).max(1) as f64),
                ]
            }
        }
    }
}
