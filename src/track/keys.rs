//! What of a run goes to the tracking server, under which names: every `metrics.jsonl` record
//! as metrics at its step (the TensorBoard tags' names where MLflow allows them), the resolved
//! config as params (dotted keys, as `--set` writes them), and the tags that find a run.

use super::mlflow::{MAX_KEY, MAX_PARAM_VALUE, Metric};
use crate::run::metrics::MetricsRecord;

/// A MoE step's routing as metrics: the two losses, then per MoE layer `moe/{i}/…` (`i` in
/// MoE-layer order).
fn moe_metrics(m: &crate::run::metrics::MoeStepRecord) -> Vec<(String, f64)> {
    let mut out = vec![("moe/balance".into(), m.balance), ("moe/router_z".into(), m.router_z)];
    let layers = m.load_cv.iter().zip(&m.entropy).zip(&m.logit_max).zip(&m.dead);
    for (i, (((cv, h), max), dead)) in layers.enumerate() {
        out.push((format!("moe/{i}/load_cv"), *cv));
        out.push((format!("moe/{i}/entropy"), *h));
        out.push((format!("moe/{i}/logit_max"), *max));
        out.push((format!("moe/{i}/dead"), *dead as f64));
    }
    out.extend(m.dropped.iter().enumerate().map(|(i, d)| (format!("moe/{i}/dropped"), *d as f64)));
    out
}

/// The metrics of one record (finite values only: JSON has no NaN, and MLflow refuses it).
pub fn metrics_of(record: &MetricsRecord, timestamp: i64) -> Vec<Metric> {
    let mut out: Vec<(String, f64)> = Vec::new();
    let step = match record {
        MetricsRecord::Train(t) => {
            out.extend([
                ("train/loss".into(), t.loss),
                ("train/ce".into(), t.ce),
                ("train/lr".into(), t.lr),
                ("train/grad_norm".into(), t.grad_norm),
                ("train/tokens".into(), t.tokens as f64),
            ]);
            out.extend(t.reg.map(|r| ("train/reg".into(), r)));
            out.extend(t.spike_score.map(|s| ("spike/SpikeScore_total".into(), s)));
            out.extend(t.z.map(|z| ("train/z".into(), z)));
            out.extend(t.update_rms.map(|u| ("train/update_rms".into(), u)));
            out.extend(t.update_ratio.map(|u| ("train/update_ratio".into(), u)));
            out.push(("train/skipped".into(), f64::from(u8::from(t.skipped.is_some()))));
            out.extend(t.moe.as_deref().map(moe_metrics).unwrap_or_default());
            out.extend(t.clip.iter().flat_map(|c| c.scalars()).map(|(k, x)| (k.to_string(), x)));
            t.step
        }
        MetricsRecord::Eval(e) => {
            out.extend([("eval/val_loss".into(), e.val_loss), ("eval/val_ppl".into(), e.val_ppl)]);
            out.extend(e.sources.iter().map(|s| (format!("eval/{}/val_loss", s.name), s.val_loss)));
            e.step
        }
        MetricsRecord::Tasks(t) => {
            for r in &t.results {
                out.extend(r.metrics.iter().map(|(m, v)| (format!("tasks/{}/{m}", r.task), v.value)));
            }
            t.step
        }
        MetricsRecord::Rollback(r) => {
            out.push(("train/rollback_to_step".into(), r.to_step as f64));
            r.step
        }
        MetricsRecord::Diverged(_) | MetricsRecord::Lost(_) => return Vec::new(),
    };
    out.into_iter()
        .filter(|(k, v)| v.is_finite() && k.len() <= MAX_KEY)
        .map(|(key, value)| Metric { key: sanitize(&key), value, timestamp, step: step as i64 })
        .collect()
}

/// A key with the characters MLflow refuses (anything but letters, digits, `_ - . / :` and
/// space) replaced by `_`.
pub fn sanitize(key: &str) -> String {
    key.chars().map(|c| if c.is_alphanumeric() || "_-./: ".contains(c) { c } else { '_' }).collect()
}

/// The config's fields as params: `model.d_model = 64`, lists and tables as TOML writes them
/// (cut to MLflow's 6000 characters).
pub fn params_of(config_toml: &str) -> anyhow::Result<Vec<(String, String)>> {
    let table: toml::Table = toml::from_str(config_toml)?;
    let mut out = Vec::new();
    flatten("", &table, &mut out);
    Ok(out.into_iter().filter(|(k, _)| k.len() <= MAX_KEY).collect())
}

fn flatten(prefix: &str, t: &toml::Table, out: &mut Vec<(String, String)>) {
    for (k, v) in t {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            // A recipe's tables stay whole: one param per recipe field is noise.
            toml::Value::Table(inner) if key != "model.recipe" => flatten(&key, inner, out),
            toml::Value::String(s) => out.push((sanitize(&key), cut(s))),
            other => out.push((sanitize(&key), cut(&other.to_string()))),
        }
    }
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_PARAM_VALUE).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::metrics::{EvalRecord, TrainRecord};

    #[test]
    fn records_become_metrics_at_their_step_without_non_finite_values() {
        let t = TrainRecord {
            step: 7,
            loss: 2.5,
            ce: 2.5,
            reg: None,
            lr: f64::NAN,
            grad_norm: 1.5,
            clipped: false,
            skipped: None,
            loss_scale: None,
            tokens: 512,
            tokens_per_s: 1.0,
            wall_s: 1.0,
            max_logit: None,
            qk_clipped: None,
            taper_gate: None,
            spike_score: Some(0.25),
            loss_spike: false,
            grad_spike: false,
            z: None,
            update_rms: None,
            update_ratio: None,
            moe: None,
            clip: None,
        };
        let m = metrics_of(&MetricsRecord::Train(t), 5);
        let keys: Vec<&str> = m.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(
            keys,
            ["train/loss", "train/ce", "train/grad_norm", "train/tokens", "spike/SpikeScore_total", "train/skipped"]
        );
        assert!(m.iter().all(|m| m.step == 7 && m.timestamp == 5));
        let e =
            EvalRecord { step: 9, val_loss: 2.0, val_ppl: 2f64.exp(), val_tokens: 10, wall_s: 0.0, sources: vec![] };
        assert_eq!(metrics_of(&MetricsRecord::Eval(e), 0)[1].value, 2f64.exp());
    }

    #[test]
    fn a_config_becomes_dotted_params() {
        let p = params_of("[model]\nd_model = 64\n[model.recipe]\npreset = \"peri\"\n[optim]\nlr = 0.003\n").unwrap();
        assert_eq!(
            p,
            [
                ("model.d_model".to_string(), "64".to_string()),
                ("model.recipe".to_string(), "{ preset = \"peri\" }".to_string()),
                ("optim.lr".to_string(), "0.003".to_string())
            ]
        );
        assert_eq!(sanitize("spike/SpikeScore (total)"), "spike/SpikeScore _total_");
    }
}
