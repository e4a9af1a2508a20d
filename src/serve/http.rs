//! The routes: `POST /v1/completions`, `POST /v1/chat/completions`, `POST /v1/normalize` (pairs runs), `GET /v1/models`,
//! `GET /v1/models/{id}`,
//! vLLM's `POST /tokenize`, `POST /detokenize` and `GET /tokenizer_info`, `GET /health`,
//! `GET /metrics`. Bodies are read as bytes and parsed here, so that every malformed request
//! gets OpenAI's JSON error object with a 4xx status.

use super::api::{ApiError, DetokenizeRequest, TokenizeRequest, parse};
use super::app::{App, error, json_response};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/normalize", post(normalize))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/tokenizer_info", get(tokenizer_info))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), bounded_body))
        .with_state(app)
}

/// Every route, for the messages that refuse another.
const ROUTES: &str = "POST /v1/completions, POST /v1/chat/completions, POST /v1/normalize, GET /v1/models, \
    GET /v1/models/{id}, POST /tokenize, POST /detokenize, \
    GET /tokenizer_info, GET /health and GET /metrics";

/// The largest request body read (bytes).
pub const MAX_BODY: usize = 2 << 20;
/// How long a client may take to send a request's body.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Counts every request and reads its body whole, within [`MAX_BODY`] and [`BODY_TIMEOUT`]:
/// a larger body gets 413, a slower one 408, both as OpenAI's JSON error (counted).
async fn bounded_body(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    use http_body_util::BodyExt;
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let fail = |status, message: String| error(&app, ApiError { status, message, param: None });
    match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Err(_) => fail(
            408,
            format!("the request body took longer than {} s to arrive; send it whole", BODY_TIMEOUT.as_secs()),
        ),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            fail(413, format!("the request body is larger than {} MiB; send fewer or shorter prompts", MAX_BODY >> 20))
        }
        Ok(Err(e)) => fail(400, format!("the request body could not be read: {e}")),
        Ok(Ok(c)) => next.run(Request::from_parts(parts, axum::body::Body::from(c.to_bytes()))).await,
    }
}

async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    match super::completions::completions(app.clone(), &body).await {
        Ok(r) => r,
        Err(e) => error(&app, e),
    }
}

async fn chat_completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    match super::chat::chat_completions(app.clone(), &body).await {
        Ok(r) => r,
        Err(e) => error(&app, e),
    }
}

async fn normalize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    match super::normalize::normalize(&app, &body).await {
        Ok(r) => r,
        Err(e) => error(&app, e),
    }
}

async fn tokenize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let answer = parse::<TokenizeRequest>(&body).and_then(|r| {
        app.check_model(r.model.as_deref())?;
        let ids = app.tokenizer.encode(&r.prompt).map_err(|e| ApiError::bad(e.to_string(), Some("prompt")))?;
        Ok(json!({"count": ids.len(), "max_model_len": app.context, "tokens": ids}))
    });
    match answer {
        Ok(v) => json_response(200, &v),
        Err(e) => error(&app, e),
    }
}

async fn detokenize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let answer = parse::<DetokenizeRequest>(&body).and_then(|r| {
        app.check_model(r.model.as_deref())?;
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

/// The one model's entry, as `GET /v1/models` lists it and `GET /v1/models/{id}` returns it.
fn model_entry(app: &App) -> serde_json::Value {
    json!({"id": app.model, "object": "model", "created": 0, "owned_by": "normlab", "max_model_len": app.context})
}

async fn models(State(app): State<Arc<App>>) -> Response {
    json_response(200, &json!({"object": "list", "data": [model_entry(&app)]}))
}

/// OpenAI's model retrieval: the served model by its id; any other id is a 404.
async fn model(State(app): State<Arc<App>>, axum::extract::Path(id): axum::extract::Path<String>) -> Response {
    match app.check_model(Some(&id)) {
        Ok(()) => json_response(200, &model_entry(&app)),
        Err(e) => error(&app, e),
    }
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

async fn method_not_allowed(State(app): State<Arc<App>>, method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let message = format!("{method} {} is not a route; the server answers {ROUTES}", uri.path());
    error(&app, ApiError { status: 405, message, param: None })
}

async fn not_found(State(app): State<Arc<App>>) -> Response {
    let e = ApiError { status: 404, message: format!("no such route; the server answers {ROUTES}"), param: None };
    error(&app, e)
}
