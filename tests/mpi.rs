//! One run over two MPI ranks on localhost (`mpirun -np 2`, Debian's Open MPI, which `.ci/run`
//! installs) against the same run in one process: micro-batches of 4, batch 8 (two
//! micro-batches, one per rank, or accumulated in one process). Every step's loss and
//! gradient norm, every validation and the final weights agree within 1e-6 relative, for
//! pre-norm, for KiteNorm with its variance regulariser and for TaperNorm (its calibration
//! statistics summed over the ranks) under AdamW, and for pre-norm under NorMuon (Muon's
//! orthogonalised step and its per-neuron state on every rank). A rank killed mid-run ends the job
//! with one error line naming it; resuming with one rank and with two continues the
//! uninterrupted curve. Built only with the `mpi` feature.
#![cfg(feature = "mpi")]

mod common;

use common::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const TOL: f64 = 1e-6;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_normlab")
}

/// `mpirun -np N normlab ARGS` (as root where CI runs; shared memory without the kernel's
/// single-copy calls, which containers often forbid).
fn mpirun(n: usize, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none", "-np", &n.to_string(), exe()])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("RAYON_NUM_THREADS", "1");
    c
}

fn alone(args: &[&str]) -> Command {
    let mut c = Command::new(exe());
    c.args(args).env("RAYON_NUM_THREADS", "1");
    c
}

fn ok(o: Output) -> Output {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}{err}", String::from_utf8_lossy(&o.stdout));
    o
}

/// A corpus and a config in `root`: a 2-layer d=32 byte model, batch 8 in micro-batches of 4,
/// `steps` steps, a checkpoint every 10.
fn config(root: &Path, recipe: &str, steps: usize) -> PathBuf {
    let corpus = root.join("corpus.txt");
    if !corpus.exists() {
        std::fs::write(&corpus, common::numbered_corpus(4000)).unwrap();
    }
    let cfg = format!(
        "[run]\neval_every = 10\neval_windows = 8\ncheckpoint_every = 10\n\
         [model]\nd_model = 32\nn_layers = 2\nn_heads = 2\nrecipe = \"{recipe}\"\n\
         [data]\ncorpus = \"{}\"\ncache_dir = \"{}\"\n\
         [train]\nbatch_size = 8\nmicro_batch_size = 4\nseq_len = 32\nsteps = {steps}\n",
        corpus.display(),
        root.join("cache").display(),
    );
    let p = root.join(format!("{recipe}.toml"));
    std::fs::write(&p, cfg).unwrap();
    p
}

/// The arguments as `&str`s.
fn as_str(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

fn dir_arg(dir: &Path) -> String {
    format!("run.dir=\"{}\"", dir.display())
}

/// (type, step, loss or val_loss, grad_norm) of every metrics record.
fn curve(run: &Path) -> Vec<(String, u64, f64, f64)> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            let loss = if v["type"] == "eval" { f("val_loss") } else { f("loss") };
            (v["type"].as_str().unwrap().to_string(), v["step"].as_u64().unwrap(), loss, f("grad_norm"))
        })
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    if a == b { 0.0 } else { (a - b).abs() / b.abs().max(1e-30) }
}

fn same_curve(a: &Path, b: &Path) {
    let (x, y) = (curve(a), curve(b));
    assert_eq!(x.len(), y.len(), "{} vs {}", a.display(), b.display());
    for (p, q) in x.iter().zip(&y) {
        assert_eq!((&p.0, p.1), (&q.0, q.1));
        assert!(rel(p.2, q.2) <= TOL, "step {} {}: loss {} vs {}", p.1, p.0, p.2, q.2);
        assert!(p.3.is_nan() && q.3.is_nan() || rel(p.3, q.3) <= TOL, "step {}: grad norm {} vs {}", p.1, p.3, q.3);
    }
}

fn weights(path: &Path) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out: Vec<(String, Vec<f32>)> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn same_weights(a: &Path, b: &Path) {
    let (x, y) = (weights(&a.join("model.safetensors")), weights(&b.join("model.safetensors")));
    assert_eq!(x.len(), y.len());
    for ((n, u), (m, v)) in x.iter().zip(&y) {
        assert_eq!(n, m);
        let scale = u.iter().fold(0f32, |s, w| s.max(w.abs())) as f64;
        let worst = u.iter().zip(v).map(|(p, q)| (*p as f64 - *q as f64).abs()).fold(0.0, f64::max);
        assert!(worst <= TOL * scale.max(1e-30), "{n}: differs by {worst:e} (scale {scale})");
    }
}

#[test]
fn two_ranks_train_the_single_process_run() {
    let s = Scratch::new("mpi-equal");
    // TaperNorm's calibration averages take each step's statistics summed over the ranks; a
    // mixture of experts' selection biases move by the step's load summed over the ranks, and
    // its capacity binds within each micro-batch, wherever it runs.
    let moe = "model.moe={experts=4, top_k=2, d_expert=16, capacity=0.75, aux_loss=0.01, \
               router={kind=\"sigmoid\", groups=2, top_groups=1, bias_update=0.01}}";
    // ZClip's statistics see the norm after the all-reduce: every rank clips alike.
    let zclip = "optim.clip={rule=\"zclip\", warmup_steps=5, z_thresh=0.5}";
    let cases = [("pre", "adamw", ""), ("kitenorm", "adamw", ""), ("pre", "normuon", ""), ("tapernorm", "adamw", "")];
    let with_extra = [("pre-rms", "adamw", moe), ("pre", "adamw", zclip)];
    for (recipe, optim, extra) in cases.into_iter().chain(with_extra) {
        let cfg = config(&s, recipe, 20);
        let cfg = cfg.to_str().unwrap();
        let tag = match extra {
            "" => optim,
            e if e == zclip => "zclip",
            _ => "moe",
        };
        let (one, two) = (s.join(format!("{recipe}-{tag}-1")), s.join(format!("{recipe}-{tag}-2")));
        let name = format!("optim.name=\"{optim}\"");
        let sets = |dir: &Path| {
            let mut a = vec!["train".to_string(), "--quiet".into(), "--config".into(), cfg.into()];
            for set in [dir_arg(dir), name.clone(), extra.to_string()].into_iter().filter(|s| !s.is_empty()) {
                a.extend(["--set".to_string(), set]);
            }
            a
        };
        let (args_one, args_two) = (sets(&one), sets(&two));
        ok(alone(&as_str(&args_one)).output().unwrap());
        let o = ok(mpirun(2, &as_str(&args_two)).output().unwrap());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.matches("finished 20 steps").count(), 1, "rank 0 alone reports: {err}");
        assert!(err.contains("2 ranks, each computing 1 of every step's micro-batches"), "{err}");
        same_curve(&one, &two);
        same_weights(&one, &two);
        let m = std::fs::read_to_string(two.join("metrics.jsonl")).unwrap();
        assert_eq!(m.lines().filter(|l| l.contains("\"type\":\"train\"")).count(), 20, "one writer");
        if recipe == "kitenorm" {
            assert!(!m.contains("\"reg\":null"), "the regulariser is part of every step's loss");
        }
        if recipe == "tapernorm" {
            assert!(m.contains("\"taper_gate\":0.0"), "the gate reaches 0 within the 20 steps");
        }
        if tag == "moe" {
            assert!(m.contains("\"dropped\":[") && m.contains("\"moe\":"), "routing recorded with drops");
        }
        if tag == "zclip" {
            assert!(m.contains("\"spike\":true"), "ZClip clipped a spike within the 20 steps");
        }
    }
}

/// The pid of rank `rank` of the job training `run`, once it is up.
fn rank_pid(run: &Path, rank: usize) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let env = std::fs::read(e.path().join("environ")).ok()?;
        let (cmd, env) = (String::from_utf8_lossy(&cmd), String::from_utf8_lossy(&env));
        let ours = cmd.contains(&run.display().to_string()) && !cmd.starts_with("mpirun");
        (ours && env.split('\0').any(|v| v == want)).then_some(pid)
    })
}

fn wait_for_step(run: &Path, step: u64, limit: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        let m = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap_or_default();
        if m.lines().any(|l| l.contains(&format!("\"step\":{step},"))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} did not reach step {step}", run.display());
}

fn copy_dir(from: &Path, to: &Path) {
    ok(Command::new("cp").arg("-a").arg(from).arg(to).output().unwrap());
}

#[test]
fn a_killed_rank_stops_the_job_and_the_run_resumes_on_one_or_two_ranks() {
    let s = Scratch::new("mpi-kill");
    let cfg = config(&s, "pre", 1500);
    let cfg = cfg.to_str().unwrap();
    let (whole, cut) = (s.join("whole"), s.join("cut"));
    ok(alone(&["train", "--quiet", "--config", cfg, "--set", &dir_arg(&whole)]).output().unwrap());
    let job = mpirun(2, &["train", "--quiet", "--config", cfg, "--set", &dir_arg(&cut)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_step(&cut, 25, Duration::from_secs(120));
    let pid = rank_pid(&cut, 1).expect("rank 1 is running");
    // SAFETY: sends SIGKILL to the rank-1 process found above.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let o = job.wait_with_output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(ours.len(), 1, "one error line: {err}");
    assert!(ours[0].starts_with(&format!("error: rank 1 of 2 (pid {pid}) ended without reporting an error")), "{err}");
    assert!(ours[0].contains("--resume"), "{err}");
    let status = std::fs::read_to_string(cut.join("status.json")).unwrap();
    assert!(status.contains("running"), "{status}");
    for ranks in [1, 2] {
        let again = s.join(format!("again-{ranks}"));
        copy_dir(&cut, &again);
        let args = ["train", "--quiet", "--resume", again.to_str().unwrap()];
        ok(if ranks == 1 { alone(&args) } else { mpirun(2, &args) }.output().unwrap());
        same_curve(&whole, &again);
        same_weights(&whole, &again);
    }
}

#[test]
fn ranks_given_different_configs_or_an_uneven_share_are_refused() {
    let s = Scratch::new("mpi-refuse");
    let cfg = config(&s, "pre", 20);
    let cfg = cfg.to_str().unwrap();
    let run = s.join("run");
    let d = dir_arg(&run);
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-np", "1", exe(), "train", "--config", cfg, "--set", &d, "--set", "optim.lr=1e-3"])
        .args([":", "-np", "1", exe(), "train", "--config", cfg, "--set", &d, "--set", "optim.lr=2e-3"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert!(!o.status.success());
    assert_eq!(ours.len(), 1, "{err}");
    assert!(ours[0].contains("rank 1 was started with a different config than rank 0"), "{err}");
    assert!(!run.exists(), "nothing written");
    let o = mpirun(2, &["train", "--config", cfg, "--set", &d, "--set", "train.micro_batch_size=8"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(ours.len(), 1, "{err}");
    assert!(ours[0].contains("1 micro-batches per step cannot be shared evenly by 2 ranks"), "{err}");
    assert!(!run.exists(), "nothing written");
}

/// Through a real Slurm (`tools/slurm-local.sh`, started by `.ci/run`; an ignored test
/// elsewhere): a sweep whose runs each take two ranks (`sweep.slurm.ranks_per_run
/// = 2`, `srun --mpi=pmix`) gives the local single-process sweep's results, and
/// `tools/slurm-train.sbatch` trains one run over two tasks to the single-process curve.
#[test]
#[ignore = "needs a Slurm: eval \"$(tools/slurm-local.sh start)\", then --include-ignored (.ci/run does)"]
fn slurm_trains_sweep_runs_and_a_single_run_over_two_ranks() {
    assert!(
        std::env::var("NORMLAB_SLURM_TEST").as_deref() == Ok("1"),
        "no Slurm here: start one with `eval \"$(tools/slurm-local.sh start)\"`, which sets NORMLAB_SLURM_TEST=1"
    );
    let s = Scratch::new("mpi-slurm");
    let cfg = config(&s, "pre", 20);
    let base = std::fs::read_to_string(&cfg).unwrap();
    let sweep = |name: &str| {
        let text = format!(
            "[sweep]\ndir = \"{}\"\njobs = 2\n[sweep.axes]\n\"optim.lr\" = [3e-3, 1e-2]\n[sweep.reseed]\nseeds = []\n\
             [sweep.slurm]\npoll_seconds = 1\nranks_per_run = 2\n{base}",
            s.join(name).display()
        );
        let p = s.join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        p
    };
    let (local, slurm) = (sweep("local"), sweep("slurm"));
    ok(alone(&["sweep", "--config", local.to_str().unwrap()]).output().unwrap());
    let o = alone(&["sweep", "--config", slurm.to_str().unwrap(), "--executor", "slurm"]).output().unwrap();
    ok(o);
    assert_eq!(common::results_without_timings(&s.join("local")), common::results_without_timings(&s.join("slurm")));
    let log = std::fs::read_to_string(s.join("slurm/logs/lr=0.01.log")).unwrap();
    assert!(log.contains("2 ranks, each computing 1 of every step's micro-batches"), "{log}");
    // One run from the documented batch script, followed until Slurm has finished it.
    let (one, two) = (s.join("one"), s.join("two"));
    let cfg = cfg.to_str().unwrap();
    ok(alone(&["train", "--quiet", "--config", cfg, "--set", &dir_arg(&one)]).output().unwrap());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/slurm-train.sbatch");
    let o = ok(Command::new("sbatch")
        .args(["--parsable", "--wait", "--ntasks=2", "--cpus-per-task=1", "--output"])
        .arg(s.join("job.out"))
        .arg(&script)
        .args(["--config", cfg, "--set", &dir_arg(&two)])
        .env("NORMLAB", exe())
        .output()
        .unwrap());
    assert!(!o.stdout.is_empty());
    same_curve(&one, &two);
    same_weights(&one, &two);
}
