//! Probes during training: gradient statistics every step, activation probes every
//! `probe.every` steps, written to `probes.jsonl` and TensorBoard, with early warnings.

use super::alert::{AlertRecord, AlertState, notify};
use super::config::ProbeConfig;
use super::grads::{GradNorms, GradTracker};
use super::snapshot::{ForwardProbe, forward_probe_with_histograms};
use crate::io::json::nan;
use crate::io::jsonl::JsonlWriter;
use crate::io::tensorboard::{EventWriter, Histogram};
use crate::model::Transformer;
use burn::tensor::{Int, Tensor};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What a checkpoint keeps of the probes, so a resumed run's probes continue exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeState {
    pub tracker: GradTracker,
    pub probes_bytes: u64,
    pub last_max_abs: Option<(usize, f64)>,
    #[serde(default)]
    pub alert: AlertState,
    #[serde(default)]
    pub alerts_bytes: u64,
}

/// Where the live probes write.
pub struct ProbePaths<'a> {
    pub records: &'a Path,
    pub alerts: &'a Path,
    pub tensorboard: &'a Path,
}

pub struct LiveProbe {
    pub cfg: ProbeConfig,
    pub state: ProbeState,
    out: JsonlWriter,
    alerts: JsonlWriter,
    tb: Option<EventWriter>,
    /// Steps of the schedule's warm-up (the alert's baseline).
    warmup: usize,
}

/// One Transformer block's gradient statistics at a probe step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockGrad {
    /// 1-based layer.
    pub layer: usize,
    #[serde(deserialize_with = "nan")]
    pub grad_norm: f64,
    #[serde(deserialize_with = "nan")]
    pub cv_window: f64,
    #[serde(deserialize_with = "nan")]
    pub cv_run: f64,
}

/// One probe step's record: a line of `probes.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub step: usize,
    #[serde(deserialize_with = "nan")]
    pub grad_norm: f64,
    pub spikes_total: usize,
    pub blocks: Vec<BlockGrad>,
    pub warnings: Vec<String>,
    /// The update this step applied, by parameter kind and layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<super::updates::UpdateBreakdown>,
    #[serde(flatten)]
    pub forward: ForwardProbe,
}

impl LiveProbe {
    /// Opens the probe outputs: records and alerts appended to their files (truncated to what
    /// `resumed` recorded), TensorBoard event files when the config asks for them. `warmup`:
    /// the schedule's warm-up steps.
    pub fn open(
        paths: &ProbePaths<'_>,
        cfg: &ProbeConfig,
        n_sublayers: usize,
        warmup: usize,
        resumed: Option<ProbeState>,
    ) -> anyhow::Result<Self> {
        let state = resumed.unwrap_or_else(|| ProbeState {
            tracker: GradTracker::new(n_sublayers, cfg.cv_window, cfg.spike_window, cfg.spike_sigma),
            probes_bytes: 0,
            last_max_abs: None,
            alert: AlertState::default(),
            alerts_bytes: 0,
        });
        let out = JsonlWriter::open(paths.records, state.probes_bytes)?;
        let alerts = JsonlWriter::open(paths.alerts, state.alerts_bytes)?;
        let tb = if cfg.tensorboard { Some(EventWriter::create(paths.tensorboard)?) } else { None };
        Ok(Self { cfg: cfg.clone(), state, out, alerts, tb, warmup })
    }

    /// Every step: gradient statistics, spike detection, the step's training `scalars` to
    /// TensorBoard.
    pub fn observe_step(
        &mut self,
        step: usize,
        norms: &GradNorms,
        scalars: &[(&str, f32)],
    ) -> anyhow::Result<Vec<String>> {
        let spike = self.state.tracker.observe(step, norms.total, &norms.per_param);
        let mut warnings: Vec<String> = spike
            .map(|s| {
                format!(
                    "gradient-norm spike at step {}: {:.3} > mean + {}σ = {:.3}",
                    s.step, s.grad_norm, self.cfg.spike_sigma, s.threshold
                )
            })
            .into_iter()
            .collect();
        let alert = self.state.alert.observe(step, norms.total, self.warmup, self.cfg.alert_warmup_factor);
        let mut scalars = scalars.to_vec();
        if let Some(r) = alert.ratio {
            scalars.push(("alert/grad_norm_ratio", r as f32));
            scalars.push(("alert/active", if alert.record.is_some() { 1.0 } else { 0.0 }));
        }
        if let Some(tb) = &mut self.tb {
            tb.scalars(step, &scalars)?;
        }
        warnings.extend(alert.message);
        if let Some(r) = alert.record {
            warnings.extend(self.alerted(&r)?);
        }
        Ok(warnings)
    }

    /// Records an alert and runs the alert command; returns the command's failure, if any.
    fn alerted(&mut self, r: &AlertRecord) -> anyhow::Result<Option<String>> {
        self.alerts.write(r)?;
        Ok(self.cfg.alert_command.as_deref().and_then(|c| notify(c, r)))
    }

    /// An activation probe of `model` (no autodiff) on `tokens`, with the gradient statistics
    /// of the step; writes the record and returns its warnings.
    pub fn probe(
        &mut self,
        step: usize,
        model: &Transformer,
        tokens: Tensor<2, Int>,
        mut warnings: Vec<String>,
        grad_histograms: Vec<(String, Histogram)>,
        updates: Option<super::updates::UpdateBreakdown>,
    ) -> anyhow::Result<Vec<String>> {
        let histograms = self.tb.is_some() && self.cfg.histograms;
        let (mut fwd, hidden) = forward_probe_with_histograms(model, tokens, self.cfg.top_k, histograms);
        if let (Some(tb), true) = (&mut self.tb, histograms) {
            let hists: Vec<(&str, &Histogram)> =
                grad_histograms.iter().chain(&hidden).map(|(t, h)| (t.as_str(), h)).collect();
            tb.histograms(step, &hists)?;
        }
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
            .map(|(i, (g, s))| BlockGrad { layer: i + 1, grad_norm: *g, cv_window: s.cv_window(), cv_run: s.cv_run() })
            .collect();
        let grad_norm = t.global.recent.back().copied().unwrap_or(f64::NAN);
        let spikes_total = t.spikes.len();
        let rec =
            ProbeRecord { step, grad_norm, spikes_total, blocks, warnings: warnings.clone(), updates, forward: fwd };
        self.out.write(&rec)?;
        if let Some(tb) = &mut self.tb {
            let tags = tensorboard_tags(&rec);
            let refs: Vec<(&str, f32)> = tags.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            tb.scalars(step, &refs)?;
            tb.flush()?;
        }
        Ok(warnings)
    }

    fn warnings(&mut self, step: usize, fwd: &ForwardProbe) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(p) = fwd
            .sublayers
            .iter()
            .skip(1)
            .filter(|p| p.tau_sum > self.cfg.warn_tau)
            .max_by(|a, b| a.tau_sum.total_cmp(&b.tau_sum))
        {
            w.push(format!(
                "token alignment τ(z) = {:.3} after the residual addition of sublayer {} (rank collapse: tokens point \
                    the same way)",
                p.tau_sum, p.l
            ));
        }
        if let Some(p) = fwd.sublayers.iter().max_by(|a, b| a.z.max_abs.total_cmp(&b.z.max_abs)) {
            if let Some((at, prev)) = self.state.last_max_abs
                && p.z.max_abs > self.cfg.warn_growth * prev
                && p.z.max_abs > self.cfg.warn_max_abs
            {
                w.push(format!(
                    "max |z| grew {:.0}× since step {at}: {:.3e} at sublayer {} (exploding activations)",
                    p.z.max_abs / prev,
                    p.z.max_abs,
                    p.l
                ));
            }
            // Step 1 sees the initialisation's tiny activations; compare from the next probe on.
            if step > 1 {
                self.state.last_max_abs = Some((step, p.z.max_abs));
            }
        }
        w
    }

    /// Writes `scalars` (validation results) to TensorBoard now.
    pub fn scalars(&mut self, step: usize, scalars: &[(&str, f32)]) -> anyhow::Result<()> {
        if let Some(tb) = &mut self.tb {
            tb.scalars(step, scalars)?;
            tb.flush()?;
        }
        Ok(())
    }

    /// The state to save in a checkpoint.
    pub fn checkpoint_state(&mut self) -> anyhow::Result<ProbeState> {
        self.state.probes_bytes = self.out.durable_len()?;
        self.state.alerts_bytes = self.alerts.durable_len()?;
        if let Some(tb) = &mut self.tb {
            tb.flush()?;
        }
        Ok(self.state.clone())
    }
}

/// The TensorBoard scalars of a probe record, tagged per sublayer (`tau/l007` for τ(X_l),
/// `tau_sum/l007` for τ(z_l)).
fn tensorboard_tags(rec: &ProbeRecord) -> Vec<(String, f32)> {
    let mut tags: Vec<(String, f32)> = Vec::new();
    for p in &rec.forward.sublayers {
        let l = p.l;
        tags.push((format!("hidden_var/x/l{l:03}"), p.x.var as f32));
        tags.push((format!("hidden_var/z/l{l:03}"), p.z.var as f32));
        tags.push((format!("max_abs/z/l{l:03}"), p.z.max_abs as f32));
        tags.push((format!("massive_ratio/x/l{l:03}"), p.x.massive_ratio() as f32));
        tags.push((format!("tau/l{l:03}"), p.tau as f32));
        tags.push((format!("tau_sum/l{l:03}"), p.tau_sum as f32));
        tags.push((format!("angular_distance/l{l:03}"), p.angular_distance as f32));
        tags.extend(p.grad_norm.map(|g| (format!("grad_norm/l{l:03}"), g as f32)));
        tags.extend(p.jacobian_bound.map(|j| (format!("ln_jacobian_bound/l{l:03}"), j as f32)));
        tags.extend(p.attn_max_logit.map(|v| (format!("attn_max_logit/l{l:03}"), v as f32)));
        for (h, v) in p.attn_head_max_logit.iter().flatten().enumerate() {
            tags.push((format!("attn_head_max_logit/l{l:03}/h{h:02}"), *v as f32));
        }
        tags.extend(p.attn_entropy.map(|v| (format!("attn_entropy/l{l:03}"), v as f32)));
        tags.extend(p.attn_first_key_mass.map(|v| (format!("attn_first_key_mass/l{l:03}"), v as f32)));
        tags.extend(p.attn_gate_mean.map(|v| (format!("attn_gate_mean/l{l:03}"), v as f32)));
        tags.extend(p.saturation.map(|v| (format!("saturation/l{l:03}"), v as f32)));
        for (k, w) in p.depth_weights.iter().flatten().enumerate() {
            tags.push((format!("attn_res/weight/l{l:03}/s{k:02}"), *w as f32));
        }
        if let Some(s) = &p.streams {
            tags.push((format!("streams/spectral_norm/l{l:03}"), s.spectral_norm as f32));
            tags.push((format!("streams/row_dev/l{l:03}"), s.row_dev as f32));
            tags.push((format!("streams/col_dev/l{l:03}"), s.col_dev as f32));
            for (k, v) in s.stream_var.iter().enumerate() {
                tags.push((format!("streams/var/l{l:03}/s{k}"), *v as f32));
            }
        }
    }
    if let Some(g) = rec.forward.stream_gain {
        tags.push(("streams/gain_forward".into(), g.forward as f32));
        tags.push(("streams/gain_backward".into(), g.backward as f32));
    }
    tags.extend(rec.forward.final_saturation.map(|v| ("saturation/final".to_string(), v as f32)));
    if let Some(o) = &rec.forward.output_logits {
        tags.push(("output_logits/rms".into(), o.rms as f32));
        tags.push(("output_logits/log_z_mean".into(), o.log_z_mean as f32));
        tags.push(("output_logits/log_z_max".into(), o.log_z_max as f32));
    }
    tags.extend(rec.updates.iter().flat_map(|u| u.tags()));
    // Learned residual gates and x0-mixing λ's, by parameter (mean over a vector gate).
    for (name, s) in rec.forward.scales.iter().filter(|(n, _)| crate::model::base::names::is_residual_scale(n)) {
        tags.push((format!("residual_scale/{name}"), s.mean as f32));
    }
    tags.push(("grad/spikes_total".into(), rec.spikes_total as f32));
    tags
}
