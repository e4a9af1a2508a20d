//! Live progress: an indicatif bar (step, loss, lr, grad norm, tokens/s, ETA) on a terminal;
//! plain log lines with `--quiet` or when stderr is not a terminal.

use crate::run::metrics::{EvalRecord, TrainRecord};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
    log_every: usize,
    /// Smoothed tokens/s for display.
    rate: Option<f64>,
    /// The latest probe warning, shown in the bar.
    warning: Option<String>,
    /// Prints nothing: a rank other than 0 of a job over several processes.
    silent: bool,
    /// Train FLOPs per token and the device's stated peak (FLOP/s), when MFU is shown.
    mfu: Option<(f64, f64)>,
}

impl Progress {
    pub fn new(total: usize, start: usize, quiet: bool) -> Self {
        let log_every = (total / 20).max(1);
        if quiet || !std::io::stderr().is_terminal() {
            return Self { bar: None, log_every, rate: None, warning: None, silent: false, mfu: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr_with_hz(4));
        bar.set_style(
            ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} {msg} [{elapsed_precise} < {eta_precise}]")
                .unwrap()
                .progress_chars("█▉▊▋▌▍▎▏ "),
        );
        bar.set_position(start as u64);
        bar.reset_eta();
        Self { bar: Some(bar), log_every, rate: None, warning: None, silent: false, mfu: None }
    }

    /// Progress that prints nothing (the ranks that do not write the run).
    pub fn silent() -> Self {
        Self { bar: None, log_every: usize::MAX, rate: None, warning: None, silent: true, mfu: None }
    }

    /// Shows the model FLOPs utilisation beside tokens/s: `flops_per_token` (`device::peak`)
    /// at the smoothed rate over `peak_tflops`.
    pub fn with_mfu(self, flops_per_token: f64, peak_tflops: f64) -> Self {
        Self { mfu: Some((flops_per_token, peak_tflops * 1e12)), ..self }
    }

    pub fn step(&mut self, r: &TrainRecord) {
        let rate = match self.rate {
            Some(old) => 0.9 * old + 0.1 * r.tokens_per_s,
            None => r.tokens_per_s,
        };
        self.rate = Some(rate);
        let msg = self.message(r, rate);
        match &self.bar {
            Some(b) => {
                b.set_position(r.step as u64);
                b.set_message(msg);
            }
            None if !self.silent && (r.step.is_multiple_of(self.log_every) || r.step == 1) => {
                crate::io::term::err(format_args!("step {:>6}  {msg}", r.step))
            }
            None => {}
        }
    }

    /// A step's line: loss, lr, grad norm, regulariser, tokens/s at `rate`, MFU, warning.
    fn message(&self, r: &TrainRecord, rate: f64) -> String {
        let msg = format!(
            "loss {:.4} lr {:.2e} gnorm {:.3}{} {:.0} tok/s{}",
            r.loss,
            r.lr,
            r.grad_norm,
            r.reg.map(|v| format!(" reg {v:.3e}")).unwrap_or_default(),
            rate,
            self.mfu.map(|(f, peak)| format!(" MFU {:.1}%", 100.0 * f * rate / peak)).unwrap_or_default()
        );
        match &self.warning {
            Some(w) => format!("{msg} ⚠ {w}"),
            None => msg,
        }
    }

    /// An early warning from the probes: printed above the bar and kept in its message.
    pub fn warn(&mut self, msg: &str) {
        self.println(&format!("warning: {msg}"));
        self.warning = Some(msg.chars().take(60).collect());
    }

    pub fn eval(&self, r: &EvalRecord) {
        self.println(&format!("step {:>6}  val loss {:.4}  val ppl {:.2}", r.step, r.val_loss, r.val_ppl));
    }

    pub fn println(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None if self.silent => {}
            None => crate::io::term::err(format_args!("{msg}")),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 6e8 FLOPs a token at 50 000 tokens/s is 3e13 FLOP/s: 3.0 % of a 1000 TFLOP/s peak.
    #[test]
    fn the_line_shows_mfu_when_the_peak_is_known() {
        let r = TrainRecord {
            step: 1,
            loss: 2.0,
            ce: 2.0,
            reg: None,
            lr: 1e-3,
            grad_norm: 0.5,
            clipped: false,
            skipped: None,
            loss_scale: None,
            tokens: 4096,
            tokens_per_s: 50_000.0,
            wall_s: 1.0,
            max_logit: None,
            qk_clipped: None,
            taper_gate: None,
            spike_score: None,
            loss_spike: false,
            grad_spike: false,
            z: None,
            update_rms: None,
            update_ratio: None,
            moe: None,
            clip: None,
        };
        let p = Progress::silent();
        assert!(!p.message(&r, 50_000.0).contains("MFU"));
        let p = p.with_mfu(6e8, 1000.0);
        assert!(p.message(&r, 50_000.0).ends_with("50000 tok/s MFU 3.0%"), "{}", p.message(&r, 50_000.0));
    }
}
