//! SpikeScore and rollback through the binary, on a corpus with a planted spike
//! (`common::write_planted_corpus`: a repeated sentence with a stretch of random bytes, so that
//! the rare batches that draw from it spike the loss and the gradient norm).
//!
//! The SpikeScore check recomputes every step's flags and score from the logged losses and
//! gradient norms with OLMo-core's rule, written here from its `StabilityMonitorCallback`
//! (olmo_core/train/callbacks/stability_monitor.py), not from normlab's code.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

/// A 2-layer d=32 byte model on the planted corpus for 400 steps into `root/NAME`, with
/// `extra` TOML appended (a `[train.rollback]` table). The divergence rule is relaxed: the
/// planted batches would otherwise end the run.
fn config(root: &Path, name: &str, extra: &str) -> PathBuf {
    let corpus = root.join("corpus.txt");
    if !corpus.exists() {
        common::write_planted_corpus(&corpus);
    }
    let text = format!(
        "[run]\ndir = \"{run}\"\neval_every = 100\neval_windows = 4\ncheckpoint_every = 25\nkeep_checkpoints = 20\n\
         [model]\nd_model = 32\nn_layers = 2\nn_heads = 2\n\
         [data]\ncorpus = \"{corpus}\"\ncache_dir = \"{cache}\"\n\
         [train]\nbatch_size = 4\nseq_len = 32\nsteps = 400\ndivergence_factor = 1000.0\n{extra}",
        run = root.join(name).display(),
        corpus = corpus.display(),
        cache = root.join("cache").display(),
    );
    let p = root.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn train(cfg: &Path) -> std::process::Output {
    let o = bin().args(["train", "--quiet", "--config"]).arg(cfg).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    o
}

/// OLMo-core's `StabilityMonitorCallback` with its defaults (window 128, 6σ): `_is_spike`
/// needs a full window, takes the population deviation and ignores σ < 1e-10; a step with
/// either spike counts once; `SpikeScore (total)` is spikes / steps once 128 steps are seen.
#[derive(Default)]
struct Olmo {
    loss: Vec<f64>,
    grad: Vec<f64>,
    steps: usize,
    spikes: usize,
}

impl Olmo {
    fn is_spike(value: f64, history: &[f64]) -> bool {
        if history.len() < 128 {
            return false;
        }
        let mean = history.iter().sum::<f64>() / history.len() as f64;
        let var = history.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / history.len() as f64;
        let std = var.sqrt();
        std >= 1e-10 && value > mean + 6.0 * std
    }

    fn push(history: &mut Vec<f64>, v: f64) {
        history.push(v);
        if history.len() > 128 {
            history.remove(0);
        }
    }

    /// (loss spike, grad spike, SpikeScore (total)) of one logged step.
    fn step(&mut self, loss: f64, grad: f64) -> (bool, bool, Option<f64>) {
        let (ls, gs) = (Self::is_spike(loss, &self.loss), Self::is_spike(grad, &self.grad));
        Self::push(&mut self.loss, loss);
        Self::push(&mut self.grad, grad);
        self.steps += 1;
        self.spikes += usize::from(ls || gs);
        (ls, gs, (self.steps >= 128).then(|| self.spikes as f64 / self.steps as f64))
    }
}

#[test]
fn spike_score_is_olmo_cores_on_a_planted_spike() {
    let root = common::Scratch::new("stability-score");
    let run = root.join("plain");
    train(&config(&root, "plain", ""));
    let mut olmo = Olmo::default();
    let mut spikes = 0;
    for r in common::records(&run, "train") {
        let (ls, gs, score) = olmo.step(r["ce"].as_f64().unwrap(), r["grad_norm"].as_f64().unwrap());
        let step = &r["step"];
        assert_eq!(r["loss_spike"].as_bool().unwrap_or(false), ls, "loss spike at step {step}");
        assert_eq!(r["grad_spike"].as_bool().unwrap_or(false), gs, "grad spike at step {step}");
        assert_eq!(r["spike_score"].as_f64(), score, "SpikeScore at step {step}");
        spikes += usize::from(ls || gs);
    }
    assert!(spikes >= 2, "the planted stretch gives spikes: {spikes}");
    let o = bin().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let md = std::fs::read_to_string(run.join("report/report.md")).unwrap();
    let want = format!("{:.4}", spikes as f64 / 400.0);
    assert!(md.contains("SpikeScore") && md.contains(&want), "the report's SpikeScore {want}:\n{md}");
}

/// The rollback run equals the plain run up to the checkpoint it goes back to; the rollback
/// names the window's spikes as the plain run logged them, goes back to the newest checkpoint
/// before the first, skips the batches since and continues at half the rate.
#[test]
fn a_rollback_goes_back_to_the_checkpoint_before_the_spikes_at_half_the_rate() {
    let root = common::Scratch::new("stability-rollback");
    let rule = "[train.rollback]\nspikes = 2\nwithin = 100\nlr_factor = 0.5\nmax = 2\n";
    train(&config(&root, "plain", ""));
    let out = train(&config(&root, "rolled", rule));
    let (plain, rolled) = (root.join("plain"), root.join("rolled"));
    let all: Vec<Value> = std::fs::read_to_string(rolled.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = all.iter().position(|r| r["type"] == "rollback").expect("a rollback");
    let rb = &all[at];
    let (step, to) = (rb["step"].as_u64().unwrap() as usize, rb["to_step"].as_u64().unwrap() as usize);
    let plain_train = common::records(&plain, "train");
    let spike_steps: Vec<usize> = plain_train
        .iter()
        .filter(|r| r["loss_spike"] == true || r["grad_spike"] == true)
        .map(|r| r["step"].as_u64().unwrap() as usize)
        .filter(|&s| s <= step && s + 100 > step)
        .collect();
    let named: Vec<usize> =
        rb["spikes"].as_array().unwrap().iter().map(|s| s["step"].as_u64().unwrap() as usize).collect();
    assert_eq!(named, spike_steps, "the window's spikes as the plain run logged them");
    assert_eq!(spike_steps.len(), 2);
    assert_eq!(to, (spike_steps[0] - 1) / 25 * 25, "the newest checkpoint before the first spike");
    assert_eq!(rb["skipped_steps"].as_u64(), Some((step - to) as u64));
    assert_eq!(rb["lr_scale"].as_f64(), Some(0.5));
    let timeless = |r: &Value| {
        let mut r = r.clone();
        r.as_object_mut().unwrap().retain(|k, _| k != "wall_s" && k != "tokens_per_s");
        r
    };
    let before: Vec<Value> = all[..at].iter().filter(|r| r["type"] == "train").map(timeless).collect();
    let same: Vec<Value> = plain_train[..to].iter().map(timeless).collect();
    assert_eq!(before, same, "identical up to the checkpoint it went back to");
    // The first training step after the rollback (or after a second one that came at once).
    let next = at + all[at..].iter().position(|r| r["type"] == "train").unwrap();
    let last = &all[next - 1];
    let (to, scale) = (last["to_step"].as_u64().unwrap() as usize, last["lr_scale"].as_f64().unwrap());
    assert_eq!(all[next]["step"].as_u64(), Some(to as u64 + 1), "training goes on from the checkpoint");
    let (lr, plain_lr) = (all[next]["lr"].as_f64().unwrap(), plain_train[to]["lr"].as_f64().unwrap());
    assert!((lr - scale * plain_lr).abs() <= 1e-12 * plain_lr, "the rate × {scale}: {lr} vs {plain_lr}");
    assert_ne!(all[next]["ce"], plain_train[to]["ce"], "other batches than the plain run's step {}", to + 1);
    let said = format!("{step}: 2 spikes within the rollback window; back to the checkpoint of step {}", rb["to_step"]);
    assert!(common::stderr(&out).contains(&said), "{}", common::stderr(&out));
    let o = bin().arg("report").arg(&rolled).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let md = std::fs::read_to_string(rolled.join("report/report.md")).unwrap();
    assert!(md.contains("Rollbacks after repeated spikes"), "{md}");
}

#[test]
fn a_rollback_without_checkpoints_is_refused() {
    let root = common::Scratch::new("stability-refused");
    let cfg = config(&root, "r", "[train.rollback]\nspikes = 2\n");
    let o = bin()
        .args(["train", "--quiet", "--config"])
        .arg(&cfg)
        .args(["--set", "run.checkpoint_every=0"])
        .output()
        .unwrap();
    let e = common::error_line(&o);
    assert!(e.contains("run.checkpoint_every"), "{e}");
}

/// Spikes that call for a rollback with no checkpoint before them are said once, not at every
/// step they stay inside the window.
#[test]
fn a_rollback_with_no_checkpoint_before_the_spikes_is_said_once() {
    let root = common::Scratch::new("stability-unmet");
    let cfg = config(&root, "r", "[train.rollback]\nspikes = 2\nwithin = 100\nlr_factor = 0.5\nmax = 2\n");
    let o = bin()
        .args(["train", "--quiet", "--config"])
        .arg(&cfg)
        .args(["--set", "run.checkpoint_every=390"])
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    let firsts: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no checkpoint precedes the first"))
        .map(|l| l.split("(step ").nth(1).unwrap_or_default())
        .collect();
    assert!(!firsts.is_empty(), "the planted spikes call for a rollback: {err}");
    let mut distinct = firsts.clone();
    distinct.dedup();
    assert_eq!(firsts, distinct, "each first spike said once: {err}");
}
