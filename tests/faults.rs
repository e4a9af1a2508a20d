//! Faults and bad input as an unlucky or hostile user meets them, each through the real
//! binary: a clear `error:` line, a clean stop, nothing lost, nothing written half.

mod common;

use common::{error_line, stderr};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

/// The shared tiny run (`common::tiny_run`) with the default recipe.
fn setup(root: &Path, steps: usize, extra: &str) -> PathBuf {
    common::tiny_run(root, steps, "", extra)
}

fn train(cfg: &Path, sets: &[&str]) -> Output {
    let mut c = bin();
    c.args(["train", "--quiet", "--config"]).arg(cfg);
    for s in sets {
        c.args(["--set", s]);
    }
    c.output().unwrap()
}

fn status(run: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("status.json")).unwrap_or_else(|_| "{}".into());
    serde_json::from_str(&text).unwrap()
}

/// Waits until `done` holds, failing after `secs`.
fn wait_for(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn checkpoint_step(run: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(run.join("checkpoints/latest.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&s).ok()?["step"].as_u64()
}

fn train_lines(run: &Path) -> usize {
    std::fs::read_to_string(run.join("metrics.jsonl")).map(|t| t.matches("\"train\"").count()).unwrap_or(0)
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// A run killed with SIGKILL once a checkpoint at step ≥ 10 exists; returns its directory.
fn killed_run(root: &Path, steps: usize) -> PathBuf {
    let cfg = setup(root, steps, "");
    let mut child = bin().args(["train", "--quiet", "--config"]).arg(&cfg).stderr(Stdio::null()).spawn().unwrap();
    let run = root.join("run");
    // The status records a checkpoint just after writing it.
    wait_for(120, "a checkpoint", || status(&run)["step"].as_u64().is_some_and(|s| s >= 10));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(status(&run)["state"], "running");
    run
}

/// The uninterrupted run of `cfg` in `root/whole`, for comparison.
fn whole_run(root: &Path, cfg: &Path) -> PathBuf {
    let whole = root.join("whole");
    let o = train(cfg, &[&format!("run.dir=\"{}\"", whole.display())]);
    assert!(o.status.success(), "{}", stderr(&o));
    whole
}

/// Item 1: a report on a run that diverged before its first validation.
#[test]
fn report_finishes_on_a_run_that_diverged_before_its_first_validation() {
    let root = common::Scratch::new("faults-report");
    let cfg = setup(&root, 50, "");
    let o = train(&cfg, &["optim.lr=1e3", "optim.grad_clip=0", "schedule.kind=constant", "schedule.warmup_fraction=0"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        !common::metrics_without_timings(&root.join("run")).iter().any(|r| r["type"] == "eval"),
        "no validation happened"
    );
    let mut child = bin().arg("report").arg(root.join("run")).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if t0.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("report still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
    assert!(root.join("run/report/report.html").is_file(), "the report was written");
}

/// Item 2: the memory check comes from the sizes, before anything is allocated.
#[test]
fn a_model_too_large_is_refused_before_it_is_built() {
    let root = common::Scratch::new("faults-memory");
    let cfg = setup(&root, 5, "");
    let line = error_line(&train(&cfg, &["model.d_model=1000000000"]));
    assert!(line.contains("needs about") && line.contains("available"), "{line}");
    assert!(!root.join("run").exists());
}

/// Item 3: a resumed run's corpus must be the one it started on.
#[test]
fn resume_refuses_a_changed_corpus_unless_allowed() {
    let root = common::Scratch::new("faults-corpus");
    let run = killed_run(&root, 400);
    let text = std::fs::read_to_string(root.join("corpus.txt")).unwrap();
    std::fs::write(root.join("corpus.txt"), text.replace("district", "ward")).unwrap();
    let o = bin().args(["train", "--quiet", "--resume"]).arg(&run).output().unwrap();
    let line = error_line(&o);
    assert!(line.contains("changed since the run started") && line.contains("--allow-corpus-change"), "{line}");
    assert_eq!(status(&run)["state"], "running", "nothing changed");
    let o = bin().args(["train", "--quiet", "--allow-corpus-change", "--resume"]).arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("corpus changed"), "{}", stderr(&o));
}

/// Item 4 (and the second tour's item 9): a truncated or deleted metrics file is refused on
/// resume, naming the loss; allowed, the run resumes without padding, the gap is recorded and
/// the report says so.
#[test]
fn a_truncated_or_deleted_metrics_file_is_refused_or_resumed_with_the_gap_recorded() {
    let root = common::Scratch::new("faults-metrics");
    let run = killed_run(&root, 400);
    let bytes = std::fs::read(run.join("metrics.jsonl")).unwrap();
    std::fs::write(run.join("metrics.jsonl"), &bytes[..bytes.len() / 3]).unwrap();
    let resume = |allow: bool| {
        let mut c = bin();
        c.args(["train", "--quiet", "--resume"]).arg(&run);
        if allow {
            c.arg("--allow-lost-records");
        }
        c.output().unwrap()
    };
    let line = error_line(&resume(false));
    assert!(line.contains("records were lost") && line.contains("--allow-lost-records"), "{line}");
    assert_eq!(std::fs::read(run.join("metrics.jsonl")).unwrap(), bytes[..bytes.len() / 3], "nothing changed");
    let o = resume(true);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("lost") && stderr(&o).contains("the gap recorded"), "{}", stderr(&o));
    let after = std::fs::read(run.join("metrics.jsonl")).unwrap();
    assert!(!after.contains(&0), "no NUL padding");
    let records = common::metrics_without_timings(&run);
    assert_eq!(records.iter().filter(|r| r["type"] == "lost").count(), 1, "the gap is recorded once");
    assert!(records.last().is_some_and(|r| r["type"] == "eval"));
    let o = bin().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(run.join("report/report.md")).unwrap();
    assert!(md.contains("were lost and the run resumed without them"), "{md}");

    let root2 = common::Scratch::new("faults-metrics-gone");
    let run = killed_run(&root2, 400);
    std::fs::remove_file(run.join("metrics.jsonl")).unwrap();
    let o = bin().args(["train", "--quiet", "--resume"]).arg(&run).output().unwrap();
    assert!(error_line(&o).contains("records were lost"));
    let o = bin().args(["train", "--quiet", "--allow-lost-records", "--resume"]).arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!std::fs::read(run.join("metrics.jsonl")).unwrap().contains(&0));
    let first = common::metrics_without_timings(&run).into_iter().find(|r| r["type"] == "train").unwrap();
    assert!(first["step"].as_u64().unwrap() > 10, "starts after the checkpoint");
}

/// A sweep file over `lrs` with `steps` steps in `root/sw`.
fn sweep_file(root: &Path, lrs: &str, steps: usize) -> PathBuf {
    setup(root, steps, "");
    let base = std::fs::read_to_string(root.join("cfg.toml")).unwrap();
    let p = root.join(format!("sweep-{}.toml", lrs.len()));
    let text = format!(
        "[sweep]\ndir = \"{}\"\n[sweep.axes]\n\"optim.lr\" = [{lrs}]\n\n{}",
        root.join("sw").display(),
        base.replace(&format!("dir = \"{}\"\n", root.join("run").display()), "")
    );
    std::fs::write(&p, text).unwrap();
    p
}

/// Item 5: a killed run makes the sweep fail, naming the signal; a second sweep on the same
/// directory is refused.
#[test]
fn a_sweep_with_a_killed_run_fails_naming_the_signal_and_a_second_sweep_is_refused() {
    let root = common::Scratch::new("faults-sweep-kill");
    let sw = sweep_file(&root, "1e-3", 100_000);
    let a = bin().args(["sweep", "--config"]).arg(&sw).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let lock = root.join("sw/runs/lr=0.001/.lock");
    wait_for(120, "the run's lock", || std::fs::read_to_string(&lock).is_ok_and(|s| !s.is_empty()));
    let second = bin().args(["sweep", "--config"]).arg(&sw).output().unwrap();
    let line = error_line(&second);
    assert!(line.contains("being run right now by another normlab process (pid"), "{line}");
    let pid: i32 = std::fs::read_to_string(&lock).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) on the sweep's child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let o = a.wait_with_output_timeout();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("killed by SIGKILL (signal 9)"), "{e}");
    assert!(e.contains("error: 1 of 1 runs did not finish"), "{e}");
    assert!(!e.contains("exit None"), "{e}");
}

trait WaitTimeout {
    fn wait_with_output_timeout(self) -> Output;
}

impl WaitTimeout for Child {
    fn wait_with_output_timeout(mut self) -> Output {
        let t0 = Instant::now();
        while self.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(120) {
                self.kill().unwrap();
                panic!("still running after 120 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.wait_with_output().unwrap()
    }
}

/// Item 6: runs are keyed by their config; names stay when the grid grows.
#[test]
fn a_rerun_sweep_refuses_changed_runs_and_keeps_names_when_the_grid_grows() {
    let root = common::Scratch::new("faults-sweep-key");
    let one = sweep_file(&root, "1e-2", 4);
    let o = bin().args(["sweep", "--config"]).arg(&one).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let weights = root.join("sw/runs/lr=0.01/model.safetensors");
    let before = std::fs::metadata(&weights).unwrap().modified().unwrap();
    let o = bin().args(["sweep", "--config"]).arg(&one).args(["--set", "train.steps=5"]).output().unwrap();
    let line = error_line(&o);
    assert!(line.contains("lr=0.01 (train.steps: 4 → 5)") && line.contains("--rerun-changed"), "{line}");
    let two = sweep_file(&root, "1e-2, 3e-2", 4);
    let o = bin().args(["sweep", "--config"]).arg(&two).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("1 of 2 runs already done"), "{}", stderr(&o));
    assert_eq!(std::fs::metadata(&weights).unwrap().modified().unwrap(), before, "the finished run is kept");
    let mut rerun = bin();
    rerun.args(["sweep", "--rerun-changed", "--config"]).arg(&two).args(["--set", "train.steps=5"]);
    let o = rerun.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(status(&root.join("sw/runs/lr=0.03"))["step"], 5);
}

/// Item 7: SIGINT and SIGTERM stop at a step's end with a checkpoint; the resumed run gives
/// the uninterrupted curve.
#[test]
fn sigint_and_sigterm_stop_with_a_checkpoint_and_resume_to_the_same_curve() {
    for (sig, code, name) in [(libc::SIGINT, 130, "SIGINT"), (libc::SIGTERM, 143, "SIGTERM")] {
        let root = common::Scratch::new(&format!("faults-signal-{code}"));
        let cfg = setup(&root, 400, "");
        let whole = whole_run(&root, &cfg);
        let run = root.join("run");
        let child = bin().args(["train", "--quiet", "--config"]).arg(&cfg).stderr(Stdio::piped()).spawn().unwrap();
        wait_for(120, "15 steps", || train_lines(&run) >= 15);
        signal(&child, sig);
        let o = child.wait_with_output_timeout();
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        let st = status(&run);
        assert_eq!((st["state"].as_str(), st["signal"].as_str()), (Some("stopped"), Some(name)));
        assert_eq!(checkpoint_step(&run), st["step"].as_u64(), "a checkpoint of the step it stopped at");
        assert!(st["step"].as_u64().unwrap() < 400);
        let o = bin().args(["train", "--quiet", "--resume"]).arg(&run).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(common::metrics_without_timings(&whole), common::metrics_without_timings(&run));
    }
    // A second Ctrl-C ends the process at once.
    let root = common::Scratch::new("faults-signal-twice");
    let cfg = setup(&root, 100_000, "");
    let child = bin().args(["train", "--quiet", "--config"]).arg(&cfg).stderr(Stdio::null()).spawn().unwrap();
    wait_for(120, "a step", || train_lines(&root.join("run")) >= 2);
    signal(&child, libc::SIGINT);
    signal(&child, libc::SIGINT);
    let t0 = Instant::now();
    let o = child.wait_with_output_timeout();
    assert_eq!(o.status.code(), Some(130));
    assert!(t0.elapsed() < Duration::from_secs(10));
}

/// Item 8: a closed pipe ends the output, not the program.
#[test]
fn a_closed_pipe_ends_the_output_not_the_program() {
    // Far more than a pipe's buffer: the writes after the reader leaves fail with EPIPE.
    let mut child =
        bin().args(["recipes", "--layers", "400"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(!first.is_empty());
    let o = child.wait_with_output_timeout();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));

    let root = common::Scratch::new("faults-pipe");
    let cfg = setup(&root, 30, "");
    let mut child = bin().args(["train", "--config"]).arg(&cfg).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let o = child.wait_with_output_timeout();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(status(&root.join("run"))["state"], "finished");
}

/// Item 9: a run killed while writing its final weights records its final validation once.
#[test]
fn a_run_killed_during_its_final_write_records_one_final_validation() {
    let root = common::Scratch::new("faults-final");
    let cfg = setup(&root, 20, "");
    let o = train(&cfg, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = root.join("run");
    let before = common::metrics_without_timings(&run);
    // What a kill inside the final model.safetensors write leaves: the final checkpoint, the
    // status still running, no final weights.
    std::fs::remove_file(run.join("model.safetensors")).unwrap();
    std::fs::write(run.join("status.json"), r#"{"state":"running","step":20,"total_steps":20}"#).unwrap();
    let o = bin().args(["train", "--quiet", "--resume"]).arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(common::metrics_without_timings(&run), before);
    assert_eq!(
        common::metrics_without_timings(&run).iter().filter(|r| r["type"] == "eval" && r["step"] == 20).count(),
        1
    );
    assert!(run.join("model.safetensors").is_file());
}

/// Item 10: a token cache changed on disk is detected and rebuilt.
#[test]
fn a_corrupt_token_cache_is_rebuilt() {
    let root = common::Scratch::new("faults-cache");
    let cfg = setup(&root, 10, "");
    assert!(train(&cfg, &[]).status.success());
    let whole = common::metrics_without_timings(&root.join("run"));
    let tokens = root.join("cache/tokens");
    let file =
        std::fs::read_dir(&tokens).unwrap().flatten().find(|e| e.path().to_string_lossy().ends_with("-train.bin"));
    let path = file.unwrap().path();
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().skip(100).step_by(7).take(50) {
        *b = 0xff;
    }
    std::fs::write(&path, &bytes).unwrap();
    let o = train(&cfg, &[&format!("run.dir=\"{}\"", root.join("again").display())]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("checksum") && stderr(&o).contains("tokenizing again"), "{}", stderr(&o));
    assert_eq!(common::metrics_without_timings(&root.join("again")), whole);
    let leftovers =
        std::fs::read_dir(&*root).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains(".creating-"));
    assert_eq!(leftovers.count(), 0);
}

/// Item 11: the same config twice gives byte-identical weights and checkpoints.
#[test]
fn identical_runs_write_identical_files() {
    let root = common::Scratch::new("faults-determinism");
    let cfg = setup(&root, 20, "");
    for dir in ["a", "b"] {
        assert!(train(&cfg, &[&format!("run.dir=\"{}\"", root.join(dir).display())]).status.success());
    }
    for f in ["model.safetensors", "checkpoints/step-000010/model.safetensors", "checkpoints/step-000010/optimizer.bpk"]
    {
        let (a, b) = (std::fs::read(root.join("a").join(f)).unwrap(), std::fs::read(root.join("b").join(f)).unwrap());
        assert!(a == b, "{f} differs between identical runs");
    }
    assert_eq!(common::metrics_without_timings(&root.join("a")), common::metrics_without_timings(&root.join("b")));
}

/// Item 12: deleting `.lock` lets no second writer in, and the refusal names the holder.
#[test]
fn deleting_the_lock_file_lets_no_second_writer_in() {
    let root = common::Scratch::new("faults-lock");
    let cfg = setup(&root, 100_000, "");
    let run = root.join("run");
    let mut child = bin().args(["train", "--quiet", "--config"]).arg(&cfg).stderr(Stdio::null()).spawn().unwrap();
    wait_for(120, "a checkpoint", || checkpoint_step(&run).is_some());
    std::fs::remove_file(run.join(".lock")).unwrap();
    let o = bin().args(["train", "--quiet", "--resume"]).arg(&run).output().unwrap();
    let line = error_line(&o);
    assert!(line.contains(&format!("(pid {})", child.id())), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Item 13: an interrupted creation leaves nothing behind, and a run whose checkpoints were
/// deleted is refused with nothing deleted.
#[test]
fn abandoned_creations_are_cleared_and_a_run_without_its_checkpoints_is_refused() {
    let root = common::Scratch::new("faults-create");
    let abandoned = root.join(".run.creating-999999");
    std::fs::create_dir_all(abandoned.join("checkpoints")).unwrap();
    let run = killed_run(&root, 400);
    assert!(!abandoned.exists(), "the abandoned temporary is removed");
    std::fs::remove_dir_all(run.join("checkpoints")).unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into()).collect();
        v.sort();
        v
    };
    let before = listing(&run);
    let line = error_line(&bin().args(["train", "--quiet", "--resume"]).arg(&run).output().unwrap());
    assert!(line.contains("has no checkpoint although") && line.contains("nothing was changed"), "{line}");
    assert_eq!(listing(&run), before);
}

/// A sweep killed while creating one of its runs leaves a `.NAME.creating-PID` directory; a
/// rerun that finds every run done still removes it.
#[test]
fn a_rerun_sweep_clears_the_creations_a_kill_left() {
    let root = common::Scratch::new("faults-sweep-create");
    let cfg = common::tiny_sweep(&root, "\"optim.lr\" = [3e-3]", 1, 4);
    let o = bin().args(["sweep", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = root.join("sweep").join("runs");
    let abandoned = runs.join(".lr=0.003.creating-999999");
    std::fs::create_dir_all(abandoned.join("checkpoints")).unwrap();
    let o = bin().args(["sweep", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("already done"), "{}", stderr(&o));
    assert!(!abandoned.exists(), "the abandoned temporary is removed");
}

/// Item 14: messages that name the problem and its fix: in configs and flags.
#[test]
fn messages_about_configs_and_flags_name_the_problem_and_the_fix() {
    let root = common::Scratch::new("faults-messages");
    let cfg = setup(&root, 10, "");
    // An unknown key in a sweep file: its line.
    let sw = sweep_file(&root, "1e-2", 10);
    let text = std::fs::read_to_string(&sw).unwrap().replace("n_layers = 2", "n_layerz = 2");
    std::fs::write(&sw, &text).unwrap();
    let line = error_line(&bin().args(["sweep", "--config"]).arg(&sw).output().unwrap());
    let n = text.lines().position(|l| l.starts_with("n_layerz")).unwrap() + 1;
    assert!(line.contains(&format!("(line {n}: `n_layerz = 2`)")), "{line}");
    // A bad --set is blamed on the --set.
    let line = error_line(&train(&cfg, &["train.steps=abc"]));
    assert!(line.starts_with("error: --set `train.steps=abc`"), "{line}");
    // --temperature -1 is a value to refuse, not an unknown flag.
    for t in ["-1", "inf", "nan"] {
        let line = error_line(&bin().args(["generate", "--checkpoint", "x", "--temperature", t]).output().unwrap());
        assert!(
            line.contains("--temperature must be a finite number ≥ 0") && line.to_lowercase().ends_with(t),
            "{line}"
        );
    }
    // A TSV line with three columns.
    std::fs::write(root.join("p.tsv"), "1 kg\tone kilogram\n2 kg\ttwo\tkilograms\n").unwrap();
    let tsv = format!("data.corpus=\"{}\"", root.join("p.tsv").display());
    let line = error_line(&train(&cfg, &[&tsv, "data.task=pairs"]));
    assert!(line.contains("p.tsv:2") && line.contains("3 columns"), "{line}");
}

/// Item 14: messages that name the problem and its fix: on runs and imports.
#[test]
fn messages_about_runs_and_imports_name_the_problem_and_the_fix() {
    let root = common::Scratch::new("faults-messages-runs");
    let cfg = setup(&root, 10, "");
    // generate on a run that diverged before its first checkpoint.
    let o = train(&cfg, &["optim.lr=1e3", "optim.grad_clip=0", "schedule.kind=constant", "schedule.warmup_fraction=0"]);
    assert_eq!(o.status.code(), Some(3));
    let line = error_line(&bin().args(["generate", "--checkpoint"]).arg(root.join("run")).output().unwrap());
    assert!(line.contains("diverged at step") && !line.contains("train longer"), "{line}");
    // import: --force exists and replaces; a damaged tokenizer.json is not to be deleted.
    let hf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/llama");
    let out = root.join("imported");
    let import = |force: bool| {
        let mut c = bin();
        c.arg("import")
            .arg(&hf)
            .arg("--out")
            .arg(&out)
            .args(["--set", &format!("data.corpus=\"{}\"", root.join("corpus.txt").display())]);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    assert!(import(false).status.success());
    let line = error_line(&import(false));
    assert!(line.contains("--force"), "{line}");
    assert!(import(true).status.success(), "the --force it suggests is accepted");
    let damaged = root.join("hf-damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    for e in std::fs::read_dir(&hf).unwrap().flatten() {
        std::fs::copy(e.path(), damaged.join(e.file_name())).unwrap();
    }
    std::fs::write(damaged.join("tokenizer.json"), "{\"model\": 3}").unwrap();
    let o = bin().arg("import").arg(&damaged).arg("--out").arg(root.join("imp2")).output().unwrap();
    let line = error_line(&o);
    assert!(line.contains("copy its tokenizer.json again") && !line.contains("delete it"), "{line}");
}

/// Item 14: two fresh runs racing for one directory: one trains, the other gets the lock's or
/// the existing run's message, never a file-system error.
#[test]
fn two_fresh_runs_racing_get_a_clear_refusal() {
    let root = common::Scratch::new("faults-race");
    let cfg = setup(&root, 30, "");
    let start = || bin().args(["train", "--quiet", "--config"]).arg(&cfg).stderr(Stdio::piped()).spawn().unwrap();
    let (a, b) = (start(), start());
    let (a, b) = (a.wait_with_output_timeout(), b.wait_with_output_timeout());
    let (ok, refused) = if a.status.success() { (a, b) } else { (b, a) };
    assert!(ok.status.success(), "{}", stderr(&ok));
    let line = error_line(&refused);
    assert!(line.contains("being trained right now") || line.contains("already holds a run"), "{line}");
    assert!(!line.contains("Directory not empty"), "{line}");
}
