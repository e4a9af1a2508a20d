//! Corpora and token shards written by the tools that write them (pyarrow, Python's gzip, the
//! zstandard package, numpy, modded-nanogpt's shard writer), read by `normlab data prepare`
//! and by training; normlab's shards read back by numpy; damaged files refused with one line;
//! a preparation killed mid-way resumes to byte-identical shards.
//!
//! The Python side is `tools/write_corpora.py` and `tools/check_token_shards.py` (numpy,
//! pyarrow, zstandard: the README's setup and `.ci/run` install them). Without them the tests
//! fail, naming the packages: they never pass without having run.

mod common;

use common::{Scratch, error_line};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn normlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_normlab")).args(args).output().unwrap()
}

fn tool(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools").join(name)
}

/// The corpora of `tools/write_corpora.py` (with `docs` documents) in `dir`.
fn corpora(dir: &Path, docs: usize) {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, pyarrow, zstandard"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "python3 lacks numpy, pyarrow or zstandard, which this test's corpora are written with: python3 -m pip \
         install numpy pyarrow zstandard (README, setup)"
    );
    let o = Command::new("python3")
        .arg(tool("write_corpora.py"))
        .args([dir.as_os_str(), docs.to_string().as_ref()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn prepare(corpus: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["data", "prepare", corpus.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    normlab(&args)
}

/// numpy's reading of the shards in `out` equals the tokens Python computed itself.
fn check_with_numpy(out: &Path, expected: &Path, format: &str) {
    let o = Command::new("python3")
        .arg(tool("check_token_shards.py"))
        .args([out.as_os_str(), expected.as_os_str(), "--format".as_ref(), format.as_ref()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

#[test]
fn every_format_prepares_to_the_tokens_python_computes() {
    let dir = Scratch::new("data-formats");
    corpora(&dir, 400);
    let expected = dir.join("expected.json");
    for corpus in ["docs.parquet", "docs.jsonl.gz", "docs.jsonl.zst", "docs.json"] {
        let out = dir.join(format!("npy-{corpus}"));
        let o = prepare(&dir.join(corpus), &out, &["--shard-format", "npy", "--shard-tokens", "20000"]);
        assert!(o.status.success(), "{corpus}: {}", common::stderr(&o));
        check_with_numpy(&out, &expected, "npy");
    }
    let out = dir.join("nanogpt-out");
    let o = prepare(&dir.join("docs.parquet"), &out, &["--shard-format", "nanogpt", "--shard-tokens", "20000"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    check_with_numpy(&out, &expected, "nanogpt");
    // Same input and settings: byte-identical shards.
    let again = dir.join("nanogpt-again");
    assert!(
        prepare(&dir.join("docs.parquet"), &again, &["--shard-format", "nanogpt", "--shard-tokens", "20000"])
            .status
            .success()
    );
    assert_eq!(shard_bytes(&out), shard_bytes(&again));
}

/// Every shard file of a prepared directory, by name.
fn shard_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("train-") || n.starts_with("val-"))
        .map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap()))
        .collect();
    v.sort();
    v
}

/// A 2-layer byte model trained 3 steps on `corpus`; its training losses.
fn losses(dir: &Path, name: &str, corpus: &Path, sets: &[String]) -> Vec<f64> {
    let run = dir.join("runs").join(name);
    let mut args: Vec<String> = ["train", "--quiet"].iter().map(|s| s.to_string()).collect();
    let mut all = vec![
        format!("data.corpus={}", corpus.display()),
        format!("data.cache_dir={}", dir.join("cache").display()),
        format!("run.dir={}", run.display()),
        "train.steps=3".into(),
        "train.batch_size=4".into(),
        "train.seq_len=64".into(),
        "model.d_model=32".into(),
        "model.n_layers=2".into(),
        "model.n_heads=2".into(),
        "run.eval_every=3".into(),
        "run.eval_windows=4".into(),
    ];
    all.extend_from_slice(sets);
    for s in all {
        args.extend(["--set".into(), s]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_normlab")).args(&args).output().unwrap();
    assert!(o.status.success(), "{name}: {}", common::stderr(&o));
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| v.get("loss").and_then(|l| l.as_f64()))
        .collect()
}

#[test]
fn shards_of_other_tools_train_as_the_same_tokens() {
    let dir = Scratch::new("data-shards");
    corpora(&dir, 400);
    // The streamed parquet (prepared into the cache on first use) is the reference.
    let reference = losses(&dir, "parquet", &dir.join("docs.parquet"), &[]);
    assert_eq!(reference.len(), 3);
    let nanogpt = losses(&dir, "nanogpt", &dir.join("nanogpt"), &[]);
    let npy = losses(
        &dir,
        "npy",
        &dir.join("npy/train_*.npy"),
        &[format!("data.val_corpus={}", dir.join("npy/val_*.npy").display())],
    );
    let memmap = losses(
        &dir,
        "memmap",
        &dir.join("memmap/train_*.npy"),
        &[format!("data.val_corpus={}", dir.join("memmap/val_*.npy").display()), "data.token_dtype=uint32".into()],
    );
    assert_eq!(nanogpt, reference, "nanoGPT .bin shards (val by name)");
    assert_eq!(npy, reference, "np.save shards");
    assert_eq!(memmap, reference, "np.memmap uint32 shards");
}

/// A parquet text column whose cell is null, or binary data (megabytes of it), is refused in
/// one short line naming the row, as the same JSON-lines record is: not skipped, not printed.
#[test]
fn parquet_cells_that_are_not_text_are_refused_briefly() {
    let dir = Scratch::new("data-parquet-cells");
    corpora(&dir, 10);
    let script = "import sys, pyarrow as pa, pyarrow.parquet as pq\n\
        texts = ['a document'] * 30\n\
        pq.write_table(pa.table({'text': texts[:5] + [None] + texts[5:]}), sys.argv[1] + '/null.parquet')\n\
        pq.write_table(pa.table({'text': pa.array([b'x' * (4 << 20)] * 12, pa.binary())}), sys.argv[1] + '/bin.parquet')\n";
    let o = Command::new("python3").args(["-c", script]).arg(&*dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = error_line(&prepare(&dir.join("null.parquet"), &dir.join("out-null"), &[]));
    assert!(line.contains("null.parquet row 6: column `text` is null"), "{line}");
    let line = error_line(&prepare(&dir.join("bin.parquet"), &dir.join("out-bin"), &[]));
    assert!(line.contains("bin.parquet row 1: column `text` holds binary data") && line.len() < 400, "{line}");
}

#[test]
fn damaged_files_are_one_error_line_naming_file_and_place() {
    let dir = Scratch::new("data-damaged");
    corpora(&dir, 400);
    let cases = [
        ("truncated.parquet", "not a readable parquet file"),
        ("corrupt.jsonl.zst", "zstd data is damaged"),
        ("badline.jsonl", "line 3: not valid JSON"),
    ];
    for (file, says) in cases {
        let out = dir.join(format!("out-{file}"));
        let line = error_line(&prepare(&dir.join("bad").join(file), &out, &[]));
        assert!(line.contains(file) && line.contains(says), "{file}: {line}");
        assert!(shard_bytes(&out).is_empty(), "{file}: no shard written");
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(m["complete"], false, "{file}");
    }
    let cut = dir.join("bad/cut_train_000000.bin");
    let o = normlab(&[
        "data",
        "stats",
        "--set",
        &format!("data.corpus={}", cut.display()),
        "--set",
        &format!("data.val_corpus={}", dir.join("nanogpt/docs_val_000000.bin").display()),
    ]);
    let line = error_line(&o);
    assert!(line.contains("cut_train_000000.bin") && line.contains("truncated"), "{line}");
}

#[test]
fn a_killed_preparation_resumes_to_identical_shards() {
    let dir = Scratch::new("data-resume");
    corpora(&dir, 30000);
    let corpus = dir.join("docs.jsonl.zst");
    let args = ["--tokenizer", "gpt2", "--shard-tokens", "20000"];
    let whole = dir.join("whole");
    assert!(prepare(&corpus, &whole, &args).status.success());
    let cut = dir.join("cut");
    let mut child = Command::new(env!("CARGO_BIN_EXE_normlab"))
        .args(["data", "prepare", corpus.to_str().unwrap(), "--out", cut.to_str().unwrap()])
        .args(args)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while !cut.join("train-000002.tok").exists() {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL: no clean-up of its own
    child.wait().unwrap();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cut.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["complete"], false, "killed before the end (the corpus is large enough)");
    let o = prepare(&corpus, &cut, &args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(shard_bytes(&cut), shard_bytes(&whole), "the resumed shards are the uninterrupted ones");
    let manifest = |d: &Path| std::fs::read_to_string(d.join("manifest.json")).unwrap();
    assert_eq!(manifest(&cut), manifest(&whole));
}

/// A config training a tiny byte model on a mixture of the parquet (weight 2) and the
/// `.jsonl.zst` corpus (weight 1) for `steps` steps into `run`.
fn mixture_config(dir: &Path, run: &Path, steps: usize) -> PathBuf {
    let cfg = format!(
        "[run]\ndir = \"{run}\"\neval_every = 10\neval_windows = 6\ncheckpoint_every = 10\n\n\
         [model]\nd_model = 32\nn_layers = 2\nn_heads = 2\n\n\
         [data]\ncache_dir = \"{cache}\"\n\n\
         [[data.sources]]\npath = \"{a}\"\nweight = 2.0\nname = \"web\"\n\n\
         [[data.sources]]\npath = \"{b}\"\nweight = 1.0\nname = \"books\"\n\n\
         [train]\nbatch_size = 4\nseq_len = 64\nsteps = {steps}\n",
        run = run.display(),
        cache = dir.join("cache").display(),
        a = dir.join("docs.parquet").display(),
        b = dir.join("docs.jsonl.zst").display(),
    );
    let path = dir.join(format!("{}.toml", run.file_name().unwrap().to_string_lossy()));
    std::fs::write(&path, cfg).unwrap();
    path
}

#[test]
fn a_killed_mixture_resumes_to_the_identical_curve_and_reports_each_source() {
    let dir = Scratch::new("data-mixture");
    corpora(&dir, 400);
    let whole = dir.join("whole");
    let o = normlab(&["train", "--quiet", "--config", mixture_config(&dir, &whole, 40).to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let cut = dir.join("cut");
    let cfg = mixture_config(&dir, &cut, 40);
    let mut child = Command::new(env!("CARGO_BIN_EXE_normlab"))
        .args(["train", "--quiet", "--config", cfg.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let step = |run: &Path| -> Option<u64> {
        let s = std::fs::read_to_string(run.join("status.json")).ok()?;
        serde_json::from_str::<serde_json::Value>(&s).ok()?["step"].as_u64()
    };
    while step(&cut).is_none_or(|s| s < 10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let o = normlab(&["train", "--quiet", "--resume", cut.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::metrics_without_timings(&cut), common::metrics_without_timings(&whole));
    let last = common::metrics_without_timings(&whole).into_iter().rfind(|r| r["type"] == "eval").unwrap();
    let names: Vec<&str> = last["sources"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["web", "books"]);
    let o = normlab(&["report", whole.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let md = std::fs::read_to_string(whole.join("report/report.md")).unwrap();
    assert!(md.contains("Validation loss per source") && md.contains("web loss"), "{md}");
}
