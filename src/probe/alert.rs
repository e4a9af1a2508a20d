//! The Normalization chapter's applied-engineer monitor: an alert when the global gradient norm exceeds
//! `probe.alert_warmup_factor` (1.5 in the Normalization chapter) times its average over the warm-up, so that
//! it can drive a training-control loop.
//!
//! Every step past the warm-up whose norm is above the bar is an alert: a line of
//! `RUN/alerts.jsonl` ([`AlertRecord`]), the TensorBoard scalars `alert/grad_norm_ratio` (every
//! step) and `alert/active`, a live warning when a streak of alerts starts and ends, and, with
//! `probe.alert_command`, the record as one JSON line on the standard input of that shell
//! command (run once per alert and waited for; its failure is a warning, never fatal).

use crate::io::json::nan;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::process::{Command, Stdio};

/// One line of `alerts.jsonl`, and what the alert command reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlertRecord {
    pub step: usize,
    #[serde(deserialize_with = "nan")]
    pub grad_norm: f64,
    /// Mean global gradient norm over the warm-up steps.
    #[serde(deserialize_with = "nan")]
    pub warmup_mean: f64,
    pub factor: f64,
    /// `grad_norm / warmup_mean`.
    #[serde(deserialize_with = "nan")]
    pub ratio: f64,
}

/// The monitor's memory, kept in checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AlertState {
    pub warmup_sum: f64,
    pub warmup_steps: usize,
    /// Whether the previous step alerted (a streak is running).
    pub active: bool,
    pub total: usize,
}

/// What one step's observation produced.
#[derive(Debug, Default, PartialEq)]
pub struct Observation {
    pub record: Option<AlertRecord>,
    /// `grad_norm / warmup_mean` once the warm-up is over.
    pub ratio: Option<f64>,
    /// A live message: a streak starting or ending.
    pub message: Option<String>,
}

impl AlertState {
    /// Folds in step `step`'s norm; `warmup` is the number of warm-up steps (the schedule's, at
    /// least 1), `factor` the bar (0: off).
    pub fn observe(&mut self, step: usize, grad_norm: f64, warmup: usize, factor: f64) -> Observation {
        if factor <= 0.0 || !grad_norm.is_finite() {
            return Observation::default();
        }
        if step <= warmup.max(1) {
            self.warmup_sum += grad_norm;
            self.warmup_steps += 1;
            return Observation::default();
        }
        let mean = self.warmup_sum / self.warmup_steps.max(1) as f64;
        let ratio = grad_norm / mean;
        let alert = ratio > factor;
        let message = match (alert, self.active) {
            (true, false) => Some(format!(
                "alert: gradient norm {grad_norm:.3} is {ratio:.2}× its warm-up average {mean:.3} (bar {factor}×)"
            )),
            (false, true) => {
                Some(format!("alert over: gradient norm {grad_norm:.3} is back under {factor}× {mean:.3}"))
            }
            _ => None,
        };
        self.active = alert;
        let record = alert.then(|| {
            self.total += 1;
            AlertRecord { step, grad_norm, warmup_mean: mean, factor, ratio }
        });
        Observation { record, ratio: Some(ratio), message }
    }
}

/// Runs `command` with `sh -c`, the record as one JSON line on its standard input; a failure
/// comes back as a warning.
pub fn notify(command: &str, record: &AlertRecord) -> Option<String> {
    let line = serde_json::to_string(record).ok()? + "\n";
    let run = || -> std::io::Result<std::process::ExitStatus> {
        let mut child = Command::new("sh").arg("-c").arg(command).stdin(Stdio::piped()).spawn()?;
        let written = child.stdin.take().map(|mut s| s.write_all(line.as_bytes())).transpose();
        // A command that exits without reading its input closes the pipe first: its exit
        // status, not the broken pipe, says how it went.
        match written {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e),
            _ => {}
        }
        child.wait()
    };
    match run() {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("probe.alert_command `{command}` exited with {status}")),
        Err(e) => Some(format!("probe.alert_command `{command}` could not run: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alerts_above_the_warmup_average_with_streaks() {
        let mut s = AlertState::default();
        // Warm-up of 2 steps: norms 2 and 4, mean 3; bar 1.5 × 3 = 4.5.
        assert_eq!(s.observe(1, 2.0, 2, 1.5), Observation::default());
        assert_eq!(s.observe(2, 4.0, 2, 1.5), Observation::default());
        let o = s.observe(3, 4.5, 2, 1.5);
        assert_eq!((o.record, o.ratio), (None, Some(1.5)), "exactly at the bar is no alert");
        let o = s.observe(4, 6.0, 2, 1.5);
        assert_eq!(o.record, Some(AlertRecord { step: 4, grad_norm: 6.0, warmup_mean: 3.0, factor: 1.5, ratio: 2.0 }));
        assert!(o.message.unwrap().starts_with("alert: gradient norm 6.000 is 2.00×"));
        let o = s.observe(5, 9.0, 2, 1.5);
        assert!(o.record.is_some() && o.message.is_none(), "a running streak is not announced again");
        let o = s.observe(6, 3.0, 2, 1.5);
        assert!(o.record.is_none() && o.message.unwrap().starts_with("alert over"));
        assert_eq!(s.total, 2);
        assert_eq!(AlertState::default().observe(9, 1e9, 2, 0.0), Observation::default(), "factor 0 is off");
    }

    #[test]
    fn the_command_reads_the_record_as_a_json_line() {
        let dir = crate::testutil::temp_dir("alert-command");
        let out = dir.join("got.jsonl");
        let r = AlertRecord { step: 7, grad_norm: 3.0, warmup_mean: 1.0, factor: 1.5, ratio: 3.0 };
        assert_eq!(notify(&format!("cat >> '{}'", out.display()), &r), None);
        let got: AlertRecord = serde_json::from_str(std::fs::read_to_string(&out).unwrap().trim()).unwrap();
        assert_eq!(got, r);
        assert!(notify("exit 3", &r).unwrap().contains("exited with"));
    }
}
