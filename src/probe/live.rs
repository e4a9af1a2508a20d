//! Probes during training: gradient statistics every step, activation probes every
//! `probe.every` steps, written to `probes.jsonl` and TensorBoard, with early warnings.

use super::config::ProbeConfig;
use super::grads::GradTracker;
use super::snapshot::{ForwardProbe, forward_probe};
use super::tensorboard::EventWriter;
use crate::model::Transformer;
use crate::train::clip::GradNorms;
use crate::train::metrics::{EvalRecord, MetricsWriter, TrainRecord};
use burn::tensor::{Int, Tensor};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const PROBES: &str = "probes.jsonl";
pub const TB_DIR: &str = "tb";

/// What a checkpoint keeps of the probes, so a resumed run's probes continue exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeState {
    pub tracker: GradTracker,
    pub probes_bytes: u64,
    pub last_max_abs: Option<(usize, f64)>,
}

pub struct LiveProbe {
    pub cfg: ProbeConfig,
    pub state: ProbeState,
    out: MetricsWriter,
    tb: Option<EventWriter>,
}

/// One probe step's record (a line of `probes.jsonl`).
#[derive(Serialize)]
struct ProbeRecord<'a> {
    step: usize,
    grad_norm: f64,
    spikes_total: usize,
    blocks: Vec<serde_json::Value>,
    warnings: &'a [String],
    #[serde(flatten)]
    forward: &'a ForwardProbe,
}

impl LiveProbe {
    pub fn open(run: &Path, cfg: &ProbeConfig, n_sublayers: usize, resumed: Option<ProbeState>) -> anyhow::Result<Self> {
        let state = resumed.unwrap_or_else(|| ProbeState {
            tracker: GradTracker::new(n_sublayers, cfg.cv_window, cfg.spike_window, cfg.spike_sigma),
            probes_bytes: 0,
            last_max_abs: None,
        });
        let out = MetricsWriter::open(&run.join(PROBES), state.probes_bytes)?;
        let tb = if cfg.tensorboard { Some(EventWriter::create(&run.join(TB_DIR))?) } else { None };
        Ok(Self { cfg: cfg.clone(), state, out, tb })
    }

    /// Every step: gradient statistics, spike detection, TensorBoard training scalars.
    pub fn observe_step(&mut self, r: &TrainRecord, norms: &GradNorms) -> anyhow::Result<Vec<String>> {
        let spike = self.state.tracker.observe(r.step, norms.total, &norms.per_param);
        if let Some(tb) = &mut self.tb {
            let mut v = vec![("train/loss", r.loss as f32), ("train/ce", r.ce as f32), ("train/lr", r.lr as f32), ("train/grad_norm", r.grad_norm as f32)];
            if let Some(reg) = r.reg {
                v.push(("train/reg", reg as f32));
            }
            tb.scalars(r.step, &v)?;
        }
        Ok(spike
            .map(|s| format!("gradient-norm spike at step {}: {:.3} > mean + {}σ = {:.3}", s.step, s.grad_norm, self.cfg.spike_sigma, s.threshold))
            .into_iter()
            .collect())
    }

    /// An activation probe of `model` (no autodiff) on `tokens`, with the gradient statistics
    /// of the step; writes the record and returns its warnings.
    pub fn probe(&mut self, step: usize, model: &Transformer, tokens: Tensor<2, Int>, mut warnings: Vec<String>) -> anyhow::Result<Vec<String>> {
        let mut fwd = forward_probe(model, tokens, self.cfg.top_k);
        warnings.extend(self.warnings(step, &fwd));
        let t = &self.state.tracker;
        for (p, (g, s)) in fwd.sublayers.iter_mut().zip(t.last_sublayers.iter().zip(&t.sublayers)) {
            p.grad_norm = Some(*g);
            p.grad_cv_window = Some(s.cv_window());
            p.grad_cv_run = Some(s.cv_run());
        }
        let blocks = t
            .last_blocks
            .iter()
            .zip(&t.blocks)
            .enumerate()
            .map(|(i, (g, s))| serde_json::json!({"layer": i + 1, "grad_norm": g, "cv_window": s.cv_window(), "cv_run": s.cv_run()}))
            .collect();
        let rec = ProbeRecord { step, grad_norm: t.global.recent.back().copied().unwrap_or(f64::NAN), spikes_total: t.spikes.len(), blocks, warnings: &warnings, forward: &fwd };
        self.out.write(&rec)?;
        if let Some(tb) = &mut self.tb {
            let mut tags: Vec<(String, f32)> = Vec::new();
            for p in &fwd.sublayers {
                let l = p.l;
                tags.push((format!("hidden_var/x/l{l:03}"), p.x.var as f32));
                tags.push((format!("hidden_var/z/l{l:03}"), p.z.var as f32));
                tags.push((format!("max_abs/z/l{l:03}"), p.z.max_abs as f32));
                tags.push((format!("tau/l{l:03}"), p.tau as f32));
                tags.push((format!("angular_distance/l{l:03}"), p.angular_distance as f32));
                tags.extend(p.grad_norm.map(|g| (format!("grad_norm/l{l:03}"), g as f32)));
                tags.extend(p.jacobian_bound.map(|j| (format!("ln_jacobian_bound/l{l:03}"), j as f32)));
                tags.extend(p.attn_max_logit.map(|v| (format!("attn_max_logit/l{l:03}"), v as f32)));
                tags.extend(p.attn_entropy.map(|v| (format!("attn_entropy/l{l:03}"), v as f32)));
            }
            tags.push(("grad/spikes_total".into(), t.spikes.len() as f32));
            let refs: Vec<(&str, f32)> = tags.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            tb.scalars(step, &refs)?;
            tb.flush()?;
        }
        Ok(warnings)
    }

    fn warnings(&mut self, step: usize, fwd: &ForwardProbe) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(p) = fwd.sublayers.iter().skip(1).filter(|p| p.tau > self.cfg.warn_tau).max_by(|a, b| a.tau.total_cmp(&b.tau)) {
            w.push(format!("token alignment τ = {:.3} at sublayer {} (rank collapse: tokens point the same way)", p.tau, p.l));
        }
        if let Some(p) = fwd.sublayers.iter().max_by(|a, b| a.z.max_abs.total_cmp(&b.z.max_abs)) {
            if let Some((at, prev)) = self.state.last_max_abs
                && p.z.max_abs > self.cfg.warn_growth * prev
                && p.z.max_abs > self.cfg.warn_max_abs
            {
                w.push(format!("max |z| grew {:.0}× since step {at}: {:.3e} at sublayer {} (exploding activations)", p.z.max_abs / prev, p.z.max_abs, p.l));
            }
            // Step 1 sees the initialisation's tiny activations; compare from the next probe on.
            if step > 1 {
                self.state.last_max_abs = Some((step, p.z.max_abs));
            }
        }
        w
    }

    pub fn eval(&mut self, r: &EvalRecord) -> anyhow::Result<()> {
        if let Some(tb) = &mut self.tb {
            tb.scalars(r.step, &[("val/loss", r.val_loss as f32), ("val/ppl", r.val_ppl as f32)])?;
            tb.flush()?;
        }
        Ok(())
    }

    /// The state to save in a checkpoint.
    pub fn checkpoint_state(&mut self) -> anyhow::Result<ProbeState> {
        self.state.probes_bytes = self.out.len()?;
        if let Some(tb) = &mut self.tb {
            tb.flush()?;
        }
        Ok(self.state.clone())
    }
}
