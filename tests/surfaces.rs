//! The third fault tour, each case through the real binary: data preparation, evaluation and
//! the server never hang, never score wrong in silence and never lose a run. (The first tour is
//! `tests/faults.rs`, the second `tests/trust.rs`.)

mod common;

use common::{Scratch, error_line, stderr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

/// Waits up to `secs` for `child`; its output, or `None` (and the child killed) when it hangs.
fn output_within(mut child: Child, secs: f64) -> Option<Output> {
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A JSON-lines corpus of `docs` documents of about 18 kB each, their numbers varied so that
/// tokenizing takes its real time, in `dir/corpus.jsonl`.
fn big_corpus(dir: &Path, docs: usize) -> PathBuf {
    let districts = ["north", "south", "east", "west"];
    let mut text = String::new();
    for d in 0..docs {
        let doc: String = (0..300)
            .map(|k| {
                let (a, b) = ((d * 300 + k) * 7919 % 1_000_003, k * 31337 % 99_991);
                format!("Item {a} of the report {b} concerns the {} district. ", districts[k % 4])
            })
            .collect();
        text += &serde_json::json!({ "text": doc }).to_string();
        text.push('\n');
    }
    let p = dir.join("corpus.jsonl");
    std::fs::write(&p, text).unwrap();
    p
}

fn prepare(corpus: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = bin();
    c.args(["data", "prepare"]).arg(corpus).arg("--out").arg(out).args(extra);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Item 1: the first SIGINT or SIGTERM stops `data prepare` with its one `error:` line (how
/// many shards are complete), within seconds; the same command then completes the preparation.
#[test]
fn data_prepare_stops_on_the_first_signal() {
    let dir = Scratch::new("surfaces-prepare-signal");
    let corpus = big_corpus(&dir, 2000);
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let out = dir.join(name);
        let args = ["--tokenizer", "gpt2", "--shard-tokens", "20000"];
        let child = prepare(&corpus, &out, &args).spawn().unwrap();
        let t0 = Instant::now();
        while !out.join("train-000001.tok").exists() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = output_within(child, 30.0).unwrap_or_else(|| panic!("data prepare hung after {name}"));
        let line = error_line(&o);
        assert!(line.contains(&format!("stopped by {name}")) && line.contains("shards are complete"), "{line}");
        let again = prepare(&corpus, &out, &args).output().unwrap();
        assert!(again.status.success(), "{}", stderr(&again));
    }
}

/// Item 1: a shard that cannot be written (here: past the file-size limit, the same failure
/// path as a full disk) ends `data prepare` with one `error:` line naming the file, not a hang.
#[test]
fn data_prepare_names_a_shard_it_cannot_write() {
    let dir = Scratch::new("surfaces-prepare-write");
    let corpus = big_corpus(&dir, 400);
    let out = dir.join("out");
    let mut c = prepare(&corpus, &out, &["--shard-tokens", "1000000"]);
    // SAFETY: setrlimit and signal in the child between fork and exec: async-signal-safe calls.
    unsafe {
        c.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 512 << 10, rlim_max: 512 << 10 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let o = output_within(c.spawn().unwrap(), 60.0).expect("data prepare hung on a failed write");
    let line = error_line(&o);
    assert!(line.contains("File too large") && line.contains("train-000000"), "{line}");
}
