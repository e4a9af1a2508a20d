//! Helpers shared by the integration tests; each test crate uses a subset of them.
#![allow(dead_code)]

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

#[path = "../../src/testutil/planted.rs"]
mod planted;
#[path = "../../src/testutil/scratch.rs"]
mod scratch;
#[allow(unused_imports)]
pub use planted::write_planted_corpus;
pub use scratch::Scratch;

/// The records of a JSON-lines file as JSON values, without the `keys` (timings, which
/// differ from run to run; no other field may).
fn records_without(path: &Path, keys: &[&str]) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            for k in keys {
                o.remove(*k);
            }
            v
        })
        .collect()
}

/// A sweep's `results.jsonl` without the timing columns.
pub fn results_without_timings(dir: &Path) -> Vec<serde_json::Value> {
    records_without(&dir.join("results.jsonl"), &["wall_s", "tokens_per_s", "time_to_target_s"])
}

/// A run's `metrics.jsonl` records without their timing fields.
pub fn metrics_without_timings(run: &Path) -> Vec<serde_json::Value> {
    records_without(&run.join("metrics.jsonl"), &["tokens_per_s", "wall_s"])
}

/// A run's `metrics.jsonl` records of type `kind` (`train`, `eval`, `rollback`, …).
pub fn records(run: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == kind)
        .collect()
}

/// `n` numbered sentences ("Item 5 of the report concerns the east district. "): the tests'
/// small corpus, learnable within a few hundred steps.
pub fn numbered_corpus(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "Item {} of the report concerns the {} district. ",
                i % 97,
                ["north", "south", "east", "west"][i % 4]
            )
        })
        .collect()
}

/// In `root`: a corpus of numbered sentences (`corpus.txt`) and a config (`cfg.toml`) for a
/// 2-layer d=32 byte model on it training `steps` steps into `root/run`; `model` and `train`
/// are extra lines of those sections.
pub fn tiny_run(root: &Path, steps: usize, model: &str, train: &str) -> PathBuf {
    std::fs::write(root.join("corpus.txt"), numbered_corpus(4000)).unwrap();
    let cfg = format!(
        "[run]\ndir = \"{run}\"\neval_every = 10\neval_windows = 4\ncheckpoint_every = 10\n\n\
         [model]\nd_model = 32\nn_layers = 2\nn_heads = 2\n{model}\n\
         [data]\ncorpus = \"{corpus}\"\ncache_dir = \"{cache}\"\n\n\
         [train]\nbatch_size = 4\nseq_len = 32\nsteps = {steps}\n{train}\n",
        run = root.join("run").display(),
        corpus = root.join("corpus.txt").display(),
        cache = root.join("cache").display(),
    );
    let p = root.join("cfg.toml");
    std::fs::write(&p, cfg).unwrap();
    p
}

/// In `root`: a corpus of numbered sentences and a sweep file (`sweep.toml`) over `axes` (TOML
/// lines of `[sweep.axes]`) for a `n_layers`-layer d=32 byte model training `steps` steps, the
/// sweep in `root/sweep`. Returns the sweep file.
pub fn tiny_sweep(root: &Path, axes: &str, n_layers: usize, steps: usize) -> PathBuf {
    std::fs::write(root.join("corpus.txt"), numbered_corpus(3000)).unwrap();
    let text = format!(
        "[sweep]\ndir = \"{dir}\"\njobs = 1\n[sweep.axes]\n{axes}\n[model]\nd_model = 32\nn_layers = {n_layers}\n\
         n_heads = 2\n[data]\ncorpus = \"{corpus}\"\ncache_dir = \"{cache}\"\n[train]\nsteps = {steps}\n\
         batch_size = 4\nseq_len = 32\n",
        dir = root.join("sweep").display(),
        corpus = root.join("corpus.txt").display(),
        cache = root.join("cache").display()
    );
    let p = root.join("sweep.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Trains `cfg` into `run` and kills it (SIGKILL) as soon as a checkpoint past `step` exists,
/// wherever the run is then.
pub fn kill_after_a_checkpoint(cfg: &Path, run_dir: &Path, step: u64) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_normlab"))
        .args(["train", "--quiet", "--config"])
        .arg(cfg)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let latest = run_dir.join("checkpoints/latest.json");
    let t0 = std::time::Instant::now();
    loop {
        let at = std::fs::read_to_string(&latest)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["step"].as_u64());
        if at.is_some_and(|s| s >= step) {
            break;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(120), "no checkpoint appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "running", "killed before it finished");
}

/// A command's standard error as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `error:` line of a failed command (exit 2), which must be its only one, with no panic.
pub fn error_line(o: &std::process::Output) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(lines.len(), 1, "one error line: {e}");
    assert!(!e.contains("panicked"), "{e}");
    lines[0].to_string()
}

/// A server process, killed when dropped.
pub struct Served {
    child: std::process::Child,
    pub url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Sends SIGTERM and waits up to `within` for the server to exit; its exit code, `None`
    /// when it was still running (it is then killed).
    pub fn terminate(&mut self, within: std::time::Duration) -> Option<i32> {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
        let until = std::time::Instant::now() + within;
        while std::time::Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                use std::os::unix::process::ExitStatusExt;
                return status.code().or(status.signal().map(|s| 128 + s));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

/// Starts `normlab serve` on `run` with `extra` flags; waits for its address line.
pub fn serve(run: &Path, extra: &[&str]) -> Served {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_normlab"))
        .args(["serve", "--port", "0", "--checkpoint"])
        .arg(run)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let at = line.find("http://").unwrap_or_else(|| panic!("no address in {line:?}"));
    let url = line[at..].split(':').take(3).collect::<Vec<_>>().join(":");
    Served { child, url }
}
