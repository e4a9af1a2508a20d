//! The routes: `POST /v1/completions`, `POST /v1/normalize` (pairs runs), `GET /v1/models`,
//! `GET /health`, `GET /metrics`. Bodies are read as bytes and parsed here, so that every
//! malformed request gets OpenAI's JSON error object with a 4xx status.

use super::api::{ApiError, CompletionRequest, NormalizeRequest, parse};
use super::engine::{Event, Finish, Job};
use super::metrics::Metrics;
use crate::data::Tokenizer;
use crate::train::generate::Sampling;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// What the handlers share.
pub struct App {
    pub jobs: std::sync::mpsc::Sender<Job>,
    pub tokenizer: Arc<Tokenizer>,
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
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(app)
}

fn json_response(status: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn error(app: &App, e: ApiError) -> Response {
    app.metrics.errors.fetch_add(1, Ordering::Relaxed);
    let mut r = json_response(e.status, &e.body());
    if e.status == 503 {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Queues a job; 503 when the queue is full.
fn enqueue(app: &App, job: Job) -> Result<(), ApiError> {
    if app.metrics.queued.fetch_add(1, Ordering::AcqRel) >= app.queue_limit {
        app.metrics.queued.fetch_sub(1, Ordering::AcqRel);
        app.metrics.rejected.fetch_add(1, Ordering::Relaxed);
        let message = format!("the queue is full ({} requests waiting); retry shortly", app.queue_limit);
        return Err(ApiError { status: 503, message, param: None });
    }
    app.jobs.send(job).map_err(|_| {
        app.metrics.queued.fetch_sub(1, Ordering::AcqRel);
        ApiError { status: 503, message: "the decoding engine has stopped".into(), param: None }
    })
}

/// The prompt's tokens, checked non-empty.
fn encode(app: &App, text: &str, field: &'static str) -> Result<Vec<u32>, ApiError> {
    if text.is_empty() {
        return Err(ApiError::bad(format!("{field} must not be empty"), Some(field)));
    }
    let ids = app.tokenizer.encode(text).map_err(|e| ApiError::bad(e.to_string(), Some(field)))?;
    if ids.is_empty() {
        return Err(ApiError::bad(format!("{field} encodes to no tokens"), Some(field)));
    }
    Ok(ids)
}

/// One streamed or final piece of a completion.
fn completion_chunk(app: &App, id: &str, text: &str, finish: Option<Finish>) -> Value {
    json!({
        "id": id, "object": "text_completion", "created": now(), "model": app.model,
        "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish.map(Finish::as_str)}],
    })
}

/// Everything the engine sends for one request: (text, finish, tokens) or the failure.
async fn collect(mut rx: UnboundedReceiver<Event>) -> Result<(String, Finish, usize), ApiError> {
    let mut text = String::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Text(t) => text.push_str(&t),
            Event::Done { finish, tokens } => return Ok((text, finish, tokens)),
            Event::Failed(m) => return Err(ApiError { status: 500, message: m, param: None }),
        }
    }
    Err(ApiError { status: 500, message: "the decoding engine stopped".into(), param: None })
}

/// Server-sent events: `chunk(text, finish)` per engine event, then `[DONE]`.
fn sse(
    rx: UnboundedReceiver<Event>,
    chunk: impl Fn(&str, Option<Finish>) -> Value + Send + Sync + 'static,
) -> Response {
    let chunk = Arc::new(chunk);
    let events = futures_util::stream::unfold((rx, false), move |(mut rx, ended)| {
        let chunk = chunk.clone();
        async move {
            if ended {
                return None;
            }
            let (data, end) = match rx.recv().await? {
                Event::Text(t) => (chunk(&t, None), false),
                Event::Done { finish, .. } => (chunk("", Some(finish)), true),
                Event::Failed(m) => (json!({"error": {"message": m, "type": "server_error"}}), true),
            };
            Some((Ok::<_, Infallible>(SseEvent::default().data(data.to_string())), (rx, end)))
        }
    })
    .chain(futures_util::stream::once(async { Ok(SseEvent::default().data("[DONE]")) }));
    Sse::new(events).into_response()
}

async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    match start_completion(&app, &body) {
        Err(e) => error(&app, e),
        Ok((rx, true, id, _)) => {
            let a = app.clone();
            sse(rx, move |t, f| completion_chunk(&a, &id, t, f))
        }
        Ok((rx, _, id, prompt_tokens)) => match collect(rx).await {
            Err(e) => error(&app, e),
            Ok((text, finish, tokens)) => {
                let mut v = completion_chunk(&app, &id, &text, Some(finish));
                v["usage"] = json!({"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                    "total_tokens": prompt_tokens + tokens});
                json_response(200, &v)
            }
        },
    }
}

type Started = (UnboundedReceiver<Event>, bool, String, usize);

fn start_completion(app: &App, body: &[u8]) -> Result<Started, ApiError> {
    let req: CompletionRequest = parse(body)?;
    let (sampling, stops) = (req.sampling()?, req.stops()?);
    let prompt = encode(app, &req.prompt, "prompt")?;
    let max_new = req.max_new(prompt.len(), app.context)?;
    let n = app.counter.fetch_add(1, Ordering::Relaxed);
    let seed = req.seed.unwrap_or(n);
    let (tx, rx) = unbounded_channel();
    let prompt_tokens = prompt.len();
    app.metrics.prompt_tokens.fetch_add(prompt_tokens as u64, Ordering::Relaxed);
    let job =
        Job { prompt, max_new, sampling, seed, stops, end_token: app.end_token, arrived: Instant::now(), events: tx };
    enqueue(app, job)?;
    Ok((rx, req.stream, format!("cmpl-{n}"), prompt_tokens))
}

async fn normalize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let started = (|| {
        let Some(end) = app.end_token else {
            return Err(ApiError {
                status: 404,
                message: "this run is not a pairs run (data.task = \"pairs\"); use /v1/completions".into(),
                param: None,
            });
        };
        let req: NormalizeRequest = parse(&body)?;
        encode(&app, &req.input, "input")?;
        let prompt = crate::data::pairs::render::prompt(&app.tokenizer, &req.input)
            .map_err(|e| ApiError::bad(e.to_string(), Some("input")))?;
        let room = app.context.saturating_sub(prompt.len());
        if room == 0 {
            return Err(ApiError::bad(
                format!(
                    "the input is {} tokens with its separator; the model's context is {}",
                    prompt.len(),
                    app.context
                ),
                Some("input"),
            ));
        }
        let (tx, rx) = unbounded_channel();
        let greedy = Sampling { temperature: 0.0, top_k: None, top_p: 1.0 };
        let job = Job {
            prompt,
            max_new: room,
            sampling: greedy,
            seed: 0,
            stops: Vec::new(),
            end_token: Some(end),
            arrived: Instant::now(),
            events: tx,
        };
        enqueue(&app, job)?;
        Ok((rx, req.stream))
    })();
    match started {
        Err(e) => error(&app, e),
        Ok((rx, true)) => sse(rx, |t, f| json!({"output": t, "finish_reason": f.map(Finish::as_str)})),
        Ok((rx, false)) => match collect(rx).await {
            Err(e) => error(&app, e),
            Ok((text, finish, tokens)) => {
                json_response(200, &json!({"output": text, "finish_reason": finish.as_str(), "tokens": tokens}))
            }
        },
    }
}

async fn models(State(app): State<Arc<App>>) -> Response {
    json_response(
        200,
        &json!({"object": "list", "data": [{"id": app.model, "object": "model", "created": 0, "owned_by": "normlab"}]}),
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
            GET /health and GET /metrics"
            .into(),
        param: None,
    };
    error(&app, e)
}
