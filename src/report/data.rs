//! What a report reads from a run directory.

use crate::train::run_dir::{self, Status};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub struct RunData {
    pub label: String,
    pub dir: PathBuf,
    pub train: Vec<Value>,
    pub eval: Vec<Value>,
    pub probes: Vec<Value>,
    pub status: Option<Status>,
}

fn jsonl(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p).map(|t| t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()).unwrap_or_default()
}

impl RunData {
    pub fn load(dir: &Path, label: &str) -> Self {
        let metrics = jsonl(&dir.join(run_dir::METRICS));
        Self {
            label: label.to_string(),
            dir: dir.to_path_buf(),
            train: metrics.iter().filter(|r| r["type"] == "train").cloned().collect(),
            eval: metrics.iter().filter(|r| r["type"] == "eval").cloned().collect(),
            probes: jsonl(&dir.join(crate::probe::live::PROBES)),
            status: run_dir::read_status(dir).ok().flatten(),
        }
    }

    /// `(step, value)` of a field of the train records.
    pub fn train_series(&self, field: &str) -> Vec<(f64, f64)> {
        self.train.iter().filter_map(|r| Some((r["step"].as_f64()?, r[field].as_f64()?))).collect()
    }

    pub fn eval_series(&self) -> Vec<(f64, f64)> {
        self.eval.iter().filter_map(|r| Some((r["step"].as_f64()?, r["val_loss"].as_f64()?))).collect()
    }

    /// `(l, value)` over sublayers of one probe record, for a path like `["x", "var"]`.
    pub fn per_layer(probe: &Value, path: &[&str]) -> Vec<(f64, f64)> {
        probe["sublayers"]
            .as_array()
            .map(|subs| {
                subs.iter()
                    .filter_map(|s| {
                        let v = path.iter().fold(s, |v, k| &v[*k]);
                        Some((s["l"].as_f64()?, v.as_f64()?))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn first_probe(&self) -> Option<&Value> {
        self.probes.first()
    }

    pub fn last_probe(&self) -> Option<&Value> {
        self.probes.last()
    }

    /// Up to `n` probe records evenly spread over training (first and last included).
    pub fn probe_steps(&self, n: usize) -> Vec<&Value> {
        let k = self.probes.len();
        if k <= n {
            return self.probes.iter().collect();
        }
        let mut idx: Vec<usize> = (0..n).map(|i| i * (k - 1) / (n - 1)).collect();
        idx.dedup();
        idx.into_iter().map(|i| &self.probes[i]).collect()
    }
}
