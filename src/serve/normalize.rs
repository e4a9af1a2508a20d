//! `POST /v1/normalize` (pairs runs): `{"input"}` → `{"output", "finish_reason", "tokens"}`,
//! the source decoded greedily to `<end>` as the run's own evaluation decodes it.

use super::api::{ApiError, NormalizeRequest, parse};
use super::app::{App, encode, enqueue, json_response, sse_response};
use super::engine::{Event, Finish, Job};
use crate::decode::Sampling;
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::json;
use std::time::Instant;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

pub async fn normalize(app: &App, body: &[u8]) -> Result<Response, ApiError> {
    let (stream, rx) = start(app, body)?;
    if stream {
        return Ok(streamed(rx));
    }
    collect(rx).await
}

/// Checks the request and queues its greedy decoding to `<end>`; returns whether it streams
/// and the engine's events.
fn start(app: &App, body: &[u8]) -> Result<(bool, UnboundedReceiver<Event>), ApiError> {
    let Some(end) = app.end_token else {
        return Err(ApiError {
            status: 404,
            message: "this run is not a pairs run (data.task = \"pairs\"); use /v1/completions".into(),
            param: None,
        });
    };
    let req: NormalizeRequest = parse(body)?;
    use crate::data::pairs::render::{END, SEP};
    if req.input.contains([SEP, END]) {
        return Err(ApiError::bad(
            "input contains U+001E or U+001F, which pairs runs reserve as their end and separator markers; remove them",
            Some("input"),
        ));
    }
    encode(app, &req.input, "input")?;
    let prompt = crate::data::pairs::render::prompt(&app.tokenizer, &req.input)
        .map_err(|e| ApiError::bad(e.to_string(), Some("input")))?;
    let room = app.context.saturating_sub(prompt.len());
    if room == 0 {
        let message =
            format!("the input is {} tokens with its separator; the model's context is {}", prompt.len(), app.context);
        return Err(ApiError::bad(message, Some("input")));
    }
    let (tx, rx) = unbounded_channel();
    let job = Job {
        prompt,
        max_new: room,
        sampling: Sampling::GREEDY,
        seed: 0,
        stops: Vec::new(),
        end_of_turn: None,
        end_token: Some(end),
        logprobs: None,
        score_prompt: false,
        arrived: Instant::now(),
        events: tx,
    };
    enqueue(app, vec![job])?;
    Ok((req.stream, rx))
}

/// `{"output", "finish_reason"}` chunks as the text comes.
fn streamed(rx: UnboundedReceiver<Event>) -> Response {
    let chunks = futures_util::stream::unfold((rx, false), |(mut rx, ended)| async move {
        if ended {
            return None;
        }
        let (v, end) = loop {
            match rx.recv().await? {
                Event::Prompt(_) => continue,
                Event::Text(t) => break (json!({"output": t, "finish_reason": null}), false),
                Event::Done { finish, .. } => break (json!({"output": "", "finish_reason": finish.as_str()}), true),
                Event::Failed(m) => break (json!({"error": {"message": m, "type": "server_error"}}), true),
            }
        };
        Some((v, (rx, end)))
    });
    sse_response(chunks.boxed())
}

/// The whole answer once decoded.
async fn collect(mut rx: UnboundedReceiver<Event>) -> Result<Response, ApiError> {
    let mut output = String::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Prompt(_) => {}
            Event::Text(t) => output.push_str(&t),
            Event::Done { finish, tokens, .. } => return Ok(answer(&output, finish, tokens.len())),
            Event::Failed(m) => return Err(ApiError { status: 500, message: m, param: None }),
        }
    }
    Err(ApiError { status: 500, message: "the decoding engine stopped".into(), param: None })
}

fn answer(output: &str, finish: Finish, tokens: usize) -> Response {
    json_response(200, &json!({"output": output, "finish_reason": finish.as_str(), "tokens": tokens}))
}
