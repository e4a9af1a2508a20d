//! What the routes share: the server's state ([`App`]), queueing a request's jobs, and the
//! JSON, error and server-sent-event answers.

use super::api::ApiError;
use super::engine::Job;
use super::metrics::Metrics;
use crate::data::Tokenizer;
use crate::data::boundary::Boundary;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// What the handlers share.
pub struct App {
    pub jobs: std::sync::mpsc::Sender<Job>,
    pub tokenizer: Arc<Tokenizer>,
    pub vocab_size: usize,
    /// The token the run names BOS, EOS and PAD.
    pub boundary: Boundary,
    pub context: usize,
    pub queue_limit: usize,
    pub metrics: Arc<Metrics>,
    pub model: String,
    pub recipe: String,
    /// A pairs run's `<end>` token: the task form is served, and completions stop there.
    pub end_token: Option<u32>,
    /// `/v1/chat/completions`' template: the run's, else ChatML.
    pub chat: crate::data::chat::template::ChatTemplate,
    pub counter: AtomicU64,
}

impl App {
    /// The model a request names, checked as `GET /v1/models/{id}` checks it (vLLM's rule):
    /// unnamed (absent or `null`) or the served model; any other name is a 404.
    pub fn check_model(&self, named: Option<&str>) -> Result<(), ApiError> {
        match named {
            Some(id) if id != self.model => Err(ApiError {
                status: 404,
                message: format!("the model `{id}` does not exist; this server serves `{}`", self.model),
                param: Some("model"),
            }),
            _ => Ok(()),
        }
    }
}

pub fn json_response(status: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// An error answer, counted.
pub fn error(app: &App, e: ApiError) -> Response {
    app.metrics.errors.fetch_add(1, Ordering::Relaxed);
    let mut r = json_response(e.status, &e.body());
    if e.status == 503 {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Refuses a request asking for more completions (prompts × `n`) than the queue could ever
/// hold.
pub fn check_count(app: &App, n: usize) -> Result<(), ApiError> {
    if n > app.queue_limit {
        return Err(ApiError::bad(
            format!("the request asks for {n} completions; the server queues at most {} (--queue)", app.queue_limit),
            Some("n"),
        ));
    }
    Ok(())
}

/// Queues a request's jobs, all or none: 503 when the queue has no room for them, 400 when
/// it never could.
pub fn enqueue(app: &App, jobs: Vec<Job>) -> Result<(), ApiError> {
    let n = jobs.len();
    check_count(app, n)?;
    if app.metrics.queued.fetch_add(n, Ordering::AcqRel) + n > app.queue_limit {
        app.metrics.queued.fetch_sub(n, Ordering::AcqRel);
        app.metrics.rejected.fetch_add(1, Ordering::Relaxed);
        let message = format!("the queue is full ({} requests waiting); retry shortly", app.queue_limit);
        return Err(ApiError { status: 503, message, param: None });
    }
    for (i, job) in jobs.into_iter().enumerate() {
        if app.jobs.send(job).is_err() {
            app.metrics.queued.fetch_sub(n - i, Ordering::AcqRel);
            return Err(ApiError { status: 503, message: "the decoding engine has stopped".into(), param: None });
        }
    }
    Ok(())
}

/// The text's tokens, checked non-empty.
pub fn encode(app: &App, text: &str, field: &'static str) -> Result<Vec<u32>, ApiError> {
    if text.is_empty() {
        return Err(ApiError::bad(format!("{field} must not be empty"), Some(field)));
    }
    let ids = app.tokenizer.encode(text).map_err(|e| ApiError::bad(e.to_string(), Some(field)))?;
    if ids.is_empty() {
        return Err(ApiError::bad(format!("{field} encodes to no tokens"), Some(field)));
    }
    Ok(ids)
}

/// Server-sent events: one `data:` line per value, then `[DONE]`.
pub fn sse_response(values: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events = values
        .map(|v| Ok::<_, Infallible>(SseEvent::default().data(v.to_string())))
        .chain(futures_util::stream::once(async { Ok(SseEvent::default().data("[DONE]")) }));
    Sse::new(events).into_response()
}
