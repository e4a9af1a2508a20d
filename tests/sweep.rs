//! Sweeps as a user runs them: a sweep killed mid-run and restarted skips finished runs,
//! resumes the interrupted one, and ends with the same table as an uninterrupted sweep; the
//! report renders from a committed fixture sweep with every figure a valid PNG and SVG.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

fn temp(name: &str) -> common::Scratch {
    common::Scratch::new(&format!("sweep-{name}"))
}

fn sweep_file(root: &Path, dir: &Path) -> PathBuf {
    std::fs::write(root.join("corpus.txt"), common::numbered_corpus(3000)).unwrap();
    let cfg = format!(
        "[sweep]\ndir = \"{dir}\"\njobs = 1\ntarget_loss = 3.0\n[sweep.axes]\n\"model.recipe\" = [\"pre\", \"peri\"]\n\
         \"optim.lr\" = [3e-3, 1e-2]\n[sweep.reseed]\nseeds = [8]\n\
         [run]\neval_every = 20\neval_windows = 4\ncheckpoint_every = 10\n\
         [model]\nd_model = 32\nn_layers = 2\nn_heads = 2\n\
         [data]\ncorpus = \"{corpus}\"\ncache_dir = \"{cache}\"\n[train]\nbatch_size = 4\nseq_len = 32\nsteps = \
             120\n[probe]\nevery = 20\n",
        dir = dir.display(),
        corpus = root.join("corpus.txt").display(),
        cache = root.join("cache").display(),
    );
    let p = root.join(format!("{}.toml", dir.file_name().unwrap().to_string_lossy()));
    std::fs::write(&p, cfg).unwrap();
    p
}

/// Reads `results.csv` with a real CSV reader and checks every cell against `results.jsonl`:
/// run names contain commas, so unquoted fields would shift every column after `name`.
fn check_csv_against_jsonl(dir: &Path) {
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut reader = csv::Reader::from_path(dir.join("results.csv")).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(records.len(), rows.len(), "one CSV row per run");
    for (rec, row) in records.iter().zip(&rows) {
        assert_eq!(rec.len(), header.len(), "every row has the header's {} fields: {rec:?}", header.len());
        for (col, cell) in header.iter().zip(rec.iter()) {
            let want = match col.as_str() {
                "name" | "stage" | "state" => row[col.as_str()].clone(),
                axis if axis.contains('.') => row["axes"].get(axis).cloned().unwrap_or(serde_json::Value::Null),
                other => row[other].clone(),
            };
            match want {
                serde_json::Value::Null => assert_eq!(cell, "", "{col} of {}", row["name"]),
                serde_json::Value::String(s) => assert_eq!(cell, s, "{col}"),
                // serde_json's float parser may differ from Rust's in the last bit.
                v => {
                    let (a, b) = (cell.parse::<f64>().unwrap(), v.as_f64().unwrap());
                    assert!((a - b).abs() <= 1e-12 * b.abs(), "{col} of {}: {a} vs {b}", row["name"]);
                }
            }
        }
    }
}

fn finished(dir: &Path) -> Vec<String> {
    let runs = dir.join("runs");
    let mut v: Vec<String> = std::fs::read_dir(&runs)
        .map(|d| {
            d.flatten()
                .filter(|e| std::fs::read_to_string(e.path().join("status.json")).is_ok_and(|s| s.contains("finished")))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_killed_sweep_restarts_without_rerunning_finished_runs() {
    let root = temp("kill");
    let whole = root.join("whole");
    let o = bin().args(["sweep", "--config"]).arg(sweep_file(&root, &whole)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(common::results_without_timings(&whole).len(), 6, "4 grid runs + 2 reseeds");

    let cut = root.join("cut");
    let cfg = sweep_file(&root, &cut);
    let mut child = bin().args(["sweep", "--config"]).arg(&cfg).stderr(std::process::Stdio::null()).spawn().unwrap();
    let t0 = Instant::now();
    // Kill once one run has finished and the next has a checkpoint.
    loop {
        let done = finished(&cut);
        let second_ckpt = std::fs::read_dir(cut.join("runs")).ok().is_some_and(|d| {
            d.flatten().any(|e| {
                !done.contains(&e.file_name().to_string_lossy().into_owned())
                    && e.path().join("checkpoints/latest.json").is_file()
            })
        });
        if !done.is_empty() && second_ckpt {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the sweep made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let done_before = finished(&cut);
    assert!(done_before.len() < 6, "killed before the end");
    let stamp =
        |n: &str| std::fs::metadata(cut.join("runs").join(n).join("metrics.jsonl")).unwrap().modified().unwrap();
    let stamps: Vec<_> = done_before.iter().map(|n| stamp(n)).collect();

    let o = bin().args(["sweep", "--config"]).arg(&cfg).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{log}");
    assert!(log.contains(&format!("{} of 4 runs already done", done_before.len())), "{log}");
    assert_eq!(stamps, done_before.iter().map(|n| stamp(n)).collect::<Vec<_>>(), "finished runs were not rerun");
    assert_eq!(
        common::results_without_timings(&whole),
        common::results_without_timings(&cut),
        "the restarted sweep's table equals the uninterrupted one"
    );
    check_csv_against_jsonl(&cut);
}

#[test]
fn the_committed_fixture_csv_reads_back_as_its_jsonl() {
    check_csv_against_jsonl(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sweep"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn the_report_renders_from_a_fixture_sweep() {
    let root = temp("report");
    let dir = root.join("sweep");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sweep"), &dir);
    let o = bin().arg("report").arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.join("report");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let stems: Vec<String> =
        md.lines().filter_map(|l| l.strip_prefix("![").and_then(|l| l.split(']').next()).map(String::from)).collect();
    for must in [
        "lr_curves",
        "train_loss",
        "val_loss",
        "grad_norm",
        "hidden_var",
        "mean_abs",
        "grad_layers",
        "bhyt_scatter",
        "angular_distance",
        "final_attention_var",
        "final_attention_max",
        "final_attention_tau",
    ] {
        assert!(stems.iter().any(|s| s == must), "missing figure {must}: {stems:?}");
    }
    assert!(stems.iter().any(|s| s.starts_with("tau_")) && stems.iter().any(|s| s.starts_with("hidden_var_steps_")));
    for s in &stems {
        let png = std::fs::read(out.join(format!("{s}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{s}.png signature");
        assert_eq!(&png[12..16], b"IHDR");
        let (w, h) =
            (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
        // One chart: 960 × 540 (a legend column right of the plot); small multiples: 960 wide,
        // 300 px per row of panels.
        let grid = s == "grad_layers";
        assert!(w == 960 && (h == 540 || (grid && h % 300 == 0)), "{s}.png is {w} × {h}");
        let svg = std::fs::read_to_string(out.join(format!("{s}.svg"))).unwrap();
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{s}.svg");
    }
    assert_eq!(html.matches("<svg").count(), stems.len(), "every figure inlined: the page is self-contained");
    assert!(html.contains("<table>") && html.contains("Findings"));
    assert!(md.contains("| rank | recipe | LR*"));
    assert!(md.contains("Setup: ") && md.contains("Ranked by the mean"), "{md}");
    // The fixture has a diverged run; the table counts it.
    assert!(md.contains("| 1 / "), "{md}");
}

/// `normlab scaling` end to end on a tiny depth ladder (2, 4, 8, 16 layers × 2 recipes × 2
/// rates, reseeded): `scaling.json` has a point per recipe and depth with its non-embedding
/// count as x, LR* from the grid, both seeds' losses and the gap to the leader; a law per
/// recipe; and the report's figures.
#[test]
fn a_tiny_depth_ladder_writes_scaling_json_and_its_report() {
    let root = temp("scaling");
    let dir = root.join("sc");
    sweep_file(&root, &dir); // writes the corpus
    let sets = [
        format!("sweep.dir={}", dir.display()),
        "sweep.axes.\"optim.lr\"=[3e-3, 1e-2]".into(),
        format!("data.corpus={}", root.join("corpus.txt").display()),
        format!("data.cache_dir={}", root.join("cache").display()),
        "model.d_model=32".into(),
        "model.n_heads=2".into(),
        "train.batch_size=4".into(),
        "train.seq_len=32".into(),
        "train.tokens_per_param=0.01".into(),
    ];
    let mut cmd = bin();
    cmd.args(["scaling", "--axis", "depth", "--recipes", "pre,kitenorm", "--jobs", "2"]);
    for s in &sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scaling.json")).unwrap()).unwrap();
    check_points(s["points"].as_array().unwrap());
    let fits = s["fits"].as_array().unwrap();
    assert_eq!(fits.len(), 2);
    assert!(fits.iter().all(|f| f["points"] == 4), "{fits:?}");
    for fig in
        ["scaling_loss", "scaling_lr", "scaling_gap", "scaling_tasks", "hidden_var_smallest", "hidden_var_largest"]
    {
        let png = std::fs::read(dir.join("report").join(format!("{fig}.png"))).unwrap();
        assert_eq!(&png[..4], b"\x89PNG", "{fig}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Who leads at each point"), "{stdout}");
}

/// The ladder's points: each recipe at every depth with its LR*, two seeds, a gap to the best
/// and the built-in tasks' headlines (scaling.toml's `[eval]`), one leader per depth.
fn check_points(points: &[serde_json::Value]) {
    assert_eq!(points.len(), 8, "2 recipes × 4 depths");
    for recipe in ["pre", "kitenorm"] {
        let mine: Vec<&serde_json::Value> = points.iter().filter(|p| p["recipe"] == recipe).collect();
        let depths: Vec<f64> = mine.iter().map(|p| p["axis_value"].as_f64().unwrap()).collect();
        assert_eq!(depths, [2.0, 4.0, 8.0, 16.0]);
        for p in &mine {
            assert_eq!(p["x"].as_f64().unwrap(), p["params_non_embedding"].as_f64().unwrap());
            assert!([3e-3, 1e-2].contains(&p["lr_star"].as_f64().unwrap()), "{p}");
            assert_eq!(p["seed_losses"].as_array().unwrap().len(), 2, "the grid's seed and the reseed: {p}");
            assert!(p["gap_to_best"].as_f64().unwrap() >= 0.0);
            // scaling.toml's [eval]: each point carries the built-in tasks' headlines.
            let tasks: Vec<&str> = p["tasks"].as_array().unwrap().iter().map(|t| t["task"].as_str().unwrap()).collect();
            assert_eq!(tasks, ["sotu_words", "agreement_pairs"], "{p}");
        }
    }
    for depth in [2.0, 4.0, 8.0, 16.0] {
        let lead = points.iter().filter(|p| p["axis_value"] == depth).filter(|p| p["gap_to_best"] == 0.0).count();
        assert_eq!(lead, 1, "one leader at depth {depth}");
    }
}

/// `sweep.reseed.until_separated`: each round gives one fresh seed (one above every seed the
/// sweep used) at LR* to the methods of adjacent pairs not yet separated, best-ranked first,
/// until the budget of runs is spent; every added run is in the plan and in
/// `separation.json`. Run again, the sweep replays its rounds from the finished runs and
/// trains nothing. A Slurm sweep, which cannot wait for a round's results, is refused.
#[test]
fn seeds_are_added_until_adjacent_ranks_separate_or_the_budget_is_spent() {
    let root = temp("separate");
    let cfg =
        common::tiny_sweep(&root, "\"model.recipe\" = [\"pre\", \"post\", \"peri\"]\n\"optim.lr\" = [3e-3]", 2, 60);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text += "[sweep.reseed]\nuntil_separated = 5\n";
    std::fs::write(&cfg, text).unwrap();
    let o = bin().args(["sweep", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let dir = root.join("sweep");
    let read = |p: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(p)).unwrap()).unwrap()
    };
    let plan = read("plan.json");
    let added: Vec<&str> = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["stage"] == "separate")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let sep = read("separation.json");
    let rounds = sep["rounds"].as_array().unwrap();
    let in_rounds: Vec<&str> =
        rounds.iter().flat_map(|r| r["runs"].as_array().unwrap().iter().map(|n| n.as_str().unwrap())).collect();
    assert_eq!(added, in_rounds, "every added run is recorded in its round");
    // One seed each: no pair can be tested, so both adjacent pairs tie and all three methods
    // get seed 8 (the grid trains with seed 7).
    assert_eq!(rounds[0]["seed"], 8);
    assert_eq!(rounds[0]["ties"].as_array().unwrap().len(), 2);
    assert!(rounds[0]["ties"].as_array().unwrap().iter().all(|t| t["p"].is_null()));
    assert_eq!(rounds[0]["runs"].as_array().unwrap().len(), 3);
    assert!(added.len() <= 5 && added.iter().all(|n| n.starts_with("separate-")));
    if rounds.len() > 1 {
        assert_eq!(rounds[1]["seed"], 9);
        assert!(rounds[1]["runs"].as_array().unwrap().len() <= 2, "the budget's remaining 2 runs");
    }
    let outcome = sep["outcome"].as_str().unwrap();
    assert!(outcome.contains("budget of 5 runs is spent") || outcome.contains("separated"), "{outcome}");
    let before = common::results_without_timings(&dir);
    let o = bin().args(["sweep", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(!common::stderr(&o).contains("] separate-"), "nothing retrained: {}", common::stderr(&o));
    assert_eq!(common::results_without_timings(&dir), before);
    assert_eq!(read("separation.json"), sep);
    let o = bin().arg("report").arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let md = std::fs::read_to_string(dir.join("report/report.md")).unwrap();
    assert!(md.contains("Seeds added until adjacent ranks separate") && md.contains("vs next"), "{md}");
    let o = bin().args(["sweep", "--executor", "slurm", "--config"]).arg(&cfg).output().unwrap();
    assert!(common::error_line(&o).contains("executor = \"local\""), "{}", common::stderr(&o));
}

/// A sweep over two corpora (and rates): each corpus is a method of its own in the results'
/// groups and the report's table (its own LR*), never pooled with the other as if the two were
/// seeds of one.
#[test]
fn a_non_rate_axis_is_a_group_not_a_pool() {
    let root = temp("corpus-axis");
    let cfg = common::tiny_sweep(&root, "\"optim.lr\" = [3e-3, 1e-2]", 1, 6);
    let other = root.join("other.txt");
    std::fs::write(&other, "The quick brown fox jumps over the lazy dog. ".repeat(400)).unwrap();
    let corpus = root.join("corpus.txt");
    let axes = format!("\"data.corpus\" = [\"{}\", \"{}\"]\n\"optim.lr\"", corpus.display(), other.display());
    let text = std::fs::read_to_string(&cfg).unwrap().replacen("\"optim.lr\"", &axes, 1);
    std::fs::write(&cfg, text).unwrap();
    let o = bin().args(["sweep", "--report", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(root.join("sweep/report/report.md")).unwrap();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |")).collect();
    assert_eq!(rows.len(), 2, "one row per corpus: {md}");
    assert!(rows.iter().any(|r| r.contains("other.txt")) && rows.iter().any(|r| r.contains("corpus.txt")), "{md}");
}
