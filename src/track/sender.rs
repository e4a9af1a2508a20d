//! A run sent to its tracking server from a thread of its own, so that training never waits
//! on the network: records are buffered and sent in batches every [`FLUSH_EVERY`] (or when
//! [`MAX_METRICS`] are waiting); a server that does not answer is retried with a growing
//! pause, and after [`GIVE_UP`] without an answer (or when the run ends) the thread stops
//! trying, says so in one warning line, and leaves `tracking.json` recording what the server
//! has, for `normlab track RUN` to send the rest. A server that refuses a request (a bad key,
//! say) costs that request only, with a warning.

use super::keys::{metrics_of, params_of};
use super::mlflow::{MAX_METRICS, MAX_PARAMS, Metric, Mlflow, RunRef, now_ms};
use super::state::TrackState;
use crate::run::metrics::MetricsRecord;
use crate::run::track_target::TrackTarget;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often buffered records are sent.
pub const FLUSH_EVERY: Duration = Duration::from_secs(2);
/// How long a server may stay silent before the thread stops trying.
pub const GIVE_UP: Duration = Duration::from_secs(120);
/// How long the end of a run waits for the thread to send what is left, upload the artifacts
/// and set the status; past it the run exits, and what the server has not acknowledged stays
/// for `normlab track`.
pub const FINISH_WAIT: Duration = Duration::from_secs(5);

/// What the tracking server is told about a run when it is first created.
#[derive(Clone, Debug)]
pub struct Opening {
    /// The run (or sweep) directory, where `tracking.json` is kept.
    pub dir: PathBuf,
    pub target: TrackTarget,
    pub experiment: String,
    pub run_name: String,
    pub tags: Vec<(String, String)>,
    /// The config as trained (`config.toml`'s text), sent as params.
    pub config_toml: String,
    pub parent_run_id: Option<String>,
}

enum Msg {
    /// A record and the length of `metrics.jsonl` once it is written.
    Record(Box<MetricsRecord>, u64),
    /// `metrics.jsonl` was cut back to this length (a rollback).
    Truncated(u64),
    /// The run ended with this MLflow status; upload these files (artifact path, file).
    Finish(&'static str, Vec<(String, PathBuf)>),
}

/// The sending thread's handle, held by the training loop.
pub struct Tracker {
    tx: Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Closed when the thread has ended.
    done: Receiver<()>,
    dir: PathBuf,
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Tracker {
    /// Starts the thread; `metrics_len` is the length of `metrics.jsonl` now (what a resumed
    /// run kept). Records of `metrics.jsonl` the server never acknowledged (a run killed while
    /// they were buffered) are sent first.
    pub fn start(opening: Opening, metrics_len: u64) -> Self {
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = channel();
        let (done_tx, done) = channel::<()>();
        let dir = opening.dir.clone();
        let mut w = Worker::new(opening, warnings.clone(), metrics_len);
        w.catch_up(metrics_len);
        let thread = std::thread::Builder::new()
            .name("normlab-track".into())
            .spawn(move || {
                w.serve(rx);
                drop(done_tx);
            })
            .ok();
        Self { tx, thread, done, dir, warnings }
    }

    /// Waits up to [`FINISH_WAIT`] for the thread to end; a thread still waiting on its server
    /// is left behind (the process exits without it) with a warning.
    fn wait_for_thread(&mut self) {
        let Some(t) = self.thread.take() else { return };
        match self.done.recv_timeout(FINISH_WAIT) {
            Err(RecvTimeoutError::Timeout) => self.warnings.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                "the tracking server did not take the end of the run within {} s; the run ends without waiting — {} \
                 records what the server acknowledged; send the rest with `normlab track {}`",
                FINISH_WAIT.as_secs(),
                crate::run::layout::tracking(&self.dir).display(),
                self.dir.display()
            )),
            _ => {
                let _ = t.join();
            }
        }
    }

    pub fn record(&self, r: &MetricsRecord, metrics_len: u64) {
        let _ = self.tx.send(Msg::Record(Box::new(r.clone()), metrics_len));
    }

    pub fn truncated(&self, metrics_len: u64) {
        let _ = self.tx.send(Msg::Truncated(metrics_len));
    }

    /// The warnings the thread has raised since the last call.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Ends the run on the server (after sending what is left) and returns the last warnings.
    pub fn finish(mut self, status: &'static str, artifacts: Vec<(String, PathBuf)>) -> Vec<String> {
        let _ = self.tx.send(Msg::Finish(status, artifacts));
        self.wait_for_thread();
        self.take_warnings()
    }
}

impl Drop for Tracker {
    /// A run that ends without [`Tracker::finish`] (an error) is marked failed.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.tx.send(Msg::Finish("FAILED", Vec::new()));
            self.wait_for_thread();
        }
    }
}

/// The thread's side: the client, what the server has, and what waits to be sent.
pub struct Worker {
    client: Mlflow,
    opening: Opening,
    state: TrackState,
    run: Option<RunRef>,
    buffer: Vec<Metric>,
    /// The length of `metrics.jsonl` once the buffered records are sent.
    buffer_end: u64,
    down_since: Option<Instant>,
    next_try: Instant,
    pause: Duration,
    gave_up: bool,
    /// Whether a run is training while this sends (its warning then says what happens next);
    /// `normlab track`'s replay reports an unreachable server in its own line instead.
    live: bool,
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    /// A worker for `opening`, continuing from its `tracking.json` when there is one (a
    /// resumed run, or `normlab track`).
    pub fn new(opening: Opening, warnings: Arc<Mutex<Vec<String>>>, metrics_len: u64) -> Self {
        let TrackTarget::Mlflow { url } = &opening.target;
        let client = Mlflow::new(url);
        let fresh = TrackState {
            target: opening.target.to_string(),
            experiment: opening.experiment.clone(),
            parent_run_id: opening.parent_run_id.clone(),
            ..Default::default()
        };
        let mut state = match TrackState::read(&opening.dir) {
            Ok(Some(s)) if s.target == fresh.target && s.experiment == fresh.experiment => s,
            _ => fresh,
        };
        state.delivered_bytes = state.delivered_bytes.min(metrics_len);
        state.undelivered = None;
        let now = Instant::now();
        Self {
            client,
            opening,
            buffer_end: state.delivered_bytes,
            state,
            run: None,
            buffer: Vec::new(),
            down_since: None,
            next_try: now,
            pause: Duration::from_secs(1),
            gave_up: false,
            live: true,
            warnings,
        }
    }

    /// Buffers the records of the first `metrics_len` bytes of `metrics.jsonl` that the server
    /// has not acknowledged.
    fn catch_up(&mut self, metrics_len: u64) {
        let path = crate::run::layout::metrics(&self.opening.dir);
        let bytes = std::fs::read(&path).unwrap_or_default();
        let upto = (metrics_len as usize).min(bytes.len());
        if let Err(e) = self.add_lines(&bytes[..upto], &path) {
            self.warn(format!("records not sent: {e:#}"));
        }
    }

    /// Buffers every complete record of `bytes` (`metrics.jsonl` at `path`) after what the server
    /// has; returns their count.
    pub fn add_lines(&mut self, bytes: &[u8], path: &std::path::Path) -> anyhow::Result<usize> {
        use anyhow::Context;
        let mut at = self.state().delivered_bytes as usize;
        let mut n = 0;
        while let Some(len) = bytes.get(at..).and_then(|rest| rest.iter().position(|&b| b == b'\n')) {
            let line = &bytes[at..at + len];
            let r: MetricsRecord = serde_json::from_slice(line)
                .with_context(|| format!("{}: the record at byte {at} is corrupt", path.display()))?;
            at += len + 1;
            self.add(&r, at as u64);
            n += 1;
        }
        Ok(n)
    }

    /// A worker for `normlab track`: an unreachable server is the caller's to report.
    pub fn replaying(mut self) -> Self {
        self.live = false;
        self
    }

    fn serve(mut self, rx: Receiver<Msg>) {
        loop {
            match rx.recv_timeout(FLUSH_EVERY) {
                Ok(Msg::Record(r, end)) => self.add(&r, end),
                Ok(Msg::Truncated(len)) => self.truncate(len),
                Ok(Msg::Finish(status, files)) => return self.end(status, &files),
                Err(RecvTimeoutError::Timeout) => self.flush(false),
                Err(RecvTimeoutError::Disconnected) => return self.end("FAILED", &[]),
            }
        }
    }

    /// Buffers a record's metrics; sends when a batch is full.
    pub fn add(&mut self, r: &MetricsRecord, end: u64) {
        self.buffer.extend(metrics_of(r, now_ms()));
        self.buffer_end = end;
        if self.buffer.len() >= MAX_METRICS {
            self.flush(false);
        }
    }

    /// Buffers one metric that is no record's (a sweep's summary).
    pub fn push_metric(&mut self, m: Metric) {
        self.buffer.push(m);
    }

    fn truncate(&mut self, len: u64) {
        self.flush(false);
        self.state.delivered_bytes = self.state.delivered_bytes.min(len);
        self.buffer_end = self.buffer_end.min(len);
    }

    /// Sends the buffer (now, or when the pause after a failure is over); `last` makes this the
    /// final try.
    pub fn flush(&mut self, last: bool) {
        if self.gave_up || (!last && Instant::now() < self.next_try) {
            return;
        }
        match self.send_buffer() {
            Ok(()) => {
                self.down_since = None;
                self.pause = Duration::from_secs(1);
            }
            Err(why) => self.unreachable(why, last),
        }
    }

    /// Creates (or finds) the run, sends its params once, then the buffered metrics.
    fn send_buffer(&mut self) -> Result<(), String> {
        self.open_run()?;
        while !self.buffer.is_empty() {
            let n = self.buffer.len().min(MAX_METRICS);
            let run_id = self.state.run_id.clone().unwrap_or_default();
            match self.client.log_batch(&run_id, &self.buffer[..n], &[], &[]) {
                Ok(()) => {}
                Err(super::mlflow::Failure::Refused(why)) => self.warn(format!("metrics not recorded: {why}")),
                Err(super::mlflow::Failure::Unreachable(why)) => return Err(why),
            }
            self.buffer.drain(..n);
        }
        self.state.delivered_bytes = self.buffer_end;
        self.save();
        Ok(())
    }

    /// The server's run for this directory: created (with its params) the first time, found
    /// again after a resume.
    fn open_run(&mut self) -> Result<(), String> {
        use super::mlflow::Failure::{Refused, Unreachable};
        if self.run.is_some() {
            return Ok(());
        }
        let run = match self.state.run_id.clone() {
            Some(id) => {
                let artifact_uri = self.client.artifact_uri(&id).map_err(|e| e.to_string())?;
                self.client.set_status(&id, "RUNNING").map_err(|e| e.to_string())?;
                RunRef { run_id: id, artifact_uri }
            }
            None => {
                let exp = self.client.experiment(&self.opening.experiment).map_err(|e| e.to_string())?;
                let mut tags = self.opening.tags.clone();
                if let Some(p) = &self.opening.parent_run_id {
                    tags.push(("mlflow.parentRunId".into(), p.clone()));
                }
                let run = self.client.create_run(&exp, &self.opening.run_name, &tags).map_err(|e| e.to_string())?;
                self.state.experiment_id = Some(exp);
                self.state.run_id = Some(run.run_id.clone());
                self.save();
                run
            }
        };
        if !self.state.params_sent {
            let params = params_of(&self.opening.config_toml).map_err(|e| format!("{e:#}"))?;
            for chunk in params.chunks(MAX_PARAMS) {
                match self.client.log_batch(&run.run_id, &[], chunk, &[]) {
                    Ok(()) => {}
                    Err(Refused(why)) => self.warn(format!("params not recorded: {why}")),
                    Err(Unreachable(why)) => return Err(why),
                }
            }
            self.state.params_sent = true;
            self.save();
        }
        self.run = Some(run);
        Ok(())
    }

    /// A failed try: pause longer before the next, or give up.
    fn unreachable(&mut self, why: String, last: bool) {
        let since = *self.down_since.get_or_insert_with(Instant::now);
        if last || since.elapsed() >= GIVE_UP {
            self.gave_up = true;
            self.state.undelivered = Some(why.clone());
            self.save();
            if !self.live {
                return;
            }
            self.warn(format!(
                "the tracking server stopped answering ({why}); training goes on without it — {} records what it \
                 has; send the rest with `normlab track {}`",
                crate::run::layout::tracking(&self.opening.dir).display(),
                self.opening.dir.display()
            ));
            return;
        }
        self.next_try = Instant::now() + self.pause;
        self.pause = (self.pause * 2).min(Duration::from_secs(30));
    }

    /// Sends what is left, uploads `files` and sets the run's final status.
    pub fn end(&mut self, status: &'static str, files: &[(String, PathBuf)]) {
        self.flush(true);
        if self.gave_up {
            return;
        }
        let Some(run) = self.run.clone() else { return };
        for (path, file) in files.iter().filter(|(_, f)| f.is_file()) {
            let sent = super::mlflow::read_artifact(file)
                .map_err(|e| super::mlflow::Failure::Refused(format!("{e:#}")))
                .and_then(|bytes| self.client.put_artifact(&run.artifact_uri, path, &bytes));
            if let Err(e) = sent {
                self.warn(format!("artifact {path} not uploaded: {e}"));
            }
        }
        match self.client.set_status(&run.run_id, status) {
            Ok(()) => self.state.status = Some(status.into()),
            Err(e) => self.warn(format!("the run's status was not set: {e}")),
        }
        self.save();
    }

    fn save(&mut self) {
        if let Err(e) = self.state.write(&self.opening.dir) {
            self.warn(format!("cannot record what the tracking server has: {e:#}"));
        }
    }

    fn warn(&self, w: String) {
        self.warnings.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    }

    /// Whether the thread stopped trying (what `normlab track` reports).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// The state as it stands.
    pub fn state(&self) -> &TrackState {
        &self.state
    }
}
