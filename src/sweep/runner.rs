//! Executes a sweep's runs as separate `normlab train` processes, `jobs` at a time. A run that
//! finished or diverged is skipped; one that stopped part-way is resumed from its checkpoint;
//! one never started is started. Children die with the sweep (Linux `PR_SET_PDEATHSIG`), so a
//! killed sweep leaves no orphan writing into a run directory, and restarting it continues. A
//! stop signal to the sweep starts no further run and is passed once to each running child
//! (they run in their own process group, so a terminal's Ctrl-C reaches them only this way),
//! which stops at its next step's end with a checkpoint.

use super::config::{PlannedRun, Sweep};
use super::layout;
use super::results::RunState;
use crate::run::layout::{self as run_dir, Status};
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
    match RunState::of(run_dir::read_status(dir).ok().flatten().as_ref()) {
        RunState::Missing => Todo::Start,
        s if s.ended() => Todo::Done,
        _ => Todo::Resume,
    }
}

/// Writes each run's full config to `DIR/configs/NAME.toml`, the record a run is keyed by. A
/// run that already has a directory must have been made from the same config: a changed one
/// (the sweep file edited, a `--set` that differs) is refused, naming what changed, or with
/// `sweep.rerun_changed` its directory is removed so that it trains again.
pub fn write_configs(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<()> {
    let dir = &sweep.section.dir;
    let mut changed = Vec::new();
    let mut texts = Vec::new();
    for r in runs {
        let text = sweep.run_config(r)?.to_toml_to_train()?;
        let run = layout::run(dir, &r.name);
        if run.exists()
            && let Some(why) = config_change(&layout::run_config(dir, &r.name), &text)
        {
            changed.push((r.name.clone(), run, why));
        }
        texts.push(text);
    }
    if !changed.is_empty() {
        // The first few name what changed; a sweep file edited for all its runs would list them all.
        let mut names: Vec<String> = changed.iter().take(3).map(|(n, _, why)| format!("{n} ({why})")).collect();
        if changed.len() > 3 {
            names.push(format!("and {} more", changed.len() - 3));
        }
        anyhow::ensure!(
            sweep.rerun_changed,
            "{} runs in {} were made from another config than the sweep now gives: {}; rerun them with \
                --rerun-changed (their directories are replaced), or choose another sweep.dir (--set sweep.dir=...)",
            changed.len(),
            dir.display(),
            names.join("; ")
        );
        for (_, run, _) in &changed {
            std::fs::remove_dir_all(run).with_context(|| format!("cannot remove {} to rerun it", run.display()))?;
        }
    }
    for (r, text) in runs.iter().zip(texts) {
        crate::io::write_atomic(&layout::run_config(dir, &r.name), text.as_bytes())?;
    }
    Ok(())
}

/// How the config recorded at `path` differs from `now`, or `None` when they are the same.
fn config_change(path: &Path, now: &str) -> Option<String> {
    let Ok(was) = std::fs::read_to_string(path) else {
        return Some(format!("no record of its config at {}", path.display()));
    };
    if was == now {
        return None;
    }
    let (a, b) = (flat(&was), flat(now));
    let keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "unset".into());
            format!("{k}: {} → {}", show(a.get(k)), show(b.get(k)))
        })
        .collect();
    Some(if keys.is_empty() { "its config file differs".into() } else { keys.join(", ") })
}

/// A TOML document as dotted key → value text.
fn flat(text: &str) -> std::collections::BTreeMap<String, String> {
    fn walk(prefix: &str, t: &toml::Table, out: &mut std::collections::BTreeMap<String, String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                toml::Value::Table(inner) => walk(&key, inner, out),
                other => {
                    out.insert(key, other.to_string());
                }
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    if let Ok(t) = text.parse::<toml::Table>() {
        walk("", &t, &mut out);
    }
    out
}

/// How each run that failed in this process ended, by run name.
pub type Failures = std::collections::BTreeMap<String, String>;

/// Runs what is not done of `runs` (their configs written), `jobs` at a time; returns how the
/// runs that failed ended.
pub fn execute(sweep: &Sweep, runs: &[PlannedRun], log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Failures> {
    let dir = &sweep.section.dir;
    crate::run::layout::remove_abandoned_creations(&dir.join("runs"));
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
    let failures = Mutex::new(Failures::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    if crate::stop::requested().is_some() {
                        break;
                    }
                    let Some((i, r)) = queue.lock().unwrap_or_else(|e| e.into_inner()).next() else { break };
                    let t0 = Instant::now();
                    let how = Launch { threads, stops: StopSignals::Forward, prefix: &[] };
                    let outcome = run_one(&exe, dir, r, how).unwrap_or_else(|e| format!("failed to start: {e:#}"));
                    log(&format!("[{}/{total}] {} {outcome} ({:.0} s)", i + 1, r.name, t0.elapsed().as_secs_f64()));
                    if outcome.starts_with("failed") {
                        failures.lock().unwrap_or_else(|e| e.into_inner()).insert(r.name.clone(), outcome);
                    }
                }
            });
        }
    });
    Ok(failures.into_inner().unwrap_or_else(|e| e.into_inner()))
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

/// Whether a stop signal the sweep receives is passed on to its running child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignals {
    /// Pass it on: the child runs in its own process group, so nothing else reaches it (the
    /// local runner).
    Forward,
    /// Leave it: whoever signalled the sweep signals the child too (Slurm signals every
    /// process of a job step), and a second signal would end the child at once.
    Reach,
}

/// How a run's process is started.
pub struct Launch<'a> {
    /// CPU threads of each process.
    pub threads: usize,
    pub stops: StopSignals,
    /// A launcher and its arguments before `normlab` (`srun --ntasks=N …` for a run over
    /// several ranks); empty: `normlab` itself.
    pub prefix: &'a [String],
}

/// Runs (or resumes) one run to its end as a child `normlab train` process started as `how`
/// says, its output appended to `DIR/logs/NAME.log`; returns how it ended, in words.
pub fn run_one(exe: &Path, sweep_dir: &Path, r: &PlannedRun, how: Launch<'_>) -> anyhow::Result<String> {
    let dir = layout::run(sweep_dir, &r.name);
    let mut cmd = match how.prefix.split_first() {
        Some((launcher, args)) => {
            let mut c = Command::new(launcher);
            c.args(args).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.arg("train").arg("--quiet");
    match todo(&dir) {
        Todo::Done => return Ok("already done".into()),
        Todo::Resume => cmd.arg("--resume").arg(&dir),
        Todo::Start => cmd.arg("--config").arg(layout::run_config(sweep_dir, &r.name)).arg("--force"),
    };
    let log_path = layout::log(sweep_dir, &r.name);
    let logs = layout::logs(sweep_dir);
    // A missing logs directory (a full disk) is reported with the run's outcome, not instead of it.
    let _ = std::fs::create_dir_all(&logs);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).env("RAYON_NUM_THREADS", how.threads.to_string());
    if let Some(parent) = crate::track::parent::id(sweep_dir) {
        cmd.env(crate::track::PARENT_ENV, parent);
    }
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    let output = ChildOutput::follow(&mut child, &log_path);
    let status = wait_forwarding_stop(child, how.stops)?;
    let said = output.finish();
    let see = match &said.log_failure {
        None => format!("see {}", log_path.display()),
        Some(e) => format!("its log {} could not be written ({e})", log_path.display()),
    };
    let last_error = said.last_error.unwrap_or_else(|| "no error line".into());
    Ok(match (status.code(), run_dir::read_status(&dir).ok().flatten()) {
        (Some(0 | crate::run::EXIT_DIVERGED), Some(s)) => run_dir::describe(&s),
        (Some(_), Some(s @ Status::Stopped { .. })) => run_dir::describe(&s),
        (Some(code), _) => format!("failed (exit status {code}): {last_error}; {see}"),
        (None, _) => format!("failed: killed by {}; {see}", killed_by(&status)),
    })
}

/// What a run's process said, as the sweep read it.
#[derive(Default)]
struct Said {
    /// Its last `error:` line.
    last_error: Option<String>,
    /// Why its log could not be written, if it could not.
    log_failure: Option<String>,
}

/// Threads copying a child's stdout and stderr into its log, the sweep keeping what matters
/// even when the log cannot be written (a full disk).
struct ChildOutput {
    readers: Vec<std::thread::JoinHandle<()>>,
    said: std::sync::Arc<std::sync::Mutex<Said>>,
}

impl ChildOutput {
    fn follow(child: &mut std::process::Child, log_path: &Path) -> Self {
        let said = std::sync::Arc::new(std::sync::Mutex::new(Said::default()));
        let log = std::fs::OpenOptions::new().create(true).append(true).open(log_path);
        let log = match log {
            Ok(f) => Some(std::sync::Arc::new(std::sync::Mutex::new(f))),
            Err(e) => {
                said.lock().unwrap_or_else(|p| p.into_inner()).log_failure = Some(e.to_string());
                None
            }
        };
        let mut readers = Vec::new();
        let streams: [Option<Box<dyn std::io::Read + Send>>; 2] = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let (log, said) = (log.clone(), said.clone());
            readers.push(std::thread::spawn(move || copy_lines(stream, log.as_deref(), &said)));
        }
        Self { readers, said }
    }

    fn finish(self) -> Said {
        for r in self.readers {
            let _ = r.join();
        }
        std::mem::take(&mut *self.said.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Copies `stream` line by line into `log`, noting the last `error:` line and the first write
/// failure in `said`.
fn copy_lines(
    stream: Box<dyn std::io::Read + Send>,
    log: Option<&std::sync::Mutex<std::fs::File>>,
    said: &std::sync::Mutex<Said>,
) {
    use std::io::{BufRead, Write};
    for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
        let written = log.map(|f| writeln!(f.lock().unwrap_or_else(|p| p.into_inner()), "{line}"));
        let mut s = said.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Err(e)) = written {
            s.log_failure.get_or_insert(e.to_string());
        }
        if line.starts_with("error:") {
            s.last_error = Some(line);
        }
    }
}

/// Waits for `child`, passing it the sweep's stop signal once, when one arrives and `stops`
/// says so.
fn wait_forwarding_stop(
    mut child: std::process::Child,
    stops: StopSignals,
) -> anyhow::Result<std::process::ExitStatus> {
    let mut forwarded = stops == StopSignals::Reach;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if let Some(sig) = crate::stop::requested().filter(|_| !forwarded) {
            crate::stop::forward(child.id(), sig);
            forwarded = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The signal that ended a child, in words.
fn killed_by(status: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(status) {
        return crate::stop::describe(sig);
    }
    format!("{status}")
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
    // Its own process group: a terminal's Ctrl-C reaches the child once, through the sweep.
    cmd.process_group(0);
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}
