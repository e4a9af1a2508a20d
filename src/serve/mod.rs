//! `normlab serve`: a trained run behind an OpenAI-compatible HTTP server.
//!
//! - [`api`]: request bodies, their checks, error objects; [`defaults_only`]: OpenAI's fields
//!   this server accepts only where they ask nothing of it
//! - [`app`]: the server's shared state, job queueing, JSON and SSE answers
//! - [`listen`]: connections with a header-read timeout, a bounded graceful shutdown
//! - [`http`]: the routes (axum on tokio), server-sent events for `stream: true`, vLLM's
//!   tokenizer routes
//! - [`completions`]: `/v1/completions`: prompts in OpenAI's four forms, `n`, `echo`,
//!   `logprobs`, streaming
//! - [`chat`]: `/v1/chat/completions`: messages through the run's chat template, the same decoding
//! - [`normalize`]: the pairs task form
//! - [`engine`]: one thread decoding every active request together through
//!   [`crate::decode::Rows`] (the KV cache rows join and leave between steps)
//! - [`text`]: streamed text that never splits a character or leaks a stop string
//! - [`metrics`]: counters and the latency histogram in Prometheus' format
//!
//! Requests wait in a bounded queue (503 with `Retry-After` past it) and join the decoding
//! batch between steps, up to `max_batch` rows.

pub mod api;
pub mod app;
pub mod chat;
pub mod completions;
pub mod defaults_only;
pub mod engine;
pub mod http;
pub mod listen;
pub mod metrics;
pub mod normalize;
pub mod text;

use crate::run::saved::SavedRun;
use anyhow::Context;
use app::App;
use engine::Engine;
pub use listen::Stopped;
use metrics::Metrics;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::thread::JoinHandle;

/// How the server is started.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// A run directory (or one of its checkpoints).
    pub checkpoint: PathBuf,
    pub host: String,
    /// 0: any free port.
    pub port: u16,
    /// Rows decoded together.
    pub max_batch: usize,
    /// Requests waiting to join the batch before new ones get 503.
    pub queue: usize,
    /// End on SIGINT/SIGTERM (the command); off for an in-process server (the benchmark).
    pub signals: bool,
    /// How long the requests in flight may take to finish once a stop is asked.
    pub grace: std::time::Duration,
}

/// A started server.
pub struct Server {
    pub addr: SocketAddr,
    pub model: String,
    pub recipe: String,
    /// Pairs runs serve `/v1/normalize`.
    pub pairs: bool,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    http: Option<JoinHandle<Stopped>>,
}

impl Server {
    /// Loads the run, starts the decoding thread and binds; returns once the port is open.
    pub fn start(o: &ServeOptions) -> anyhow::Result<Self> {
        anyhow::ensure!(o.max_batch > 0, "--max-batch must be ≥ 1");
        anyhow::ensure!(o.queue > 0, "--queue must be ≥ 1");
        let saved = SavedRun::open(&o.checkpoint)?;
        let device = saved.cfg.open_device()?;
        let model = saved.model(&device)?;
        let pairs = saved.cfg.data.task == crate::data::config::Task::Pairs;
        let end_token = pairs.then(|| crate::data::pairs::render::end_id(&saved.tokenizer)).transpose()?;
        let name = saved.run.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "normlab".into());
        let recipe = saved.cfg.recipe().name.clone();
        let chat = saved.chat_template().unwrap_or_else(crate::data::chat::template::ChatTemplate::chatml);
        let context = saved.cfg.train.seq_len;
        let boundary = crate::data::boundary::boundary(&saved.tokenizer, saved.cfg.data.task)?;
        let vocab_size = saved.cfg.model.vocab_size;
        let tokenizer = Arc::new(saved.tokenizer);
        let metrics = Arc::new(Metrics::default());
        let (jobs, rx) = std::sync::mpsc::channel();
        let engine = Engine {
            model,
            tokenizer: tokenizer.clone(),
            device,
            context,
            max_batch: o.max_batch,
            metrics: metrics.clone(),
        };
        std::thread::Builder::new().name("normlab-decode".into()).spawn(move || engine.run(rx))?;
        let app = Arc::new(App {
            jobs,
            tokenizer,
            vocab_size,
            boundary,
            context,
            queue_limit: o.queue,
            metrics,
            model: name.clone(),
            recipe: recipe.clone(),
            end_token,
            chat,
            counter: AtomicU64::new(0),
        });
        let l = listen(o, app)?;
        Ok(Self { addr: l.addr, model: name, recipe, pairs, shutdown: Some(l.shutdown), http: Some(l.thread) })
    }

    /// Serves until a stop signal (with `signals`) or [`Server::stop`]; says which.
    pub fn wait(mut self) -> anyhow::Result<Stopped> {
        match self.http.take() {
            Some(h) => h.join().map_err(|_| anyhow::anyhow!("the HTTP thread panicked")),
            None => Ok(Stopped::Asked),
        }
    }

    /// Closes the port after the requests in flight (within the grace period).
    pub fn stop(mut self) -> anyhow::Result<Stopped> {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        self.wait()
    }
}

/// A bound HTTP server on its own thread.
struct Listening {
    addr: SocketAddr,
    /// Closes the port once the requests in flight are answered.
    shutdown: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<Stopped>,
}

/// Binds on a thread of its own running tokio; returns the bound address.
fn listen(o: &ServeOptions, app: Arc<App>) -> anyhow::Result<Listening> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let target = format!("{}:{}", o.host, o.port);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(&target))
        .with_context(|| format!("cannot listen on {target}; pick another --port or --host"))?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (signals, grace) = (o.signals, o.grace);
    let router = http::router(app);
    let thread = std::thread::Builder::new()
        .name("normlab-http".into())
        .spawn(move || rt.block_on(listen::serve(listener, router, listen::stop_requested(rx, signals), grace)))?;
    Ok(Listening { addr, shutdown: tx, thread })
}
