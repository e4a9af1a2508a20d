//! Sweeps on a Slurm cluster: one array task per run, on a shared filesystem.
//!
//! `normlab sweep --executor slurm` prepares the sweep directory exactly as the local runner
//! does, writes `slurm/grid.sbatch` (an array over the runs that are not done, `%K` at a time)
//! and submits it with `sbatch`; each task runs `normlab sweep run-one DIR INDEX`, which skips
//! a finished run and resumes a stopped one, so resubmitting reruns only what is missing. With
//! a reseed stage, a one-task job `slurm/next.sbatch` waits for the grid
//! (`--dependency=afterany`), plans the reseed runs from the grid's results and submits them
//! as a second array. The command then follows the jobs with `squeue` (or returns at once with
//! `--detach`; `normlab sweep status DIR` reports later) and collects the results as the local
//! runner does.

use super::config::{PlannedRun, Sweep};
use super::results::{self, RunState};
use super::runner::{Todo, todo};
use super::{Plan, layout};
use crate::io::json;
use crate::run::layout as run_dir;
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// `slurm/jobs.json`: what was submitted, so that a follower and `sweep status` can find it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Jobs {
    pub submissions: Vec<Submission>,
    /// What the job between the stages decided, once it ran.
    pub next_stage: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    /// `grid`, `next` or `reseed`.
    pub stage: String,
    pub job_id: String,
    /// Plan indices of the array's tasks.
    pub indices: Vec<usize>,
}

/// How `normlab sweep` submits.
#[derive(Clone, Copy, Debug, Default)]
pub struct SubmitOptions {
    /// Return once submitted.
    pub detach: bool,
    /// Print the script; submit nothing.
    pub dry_run: bool,
}

/// Submits the sweep's runs that are not done (and the reseed stage after them), then, unless
/// detached, follows them and returns the results.
pub fn submit(
    sweep: &mut Sweep,
    opts: SubmitOptions,
    log: &dyn Fn(&str),
) -> anyhow::Result<Option<Vec<results::RunResult>>> {
    std::fs::create_dir_all(&sweep.section.dir)
        .with_context(|| format!("cannot create {}", sweep.section.dir.display()))?;
    // Jobs start elsewhere: every path they read must be absolute.
    sweep.section.dir = std::path::absolute(&sweep.section.dir)?;
    let dir = sweep.section.dir.clone();
    if let Some(r) = &sweep.section.reseed {
        r.check(super::config::Executor::Slurm)?;
    }
    let _lock = super::lock(&dir)?;
    let runs = planned_runs(sweep)?;
    super::prepare(sweep, &runs)?;
    super::tracking::open(sweep, log)?;
    let pending: Vec<usize> =
        (0..runs.len()).filter(|&i| todo(&layout::run(&dir, &runs[i].name)) != Todo::Done).collect();
    let grid_len = sweep.grid().len();
    let (grid, reseed): (Vec<usize>, Vec<usize>) = pending.iter().partition(|&&i| i < grid_len);
    let script = array_script(sweep, "grid", &grid)?;
    if opts.dry_run {
        crate::io::term::out(format_args!("{script}"));
        return Ok(None);
    }
    let mut jobs = Jobs::default();
    let mut after: Option<String> = None;
    for (stage, indices) in [("grid", &grid), ("reseed", &reseed)] {
        if !indices.is_empty() {
            let id = sbatch(&dir, stage, &array_script(sweep, stage, indices)?, after.as_deref())?;
            log(&format!("submitted {stage} array: job {id}, {} runs", indices.len()));
            jobs.submissions.push(Submission { stage: stage.into(), job_id: id.clone(), indices: indices.clone() });
            after = Some(id);
        }
    }
    if sweep.section.reseed.is_some() && runs.len() == grid_len {
        let id = sbatch(&dir, "next", &next_script(sweep)?, after.as_deref())?;
        log(&format!("submitted the reseed planner: job {id}, after the grid"));
        jobs.submissions.push(Submission { stage: "next".into(), job_id: id, indices: Vec::new() });
    }
    json::write(&layout::slurm_jobs(&dir), &jobs)?;
    if opts.detach {
        log(&format!("detached; see progress with `normlab sweep status {}`", dir.display()));
        return Ok(None);
    }
    follow(sweep, log)?;
    let plan: Plan = json::read(&layout::plan(&dir))?;
    super::finish(sweep, &plan.runs, &Default::default(), log).map(Some)
}

/// The grid, plus the reseed runs an earlier submission already planned.
fn planned_runs(sweep: &Sweep) -> anyhow::Result<Vec<PlannedRun>> {
    let mut runs = sweep.grid();
    let p = layout::plan(&sweep.section.dir);
    if p.is_file() {
        let old: Plan = json::read(&p)?;
        runs.extend(old.runs.into_iter().filter(|r| r.stage == super::Stage::Reseed));
    }
    Ok(runs)
}

/// The `#SBATCH` header shared by every script of the sweep.
fn header(sweep: &Sweep, stage: &str) -> Vec<String> {
    let s = &sweep.section.slurm;
    let name = sweep.section.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut h = vec!["#!/bin/bash".to_string(), format!("#SBATCH --job-name=normlab-{name}-{stage}")];
    h.push(format!("#SBATCH --output={}", layout::slurm_output(&sweep.section.dir).display()));
    for (flag, v) in [("account", &s.account), ("partition", &s.partition), ("time", &s.time)] {
        h.extend(v.as_ref().map(|v| format!("#SBATCH --{flag}={v}")));
    }
    h.extend(s.extra.iter().map(|e| format!("#SBATCH {}", e.trim_start_matches("#SBATCH").trim())));
    h
}

/// The array over plan `indices`, each task one run.
pub fn array_script(sweep: &Sweep, stage: &str, indices: &[usize]) -> anyhow::Result<String> {
    let s = &sweep.section.slurm;
    ensure!(s.cpus_per_task >= 1, "sweep.slurm.cpus_per_task must be ≥ 1");
    ensure!(s.ranks_per_run >= 1, "sweep.slurm.ranks_per_run must be ≥ 1");
    let k = s.max_parallel.unwrap_or(sweep.section.jobs).max(1);
    let list: Vec<String> = indices.iter().map(usize::to_string).collect();
    let mut h = header(sweep, stage);
    h.push(format!("#SBATCH --array={}%{k}", if list.is_empty() { "0".into() } else { list.join(",") }));
    if s.ranks_per_run > 1 {
        h.push(format!("#SBATCH --ntasks={}", s.ranks_per_run));
    }
    h.push(format!("#SBATCH --cpus-per-task={}", s.cpus_per_task));
    h.extend(s.gpus_per_task.map(|g| format!("#SBATCH --gpus-per-task={g}")));
    let exe = super::runner::normlab_exe()?;
    h.push(format!(
        "exec \"{}\" sweep run-one \"{}\" \"$SLURM_ARRAY_TASK_ID\"",
        exe.display(),
        sweep.section.dir.display()
    ));
    Ok(h.join("\n") + "\n")
}

/// The one-task job between the stages.
fn next_script(sweep: &Sweep) -> anyhow::Result<String> {
    let mut h = header(sweep, "next");
    h.push("#SBATCH --cpus-per-task=1".into());
    let exe = super::runner::normlab_exe()?;
    h.push(format!("exec \"{}\" sweep next-stage \"{}\"", exe.display(), sweep.section.dir.display()));
    Ok(h.join("\n") + "\n")
}

/// Writes `slurm/STAGE.sbatch` and submits it; returns the job id.
fn sbatch(dir: &Path, stage: &str, script: &str, after: Option<&str>) -> anyhow::Result<String> {
    let path = layout::slurm_script(dir, stage);
    crate::io::write_atomic(&path, script.as_bytes())?;
    std::fs::create_dir_all(layout::logs(dir))
        .with_context(|| format!("cannot create {}", layout::logs(dir).display()))?;
    let mut cmd = Command::new("sbatch");
    cmd.arg("--parsable");
    if let Some(a) = after {
        cmd.arg(format!("--dependency=afterany:{a}"));
    }
    let out = cmd.arg(&path).output().map_err(|e| {
        anyhow::anyhow!("cannot run sbatch ({e}); run on a Slurm login node, or use sweep.executor = \"local\"")
    })?;
    ensure!(out.status.success(), "sbatch {} failed: {}", path.display(), String::from_utf8_lossy(&out.stderr).trim());
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.trim().split(';').next().unwrap_or("").to_string();
    ensure!(!id.is_empty(), "sbatch printed no job id");
    Ok(id)
}

/// Array tasks (`JOB_TASK` or `JOB_[range]`) of `ids` still queued or running, with their state.
pub fn queued(ids: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let out = Command::new("squeue")
        .args(["-h", "-o", "%i %T", "-j", &ids.join(",")])
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run squeue ({e}); is Slurm installed here?"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Slurm forgets finished jobs after MinJobAge: then none of them is queued.
        if err.contains("Invalid job id") {
            return Ok(Vec::new());
        }
        bail!("squeue failed: {}", err.trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_string(), b.trim().to_string()))).collect())
}

/// Waits until none of the sweep's jobs is queued or running, printing progress as runs end.
fn follow(sweep: &Sweep, log: &dyn Fn(&str)) -> anyhow::Result<()> {
    let dir = &sweep.section.dir;
    let mut last = String::new();
    loop {
        let jobs: Jobs = json::read(&layout::slurm_jobs(dir))?;
        let ids: Vec<String> = jobs.submissions.iter().map(|s| s.job_id.clone()).collect();
        let q = queued(&ids)?;
        let line = progress(dir, q.len())?;
        if line != last {
            log(&line);
            last = line;
        }
        if q.is_empty() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(sweep.section.slurm.poll_seconds.max(1)));
    }
}

/// `N finished, N diverged, N interrupted, N not started of N; N jobs queued or running`.
fn progress(dir: &Path, queued: usize) -> anyhow::Result<String> {
    let plan: Plan = json::read(&layout::plan(dir))?;
    let mut counts = [0usize; 4];
    for r in &plan.runs {
        let i = match RunState::of(run_dir::read_status(&layout::run(dir, &r.name)).ok().flatten().as_ref()) {
            RunState::Finished => 0,
            RunState::Diverged => 1,
            RunState::Running | RunState::Stopped => 2,
            RunState::Missing => 3,
        };
        counts[i] += 1;
    }
    Ok(format!(
        "{} finished, {} diverged, {} started and not finished, {} not started, of {} runs; {queued} Slurm tasks \
            queued or running",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        plan.runs.len()
    ))
}

/// `normlab sweep status DIR`: the runs' states and the Slurm jobs still queued or running.
pub fn status(dir: &Path) -> anyhow::Result<String> {
    ensure!(
        layout::plan(dir).is_file(),
        "{} holds no sweep (no plan.json); give the sweep.dir of a sweep",
        dir.display()
    );
    let jobs: Jobs =
        if layout::slurm_jobs(dir).is_file() { json::read(&layout::slurm_jobs(dir))? } else { Jobs::default() };
    let ids: Vec<String> = jobs.submissions.iter().map(|s| s.job_id.clone()).collect();
    let q = if ids.is_empty() { Vec::new() } else { queued(&ids)? };
    let mut s = progress(dir, q.len())?;
    for (task, state) in &q {
        s += &format!("\n  {task} {state}");
    }
    if let Some(n) = &jobs.next_stage {
        s += &format!("\nreseed stage: {n}");
    }
    Ok(s)
}

/// `normlab sweep run-one DIR INDEX`: runs (or resumes, or skips) plan entry `INDEX`.
pub fn run_one(dir: &Path, index: usize) -> anyhow::Result<String> {
    let plan: Plan = json::read(&layout::plan(dir))?;
    let run = plan
        .runs
        .get(index)
        .with_context(|| format!("{} has {} runs; there is no run {index}", dir.display(), plan.runs.len()))?;
    let threads = std::env::var("SLURM_CPUS_PER_TASK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(crate::device::available_threads);
    let exe = super::runner::normlab_exe()?;
    let s = Sweep::load(&layout::sweep_file(dir), &[])?.section.slurm;
    // A run over several ranks: one `normlab train` per task of the allocation, joined by MPI.
    let launch: Vec<String> = match s.ranks_per_run {
        1 => Vec::new(),
        n => ["srun".into(), format!("--ntasks={n}"), format!("--mpi={}", s.mpi), "--kill-on-bad-exit=1".into()].into(),
    };
    // Slurm signals every process of the step (SIGTERM before a time limit or preemption):
    // the run stops itself at a step's end with a checkpoint; this process only waits.
    let how = super::runner::Launch { threads, stops: super::runner::StopSignals::Reach, prefix: &launch };
    let outcome = super::runner::run_one(&exe, dir, run, how)?;
    Ok(format!("{}: {outcome}", run.name))
}

/// `normlab sweep next-stage DIR` (the job between the stages): when the grid is complete,
/// plans the reseed runs and submits them; otherwise says what is missing.
pub fn next_stage(dir: &Path, log: &dyn Fn(&str)) -> anyhow::Result<()> {
    let sweep = Sweep::load(&layout::sweep_file(dir), &[])?;
    let grid = sweep.grid();
    let unfinished: Vec<&str> =
        grid.iter().filter(|r| todo(&layout::run(dir, &r.name)) != Todo::Done).map(|r| r.name.as_str()).collect();
    let mut jobs: Jobs = json::read(&layout::slurm_jobs(dir))?;
    if !unfinished.is_empty() {
        let why = format!(
            "not planned: {} grid runs did not finish ({}); submit the sweep again to finish them",
            unfinished.len(),
            unfinished.join(", ")
        );
        log(&why);
        jobs.next_stage = Some(why);
        return json::write(&layout::slurm_jobs(dir), &jobs);
    }
    let extra = super::plan_reseed(&sweep, &grid)?;
    let indices: Vec<usize> = (grid.len()..grid.len() + extra.len()).collect();
    if !indices.is_empty() {
        let id = sbatch(dir, "reseed", &array_script(&sweep, "reseed", &indices)?, None)?;
        jobs.submissions.push(Submission { stage: "reseed".into(), job_id: id.clone(), indices });
        log(&format!("submitted the reseed array: job {id}, {} runs", extra.len()));
    }
    jobs.next_stage = Some(format!("{} reseed runs planned", extra.len()));
    json::write(&layout::slurm_jobs(dir), &jobs)
}
