//! The routes: `POST /v1/completions`, `POST /v1/normalize` (pairs runs), `GET /v1/models`,
//! vLLM's `POST /tokenize`, `POST /detokenize` and `GET /tokenizer_info`, `GET /health`,
//! `GET /metrics`. Bodies are read as bytes and parsed here, so that every malformed request
//! gets OpenAI's JSON error object with a 4xx status.

use super::api::{ApiError, DetokenizeRequest, TokenizeRequest, parse};
use super::engine::Job;
use super::metrics::Metrics;
use crate::data::Tokenizer;
use crate::data::boundary::Boundary;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
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
    pub counter: AtomicU64,
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/normalize", post(normalize))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/tokenizer_info", get(tokenizer_info))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(app)
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

/// Queues a request's jobs, all or none: 503 when the queue has no room for them, 400 when
/// it never could.
pub fn enqueue(app: &App, jobs: Vec<Job>) -> Result<(), ApiError> {
    let n = jobs.len();
    if n > app.queue_limit {
        return Err(ApiError::bad(
            format!("the request asks for {n} completions; the server queues at most {} (--queue)", app.queue_limit),
            Some("n"),
        ));
    }
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

async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    match super::completions::completions(app.clone(), &body).await {
        Ok(r) => r,
        Err(e) => error(&app, e),
    }
}

async fn normalize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    match super::normalize::normalize(&app, &body).await {
        Ok(r) => r,
        Err(e) => error(&app, e),
    }
}

async fn tokenize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let answer = parse::<TokenizeRequest>(&body).and_then(|r| {
        let ids = app.tokenizer.encode(&r.prompt).map_err(|e| ApiError::bad(e.to_string(), Some("prompt")))?;
        Ok(json!({"count": ids.len(), "max_model_len": app.context, "tokens": ids}))
    });
    match answer {
        Ok(v) => json_response(200, &v),
        Err(e) => error(&app, e),
    }
}

async fn detokenize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let answer = parse::<DetokenizeRequest>(&body).and_then(|r| {
        if let Some(i) = r.tokens.iter().find(|&&i| i as usize >= app.vocab_size) {
            let message = format!("token id {i} is outside the vocabulary of {} tokens", app.vocab_size);
            return Err(ApiError::bad(message, Some("tokens")));
        }
        let text = app.tokenizer.decode(&r.tokens).map_err(|e| ApiError::bad(e.to_string(), Some("tokens")))?;
        Ok(json!({"prompt": text}))
    });
    match answer {
        Ok(v) => json_response(200, &v),
        Err(e) => error(&app, e),
    }
}

/// The tokenizer's description as vLLM's `/tokenizer_info` gives it; the special tokens are
/// the run's document boundary ([`crate::data::boundary`]), as text.
async fn tokenizer_info(State(app): State<Arc<App>>) -> Response {
    let b = &app.boundary.text;
    json_response(
        200,
        &json!({"tokenizer_class": format!("normlab-{}", app.tokenizer.kind().name()), "eos_token": b,
            "bos_token": b, "pad_token": b, "model_max_length": app.context, "vocab_size": app.vocab_size}),
    )
}

async fn models(State(app): State<Arc<App>>) -> Response {
    json_response(
        200,
        &json!({"object": "list", "data": [{"id": app.model, "object": "model", "created": 0, "owned_by": "normlab",
            "max_model_len": app.context}]}),
    )
}

async fn health(State(app): State<Arc<App>>) -> Response {
    json_response(
        200,
        &json!({"status": "ok", "model": app.model, "recipe": app.recipe, "context": app.context,
            "task": if app.end_token.is_some() { "pairs" } else { "lm" }}),
    )
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let body = app.metrics.render();
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn not_found(State(app): State<Arc<App>>) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let e = ApiError {
        status: 404,
        message: "no such route; the server answers POST /v1/completions, POST /v1/normalize, GET /v1/models, \
            POST /tokenize, POST /detokenize, GET /tokenizer_info, GET /health and GET /metrics"
            .into(),
        param: None,
    };
    error(&app, e)
}
