//! A sweep through a real Slurm (a one-node cluster on localhost, `tools/slurm-local.sh`, which
//! `.ci/run` starts): one array task is cancelled with `scancel` while its run trains, the
//! reseed planner refuses to plan on an incomplete grid, the sweep is submitted again, and the
//! results equal the local runner's. Without `NORMLAB_SLURM_TEST=1` (no Slurm here) the test
//! says so and does nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn sweep_file(root: &Path, name: &str) -> PathBuf {
    let corpus = root.join("corpus.txt");
    if !corpus.exists() {
        std::fs::write(&corpus, common::numbered_corpus(3000)).unwrap();
    }
    let cfg = format!(
        "[sweep]\ndir = \"{dir}\"\njobs = 2\ntarget_loss = 3.0\n[sweep.axes]\n\"model.recipe\" = [\"pre\", \"peri\"]\n\
         \"optim.lr\" = [3e-3, 1e-2]\n[sweep.reseed]\nseeds = [8]\n[sweep.slurm]\npoll_seconds = 1\n\
         [run]\neval_every = 20\neval_windows = 4\ncheckpoint_every = 10\n\
         [model]\nd_model = 32\nn_layers = 2\nn_heads = 2\n\
         [data]\ncorpus = \"{corpus}\"\ncache_dir = \"{cache}\"\n[train]\nbatch_size = 4\nseq_len = 32\nsteps = 200\n\
         [probe]\nevery = 20\n",
        dir = root.join(name).display(),
        corpus = corpus.display(),
        cache = root.join("cache").display(),
    );
    let p = root.join(format!("{name}.toml"));
    std::fs::write(&p, cfg).unwrap();
    p
}

fn squeue(job: &str) -> Vec<(String, String)> {
    let o = Command::new("squeue").args(["-h", "-o", "%i %T", "-j", job]).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.into(), b.into()))
        .collect()
}

fn jobs(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("slurm/jobs.json")).unwrap()).unwrap()
}

/// Cancels a running grid task whose run has a checkpoint; returns the run's name.
fn cancel_a_running_task(dir: &Path) -> String {
    let grid = jobs(dir)["submissions"][0]["job_id"].as_str().unwrap().to_string();
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let t0 = Instant::now();
    loop {
        for (task, state) in squeue(&grid) {
            let Some(i) = task.strip_prefix(&format!("{grid}_")).and_then(|i| i.parse::<usize>().ok()) else {
                continue;
            };
            let name = plan["runs"][i]["name"].as_str().unwrap().to_string();
            if state == "RUNNING" && dir.join("runs").join(&name).join("checkpoints/latest.json").is_file() {
                assert!(Command::new("scancel").arg(&task).status().unwrap().success());
                return name;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(180), "no grid task reached a checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs a Slurm: eval \"$(tools/slurm-local.sh start)\", then cargo test --release --test slurm -- --ignored (.ci/run does)"]
fn a_sweep_through_slurm_survives_scancel_and_equals_the_local_runner() {
    assert!(
        std::env::var("NORMLAB_SLURM_TEST").is_ok(),
        "no Slurm here: start one with `eval \"$(tools/slurm-local.sh start)\"`, which sets NORMLAB_SLURM_TEST"
    );
    let root = common::Scratch::new("slurm-test");
    ok(bin().args(["sweep", "--config"]).arg(sweep_file(&root, "local")).output().unwrap());

    let cfg = sweep_file(&root, "slurm");
    let dir = root.join("slurm");
    ok(bin().args(["sweep", "--executor", "slurm", "--detach", "--config"]).arg(&cfg).output().unwrap());
    let cancelled = cancel_a_running_task(&dir);
    // The rest of the grid and the reseed planner run; the planner sees the hole.
    let t0 = Instant::now();
    while jobs(&dir)["next_stage"].is_null() {
        assert!(t0.elapsed() < Duration::from_secs(300), "the reseed planner never ran");
        std::thread::sleep(Duration::from_millis(200));
    }
    let next = jobs(&dir)["next_stage"].as_str().unwrap().to_string();
    assert!(next.contains("did not finish") && next.contains(&cancelled), "{next}");
    let status = String::from_utf8(ok(bin().args(["sweep", "status"]).arg(&dir).output().unwrap()).stdout).unwrap();
    assert!(status.contains("1 started and not finished"), "{status}");

    // Submitted again: only the cancelled run (resumed) and then the reseed stage run.
    let o = ok(bin().args(["sweep", "--executor", "slurm", "--config"]).arg(&cfg).output().unwrap());
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("submitted grid array") && log.contains(", 1 runs"), "{log}");
    assert_eq!(
        common::results_without_timings(&dir),
        common::results_without_timings(&root.join("local")),
        "Slurm's results equal the local runner's"
    );
    let _ = std::fs::remove_dir_all(&root);
}
