//! A chat template is code a user supplies: it is rendered within bounds on its time, memory
//! and output, so that no template can hold a fine-tune before its first step or a server's
//! requests, health check and shutdown.
//!
//! - **Steps**: minijinja's fuel, [`FUEL`] instructions per rendering (a loop of `range(100000)`
//!   inside another stops here, with its own message).
//! - **Output**: at most [`MAX_OUTPUT`] bytes written.
//! - **Memory and time**: a template can build a huge string in a few steps (`x + x` doubled 31
//!   times is 2 GiB), which fuel does not see. In the `normlab` binary every rendering of a
//!   user's template therefore runs in a child process of the same executable
//!   (`normlab __render-chat-template`, started on first use and kept for the next rendering),
//!   whose address space is limited to [`MAX_MEMORY`] bytes and which is killed when a rendering
//!   takes longer than [`MAX_TIME`]. A killed or crashed worker is replaced at the next rendering.
//!
//! Outside the binary (the library's unit tests) [`enable`] is never called and renderings run
//! in-process, bounded in steps and output only.

use anyhow::{anyhow, bail};
use minijinja::{Environment, Error, ErrorKind};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// minijinja instructions one rendering may execute (≈ 1 s of rendering; a ChatML rendering
/// of a 20 000-turn conversation takes ≈ 0.3 M).
pub const FUEL: u64 = 50_000_000;
/// The most bytes one rendering may write.
pub const MAX_OUTPUT: usize = 64 << 20;
/// The worker process's address-space limit.
pub const MAX_MEMORY: u64 = 1 << 30;
/// The longest one rendering may take in the worker.
pub const MAX_TIME: Duration = Duration::from_secs(10);
/// Workers alive at once (renderings beyond that wait for one).
const MAX_WORKERS: usize = 4;

/// The argument that makes the binary a rendering worker.
pub const WORKER_ARG: &str = "__render-chat-template";

/// One rendering asked of a worker.
#[derive(Serialize, Deserialize)]
pub struct Request {
    pub source: String,
    pub bos_token: String,
    pub eos_token: String,
    pub messages: serde_json::Value,
    pub add_generation_prompt: bool,
}

/// A worker's answer: the text, or the template's error.
#[derive(Serialize, Deserialize)]
enum Reply {
    Text(String),
    Error(String),
}

static EXECUTABLE: OnceLock<PathBuf> = OnceLock::new();

/// Renders user templates in worker processes of `exe` from now on (the `normlab` binary calls
/// this with itself).
pub fn enable(exe: PathBuf) {
    let _ = EXECUTABLE.set(exe);
}

/// Renders `req` within the bounds: in a worker when [`enable`]d, else in-process.
pub fn render(req: &Request) -> anyhow::Result<String> {
    match EXECUTABLE.get() {
        Some(exe) => POOL.render(exe, req),
        None => render_here(req),
    }
}

/// Jinja as `transformers` sets it up for chat templates: `trim_blocks`, `lstrip_blocks`, loop
/// controls, Python's string methods, `raise_exception` and `strftime_now`; bounded in steps
/// ([`FUEL`]).
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_fuel(Some(FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_function("strftime_now", |format: String| -> Result<String, Error> {
        strftime_now(&format).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
    });
    env
}

/// `transformers`' `strftime_now(format)`: `datetime.now().strftime(format)`, the local time
/// formatted by the C library's `strftime`, which Python's calls too.
#[cfg(unix)]
fn strftime_now(format: &str) -> Result<String, String> {
    let fmt = std::ffi::CString::new(format).map_err(|_| "strftime_now's format holds a NUL byte".to_string())?;
    let mut buf = vec![0u8; 256 + 4 * format.len()];
    // SAFETY: `time` and `localtime_r` fill the values they are given; `strftime` writes at
    // most `buf.len()` bytes into `buf` and returns how many.
    let n = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm)
    };
    buf.truncate(n);
    String::from_utf8(buf).map_err(|_| "strftime_now wrote invalid UTF-8".to_string())
}

#[cfg(not(unix))]
fn strftime_now(_format: &str) -> Result<String, String> {
    Err("strftime_now needs a Unix C library".into())
}

/// Renders in this process, bounded in steps and output: what a worker runs.
pub fn render_here(req: &Request) -> anyhow::Result<String> {
    let env = environment();
    let tmpl = env.template_from_str(&req.source).map_err(|e| anyhow!("the chat template does not parse: {e:#}"))?;
    let ctx = minijinja::context! {
        messages => &req.messages,
        add_generation_prompt => req.add_generation_prompt,
        bos_token => &req.bos_token,
        eos_token => &req.eos_token,
    };
    let mut out = Capped { bytes: Vec::new(), over: false };
    match tmpl.render_captured_to(ctx, &mut out) {
        _ if out.over => bail!(
            "the chat template wrote more than {} MiB for one conversation; a chat template renders the turns it \
             is given, once",
            MAX_OUTPUT >> 20
        ),
        Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => bail!(
            "the chat template ran more than {FUEL} steps for one conversation (a loop that does not end, or loops \
             inside loops); a chat template renders the turns it is given, once"
        ),
        Err(e) => Err(anyhow!("the chat template failed to render: {e:#}")),
        Ok(_) => String::from_utf8(out.bytes).map_err(|_| anyhow!("the chat template wrote invalid UTF-8")),
    }
}

/// A writer that refuses past [`MAX_OUTPUT`] bytes.
struct Capped {
    bytes: Vec<u8>,
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_OUTPUT {
            self.over = true;
            return Err(std::io::Error::other("output bound"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The worker's main loop (`normlab __render-chat-template`): one JSON request a line on
/// standard input, one JSON reply a line on standard output, until standard input closes.
pub fn worker_main() -> i32 {
    limit_memory();
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return 1 };
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(req) => match render_here(&req) {
                Ok(t) => Reply::Text(t),
                Err(e) => Reply::Error(format!("{e:#}")),
            },
            Err(e) => Reply::Error(format!("a malformed rendering request: {e}")),
        };
        let Ok(text) = serde_json::to_string(&reply) else { return 1 };
        if writeln!(stdout, "{text}").and_then(|_| stdout.flush()).is_err() {
            return 1;
        }
    }
    0
}

#[cfg(unix)]
fn limit_memory() {
    let lim = libc::rlimit { rlim_cur: MAX_MEMORY as libc::rlim_t, rlim_max: MAX_MEMORY as libc::rlim_t };
    // SAFETY: setrlimit reads the struct it is given; the limit only lowers this process's own.
    unsafe {
        libc::setrlimit(libc::RLIMIT_AS, &lim);
    }
}

#[cfg(not(unix))]
fn limit_memory() {}

/// A running worker: its stdin, and its stdout's lines as they arrive.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Worker {
    fn start(exe: &PathBuf) -> anyhow::Result<Self> {
        let mut child = Command::new(exe)
            .arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow!("cannot start the chat template's rendering process {}: {e}", exe.display()))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else { bail!("the rendering process has no pipes") };
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { child, stdin, lines })
    }

    /// One rendering: `Ok` holds the template's own answer (its text or its error); `Err` says the
    /// worker can no longer be used (it ran past its time, or died), and why.
    fn render(&mut self, req: &Request) -> Result<anyhow::Result<String>, anyhow::Error> {
        let line = serde_json::to_string(req)?;
        if writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()).is_err() {
            return Err(self.died());
        }
        match self.lines.recv_timeout(MAX_TIME) {
            Ok(line) => match serde_json::from_str::<Reply>(&line) {
                Ok(Reply::Text(t)) => Ok(Ok(t)),
                Ok(Reply::Error(e)) => Ok(Err(anyhow!(e))),
                Err(e) => Err(anyhow!("the rendering process answered `{line}`: {e}")),
            },
            Err(RecvTimeoutError::Timeout) => {
                self.stop();
                Err(anyhow!(
                    "the chat template took longer than {} s to render one conversation; a chat template renders \
                     the turns it is given, once",
                    MAX_TIME.as_secs()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.died()),
        }
    }

    /// Why the worker ended: its memory bound, as far as one can tell from outside.
    fn died(&mut self) -> anyhow::Error {
        self.stop();
        anyhow!(
            "the chat template used more than {} MiB of memory rendering one conversation (the rendering process \
             ended); a chat template renders the turns it is given, once",
            MAX_MEMORY >> 20
        )
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Idle workers, and how many exist.
struct Pool {
    idle: Mutex<(Vec<Worker>, usize)>,
    freed: Condvar,
}

static POOL: Pool = Pool { idle: Mutex::new((Vec::new(), 0)), freed: Condvar::new() };

impl Pool {
    fn render(&self, exe: &PathBuf, req: &Request) -> anyhow::Result<String> {
        let mut w = self.take(exe)?;
        let out = w.render(req);
        let mut g = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        match out {
            Ok(answer) => {
                g.0.push(w);
                self.freed.notify_one();
                answer
            }
            Err(e) => {
                g.1 -= 1;
                self.freed.notify_one();
                Err(e)
            }
        }
    }

    /// An idle worker, a new one while fewer than [`MAX_WORKERS`] exist, else the next freed.
    fn take(&self, exe: &PathBuf) -> anyhow::Result<Worker> {
        let mut g = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(w) = g.0.pop() {
                return Ok(w);
            }
            if g.1 < MAX_WORKERS {
                g.1 += 1;
                drop(g);
                return Worker::start(exe).inspect_err(|_| {
                    let mut g = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                    g.1 -= 1;
                });
            }
            g = self.freed.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(source: &str) -> Request {
        Request {
            source: source.into(),
            bos_token: String::new(),
            eos_token: String::new(),
            messages: serde_json::json!([]),
            add_generation_prompt: false,
        }
    }

    /// Nested loops of 100 000 are refused by fuel, a template writing past the output bound by
    /// the writer, each with its own message.
    #[test]
    fn runaway_templates_stop_at_their_bounds() {
        let loops = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
        let e = format!("{:#}", render_here(&req(loops)).unwrap_err());
        assert!(e.contains("more than 50000000 steps"), "{e}");
        let wide = "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}";
        let e = format!("{:#}", render_here(&req(wide)).unwrap_err());
        assert!(e.contains("more than 64 MiB"), "{e}");
        assert_eq!(render_here(&req("{{ 'a' * 3 }}")).unwrap(), "aaa");
    }
}
