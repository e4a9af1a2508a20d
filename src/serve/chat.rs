//! `POST /v1/chat/completions`: the messages rendered by the run's chat template with the
//! generation prompt (the template a run trained on conversations saved, else ChatML), decoded
//! as a `/v1/completions` prompt through the same engine and batching, stopped at the
//! template's end-of-turn marker (and the request's `stop` strings), answered in OpenAI's chat
//! form: `message` (or streamed `delta`s), `logprobs.content` with `top_logprobs`, `usage`.

use super::api::{ApiError, CompletionRequest, Stop, StreamOptions, null_is_default};
use super::app::{App, json_response, now, sse_response};
use super::completions::{Answer, Started, choice_chunks, collect, start};
use super::defaults_only::{self, Route};
use super::engine::Finish;
use crate::data::chat::{Message, Role};
use crate::decode::score::TokenScore;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// `POST /v1/chat/completions`. Unknown fields are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub max_tokens: Option<usize>,
    /// OpenAI's newer name for `max_tokens`.
    pub max_completion_tokens: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<usize>,
    pub stop: Option<Stop>,
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub n: Option<usize>,
    /// Log-probabilities of the answer's tokens, with `top_logprobs` alternatives each.
    #[serde(default, deserialize_with = "null_is_default")]
    pub logprobs: bool,
    pub top_logprobs: Option<usize>,
    /// Accepted at 0 ([`super::api::check_penalties`]).
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// Accepted and ignored.
    pub user: Option<String>,
}

/// One message: `content` a string, a list of `{"type": "text", "text": …}` parts, or `null`
/// (an assistant turn that called tools); roles as OpenAI names them (`developer` is the
/// system turn, as OpenAI defines it; `tool` a tool's result).
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    /// Accepted and ignored.
    pub name: Option<String>,
    /// Accepted and ignored (this model calls no tools): an assistant turn's `tool_calls`, a
    /// tool turn's `tool_call_id`.
    pub tool_calls: Option<Value>,
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    fn message(&self, i: usize) -> Result<Message, ApiError> {
        let bad = |m: String| ApiError::bad(format!("messages[{i}]: {m}"), Some("messages"));
        let role = Role::parse(&self.role).map_err(|e| bad(e.to_string()))?;
        let content = crate::data::chat::text_content(&self.content).map_err(bad)?;
        Ok(Message { role, content })
    }
}

/// The messages of a request, checked.
fn messages(req: &ChatRequest) -> Result<Vec<Message>, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::bad("messages must not be empty", Some("messages")));
    }
    req.messages.iter().enumerate().map(|(i, m)| m.message(i)).collect()
}

/// The prompt: `messages` rendered by the run's template on a blocking thread (a template is a
/// user's code, bounded in time and memory by [`crate::data::chat::bounded`]), so that the
/// server's async workers, its health check and its shutdown never wait on it.
async fn render(app: &App, messages: Vec<Message>) -> Result<String, ApiError> {
    let template = app.chat.clone();
    tokio::task::spawn_blocking(move || template.render(&messages, true))
        .await
        .map_err(|e| ApiError {
            status: 500,
            message: format!("the chat template's rendering failed: {e}"),
            param: None,
        })?
        .map_err(|e| ApiError::bad(format!("{e:#}"), Some("messages")))
}

/// The completion request the chat request is decoded as.
fn as_completion(prompt: String, req: ChatRequest) -> Result<(CompletionRequest, Option<usize>), ApiError> {
    super::api::check_penalties(req.presence_penalty, req.frequency_penalty)?;
    if req.top_logprobs.is_some() && !req.logprobs {
        return Err(ApiError::bad("top_logprobs needs logprobs: true", Some("top_logprobs")));
    }
    let logprobs = req.logprobs.then_some(req.top_logprobs.unwrap_or(0));
    let c = CompletionRequest {
        model: req.model,
        prompt: Value::String(prompt),
        max_tokens: req.max_completion_tokens.or(req.max_tokens),
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        stop: req.stop,
        seed: req.seed,
        stream: req.stream,
        stream_options: req.stream_options,
        n: req.n,
        echo: false,
        logprobs,
        presence_penalty: None,
        frequency_penalty: None,
        user: req.user,
        max_tokens_default_rest: true,
    };
    Ok((c, logprobs))
}

pub async fn chat_completions(app: Arc<App>, body: &[u8]) -> Result<axum::response::Response, ApiError> {
    let req: ChatRequest = defaults_only::parse(body, Route::Chat)?;
    let prompt = render(&app, messages(&req)?).await?;
    let (req, logprobs) = as_completion(prompt, req)?;
    req.logprobs()?;
    let s = start(&app, &req, Some(&app.chat.stop))?;
    if s.stream {
        return Ok(stream(app, s));
    }
    let mut choices = Vec::with_capacity(s.choices.len());
    let mut completion_tokens = 0;
    for (index, c) in s.choices.into_iter().enumerate() {
        let a = collect(c.events).await?;
        completion_tokens += a.tokens.len();
        choices.push(choice_json(&app, index, logprobs.is_some(), a));
    }
    let usage = json!({"prompt_tokens": s.prompt_tokens, "completion_tokens": completion_tokens,
        "total_tokens": s.prompt_tokens + completion_tokens});
    Ok(json_response(
        200,
        &json!({"id": s.id.replace("cmpl", "chatcmpl"), "object": "chat.completion", "created": now(),
            "model": app.model, "choices": choices, "usage": usage}),
    ))
}

/// One choice; its `logprobs.content` has an entry for every completion token `usage` counts,
/// the end-of-turn marker's included (the message's text stops before the marker).
fn choice_json(app: &App, index: usize, logprobs: bool, a: Answer) -> Value {
    let logprobs = logprobs.then(|| json!({"content": content_logprobs(app, &a.tokens, &a.scores)}));
    json!({"index": index, "message": {"role": "assistant", "content": a.text}, "logprobs": logprobs,
        "finish_reason": a.finish.map(Finish::as_str)})
}

/// OpenAI's `logprobs.content`: each token with its log-probability, UTF-8 bytes and
/// alternatives.
fn content_logprobs(app: &App, tokens: &[u32], scores: &[TokenScore]) -> Vec<Value> {
    let entry = |id: u32, lp: f64| {
        let text = app.tokenizer.decode(&[id]).unwrap_or_default();
        let bytes = app.tokenizer.token_bytes(id).unwrap_or_else(|| text.as_bytes().to_vec());
        json!({"token": text, "logprob": lp, "bytes": bytes})
    };
    tokens
        .iter()
        .zip(scores)
        .map(|(&id, s)| {
            let mut e = entry(id, s.logprob);
            e["top_logprobs"] = Value::Array(s.top.iter().map(|&(t, lp)| entry(t, lp)).collect());
            e
        })
        .collect()
}

/// The streamed answer: per choice a first `delta` with the role, then the text as it comes,
/// then the finish reason; the usage chunk when asked; `[DONE]`.
fn stream(app: Arc<App>, s: Started) -> axum::response::Response {
    let id = s.id.replace("cmpl", "chatcmpl");
    let include_usage = s.include_usage;
    let prompt_tokens = s.prompt_tokens;
    let generated = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let per_choice: Vec<_> = s
        .choices
        .into_iter()
        .enumerate()
        .map(|(index, c)| {
            let (app, id, counted) = (app.clone(), id.clone(), generated.clone());
            let head = chunk(&app, &id, index, json!({"role": "assistant", "content": ""}), None, include_usage);
            let make = move |text: Option<&str>, finish| {
                let delta = text.map_or(json!({}), |t| json!({"content": t}));
                chunk(&app, &id, index, delta, finish, include_usage)
            };
            let events = choice_chunks(c.events, counted, make);
            futures_util::stream::once(std::future::ready(head)).chain(events).boxed()
        })
        .collect();
    let (app2, id2) = (app.clone(), id.clone());
    let tail = futures_util::stream::once(async move {
        let n = generated.load(std::sync::atomic::Ordering::Relaxed);
        let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n});
        json!({"id": id2, "object": "chat.completion.chunk", "created": now(), "model": app2.model, "choices": [],
            "usage": usage})
    })
    .filter(move |_| std::future::ready(include_usage));
    sse_response(futures_util::stream::select_all(per_choice).chain(tail))
}

fn chunk(app: &App, id: &str, index: usize, delta: Value, finish: Option<Finish>, with_usage: bool) -> Value {
    let mut v = json!({
        "id": id, "object": "chat.completion.chunk", "created": now(), "model": app.model,
        "choices": [{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish.map(Finish::as_str)}],
    });
    if with_usage {
        v["usage"] = Value::Null;
    }
    v
}
