//! Executes a sweep's runs as separate `normlab train` processes, `jobs` at a time. A run that
//! finished or diverged is skipped; one that stopped part-way is resumed from its checkpoint;
//! one never started is started. Children die with the sweep (Linux `PR_SET_PDEATHSIG`), so a
//! killed sweep leaves no orphan writing into a run directory, and restarting it continues.

use super::config::{PlannedRun, Sweep};
use super::layout;
use crate::train::run_dir::{self, Status};
use anyhow::Context;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

/// What a run needs.
#[derive(Debug, PartialEq)]
pub enum Todo {
    Done,
    Resume,
    Start,
}

pub fn todo(dir: &Path) -> Todo {
    match run_dir::read_status(dir).ok().flatten() {
        Some(Status::Finished { .. } | Status::Diverged { .. }) => Todo::Done,
        Some(Status::Running { .. }) => Todo::Resume,
        None => Todo::Start,
    }
}

/// Writes each run's full config to `DIR/configs/NAME.toml`.
pub fn write_configs(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<()> {
    for r in runs {
        let cfg = sweep.run_config(r)?;
        crate::io::write_atomic(&layout::run_config(&sweep.section.dir, &r.name), cfg.to_toml()?.as_bytes())?;
    }
    Ok(())
}

/// Runs what is not done of `runs` (their configs written), `jobs` at a time.
pub fn execute(sweep: &Sweep, runs: &[PlannedRun], log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<()> {
    let dir = &sweep.section.dir;
    let pending: Vec<&PlannedRun> = runs.iter().filter(|r| todo(&layout::run(dir, &r.name)) != Todo::Done).collect();
    let skipped = runs.len() - pending.len();
    if skipped > 0 {
        log(&format!("{skipped} of {} runs already done; running {}", runs.len(), pending.len()));
    }
    let total = pending.len();
    let queue = Mutex::new(pending.into_iter().enumerate());
    let jobs = sweep.section.jobs.min(total.max(1));
    let threads = (crate::device::available_threads() / jobs).max(1);
    let exe = normlab_exe()?;
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let Some((i, r)) = queue.lock().unwrap().next() else { break };
                    let t0 = Instant::now();
                    let outcome = run_one(&exe, dir, r, threads).unwrap_or_else(|e| format!("failed to start: {e:#}"));
                    log(&format!("[{}/{total}] {} {outcome} ({:.0} s)", i + 1, r.name, t0.elapsed().as_secs_f64()));
                }
            });
        }
    });
    Ok(())
}

/// The normlab executable to start runs with. When normlab was rebuilt while this process
/// runs, Linux reports the old file as `… (deleted)`; the new file at the same path is used.
pub fn normlab_exe() -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe().context("cannot find the normlab executable")?;
    let name = exe.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    match name.strip_suffix(" (deleted)") {
        Some(live) if !exe.exists() && exe.with_file_name(live).exists() => Ok(exe.with_file_name(live)),
        _ => Ok(exe),
    }
}

/// Runs (or resumes) one run to its end as a child `normlab train` process with `threads`
/// threads, its output appended to `DIR/logs/NAME.log`; returns how it ended, in words.
pub fn run_one(exe: &Path, sweep_dir: &Path, r: &PlannedRun, threads: usize) -> anyhow::Result<String> {
    let dir = layout::run(sweep_dir, &r.name);
    let mut cmd = Command::new(exe);
    cmd.arg("train").arg("--quiet");
    match todo(&dir) {
        Todo::Done => return Ok("already done".into()),
        Todo::Resume => cmd.arg("--resume").arg(&dir),
        Todo::Start => cmd.arg("--config").arg(layout::run_config(sweep_dir, &r.name)).arg("--force"),
    };
    let log_path = layout::log(sweep_dir, &r.name);
    let logs = layout::logs(sweep_dir);
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path)?;
    cmd.stdout(Stdio::from(log.try_clone()?)).stderr(Stdio::from(log)).env("RAYON_NUM_THREADS", threads.to_string());
    die_with_parent(&mut cmd);
    let status = cmd.status()?;
    Ok(match (status.code(), run_dir::read_status(&dir).ok().flatten()) {
        (Some(0), Some(s)) => run_dir::describe(&s),
        (Some(crate::train::EXIT_DIVERGED), Some(s)) => run_dir::describe(&s),
        (code, _) => format!("failed (exit {code:?}); see {}", log_path.display()),
    })
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}
