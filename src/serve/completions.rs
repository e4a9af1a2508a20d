//! `POST /v1/completions`: every prompt of a request (OpenAI's four forms) times `n` becomes
//! one job; the answer has one choice per job (`index` = prompt · n + j), with the prompt
//! before the text under `echo`, OpenAI's `logprobs` object (`tokens`, `token_logprobs`,
//! `top_logprobs`, `text_offset`; the first prompt token's entries `null`) when asked, and
//! `usage`. Streamed, the choices' chunks interleave as they come, and `stream_options.
//! include_usage` adds a last chunk with the usage.

use super::api::{ApiError, CompletionRequest, PromptIn, prompt_count, prompts};
use super::app::{App, check_count, encode, enqueue, json_response, now, sse_response};
use super::defaults_only::{self, Route};
use super::engine::{Event, Finish, Job};
use crate::decode::score::TokenScore;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// One choice in flight.
pub(super) struct Choice {
    prompt: Vec<u32>,
    pub(super) events: UnboundedReceiver<Event>,
}

/// A request whose jobs are queued.
pub(super) struct Started {
    pub(super) id: String,
    pub(super) choices: Vec<Choice>,
    pub(super) prompt_tokens: usize,
    echo: bool,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
}

/// A finished choice, as the engine told it.
#[derive(Default)]
pub(super) struct Answer {
    prompt_scores: Option<Vec<TokenScore>>,
    pub(super) text: String,
    pub(super) finish: Option<Finish>,
    pub(super) tokens: Vec<u32>,
    pub(super) scores: Vec<TokenScore>,
}

pub async fn completions(app: Arc<App>, body: &[u8]) -> Result<axum::response::Response, ApiError> {
    let req: CompletionRequest = defaults_only::parse(body, Route::Completion)?;
    let logprobs = req.logprobs()?;
    let s = start(&app, &req, None)?;
    if s.stream {
        return Ok(stream(app, s));
    }
    let id = s.id.clone();
    let echo = s.echo;
    let prompt_tokens = s.prompt_tokens;
    let mut choices = Vec::with_capacity(s.choices.len());
    let mut completion_tokens = 0;
    for (index, c) in s.choices.into_iter().enumerate() {
        let a = collect(c.events).await?;
        completion_tokens += a.tokens.len();
        choices.push(choice_json(&app, index, &c.prompt, echo, logprobs.is_some(), a));
    }
    let usage = usage(prompt_tokens, completion_tokens);
    Ok(json_response(
        200,
        &json!({"id": id, "object": "text_completion", "created": now(), "model": app.model,
        "choices": choices, "usage": usage}),
    ))
}

fn usage(prompt_tokens: usize, completion_tokens: usize) -> Value {
    json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens})
}

/// The prompt's tokens: encoded text, or token ids checked against the vocabulary.
fn tokens_of(app: &App, p: &PromptIn) -> Result<Vec<u32>, ApiError> {
    match p {
        PromptIn::Text(t) => encode(app, t, "prompt"),
        PromptIn::Tokens(ids) if ids.is_empty() => {
            Err(ApiError::bad("a token-id prompt must not be empty", Some("prompt")))
        }
        PromptIn::Tokens(ids) => match ids.iter().find(|&&i| i as usize >= app.vocab_size) {
            Some(i) => Err(ApiError::bad(
                format!("token id {i} is outside the vocabulary of {} tokens", app.vocab_size),
                Some("prompt"),
            )),
            None => Ok(ids.clone()),
        },
    }
}

/// Checks the request, queues one job per prompt and choice; `end_of_turn` (a chat
/// template's marker) stops decoding too.
pub(super) fn start(app: &App, req: &CompletionRequest, end_of_turn: Option<&str>) -> Result<Started, ApiError> {
    app.check_model(req.model.as_deref())?;
    let sampling = req.sampling()?;
    let mut stops = req.stops()?;
    stops.extend(end_of_turn.map(String::from));
    let n = req.n()?;
    let logprobs = req.logprobs()?;
    // Counted before any prompt is copied or tokenized: a request that could never be queued
    // costs nothing more than its parsed body.
    check_count(app, prompt_count(&req.prompt) * n)?;
    let prompts: Vec<Vec<u32>> = prompts(&req.prompt)?.iter().map(|p| tokens_of(app, p)).collect::<Result<_, _>>()?;
    let lengths: Vec<usize> = prompts.iter().map(|p| req.max_new(p.len(), app.context)).collect::<Result<_, _>>()?;
    let count = app.counter.fetch_add(1, Ordering::Relaxed);
    let mut jobs = Vec::new();
    let mut choices = Vec::new();
    for (p, &max_new) in prompts.iter().zip(&lengths) {
        for j in 0..n as u64 {
            let (tx, rx) = unbounded_channel();
            jobs.push(Job {
                prompt: p.clone(),
                max_new,
                sampling,
                seed: req.seed.unwrap_or(count).wrapping_add(j),
                stops: stops.clone(),
                end_of_turn: end_of_turn.map(String::from),
                end_token: app.end_token,
                logprobs,
                score_prompt: req.echo && logprobs.is_some(),
                arrived: Instant::now(),
                events: tx,
            });
            choices.push(Choice { prompt: p.clone(), events: rx });
        }
    }
    let prompt_tokens = prompts.iter().map(Vec::len).sum();
    enqueue(app, jobs)?;
    app.metrics.prompt_tokens.fetch_add(prompt_tokens as u64, Ordering::Relaxed);
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let echo = req.echo;
    let stream = req.stream;
    Ok(Started { id: format!("cmpl-{count}"), choices, prompt_tokens, echo, stream, include_usage })
}

/// Everything the engine sends for one choice.
pub(super) async fn collect(mut rx: UnboundedReceiver<Event>) -> Result<Answer, ApiError> {
    let mut a = Answer::default();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Prompt(s) => a.prompt_scores = Some(s),
            Event::Text(t) => a.text.push_str(&t),
            Event::Done { finish, tokens, scores } => {
                a.finish = Some(finish);
                a.tokens = tokens;
                a.scores = scores;
                return Ok(a);
            }
            Event::Failed(m) => return Err(ApiError { status: 500, message: m, param: None }),
        }
    }
    Err(ApiError { status: 500, message: "the decoding engine stopped".into(), param: None })
}

/// One choice of the answer.
fn choice_json(app: &App, index: usize, prompt: &[u32], echo: bool, logprobs: bool, a: Answer) -> Value {
    let tok = &app.tokenizer;
    let prompt_text = if echo { tok.decode(prompt).unwrap_or_default() } else { String::new() };
    let logprobs = logprobs.then(|| {
        // The generated tokens whose text the answer shows (a stop string cuts the rest).
        let shown = shown_tokens(app, &a.tokens, &a.text);
        let mut entries: Vec<Entry> = Vec::new();
        if let Some(scores) = a.prompt_scores.as_ref().filter(|_| echo) {
            entries.push(Entry { token: prompt[0], score: None });
            entries.extend(prompt[1..].iter().zip(scores).map(|(&token, s)| Entry { token, score: Some(s) }));
        }
        entries.extend(a.tokens[..shown].iter().zip(&a.scores).map(|(&token, s)| Entry { token, score: Some(s) }));
        logprobs_json(app, &entries)
    });
    json!({"text": prompt_text + &a.text, "index": index, "logprobs": logprobs,
        "finish_reason": a.finish.map(Finish::as_str)})
}

/// How many of `tokens` the text `text` shows: all, unless a stop string cut the text short,
/// then those that start before its end.
pub(super) fn shown_tokens(app: &App, tokens: &[u32], text: &str) -> usize {
    let full = app.tokenizer.decode(tokens).unwrap_or_default();
    if full.len() <= text.len() {
        return tokens.len();
    }
    let chars = text.chars().count();
    (0..tokens.len()).take_while(|&i| offset(app, &tokens[..i]) < chars).count()
}

/// The characters `tokens` decode to (a trailing partial character not counted).
fn offset(app: &App, tokens: &[u32]) -> usize {
    app.tokenizer.decode(tokens).unwrap_or_default().trim_end_matches('\u{FFFD}').chars().count()
}

/// One token of a `logprobs` object; `score` is `None` for the first prompt token.
struct Entry<'a> {
    token: u32,
    score: Option<&'a TokenScore>,
}

/// OpenAI's `logprobs` object over `entries` (the echoed prompt, then the generated tokens).
fn logprobs_json(app: &App, entries: &[Entry]) -> Value {
    let tok = &app.tokenizer;
    let ids: Vec<u32> = entries.iter().map(|e| e.token).collect();
    let text = |id: u32| tok.decode(&[id]).unwrap_or_default();
    // OpenAI's rule: the `logprobs` most likely tokens and always the chosen one (so
    // `logprobs: 0` gives the chosen token alone).
    let top = |token: u32, s: &TokenScore| {
        let mut m = Map::new();
        // Tokens that decode alike (partial characters) keep the likelier entry, listed first.
        for &(id, lp) in &s.top {
            m.entry(text(id)).or_insert(json!(lp));
        }
        m.entry(text(token)).or_insert(json!(s.logprob));
        Value::Object(m)
    };
    json!({
        "tokens": ids.iter().map(|&i| text(i)).collect::<Vec<_>>(),
        "token_logprobs": entries.iter().map(|e| e.score.map(|s| s.logprob)).collect::<Vec<_>>(),
        "top_logprobs": entries.iter().map(|e| e.score.map(|s| top(e.token, s))).collect::<Vec<_>>(),
        "text_offset": (0..ids.len()).map(|i| offset(app, &ids[..i])).collect::<Vec<_>>(),
    })
}

/// The streamed answer: each choice's chunks as they come, then the usage (when asked) and
/// `[DONE]`.
fn stream(app: Arc<App>, s: Started) -> axum::response::Response {
    let generated = Arc::new(AtomicUsize::new(0));
    let per_choice = s.choices.into_iter().enumerate().map(|(index, c)| {
        let app = app.clone();
        let id = s.id.clone();
        let counted = generated.clone();
        let head = s.echo.then(|| {
            chunk(&app, &id, index, &app.tokenizer.decode(&c.prompt).unwrap_or_default(), None, s.include_usage)
        });
        let make =
            move |text: Option<&str>, finish| chunk(&app, &id, index, text.unwrap_or(""), finish, s.include_usage);
        let events = choice_chunks(c.events, counted, make);
        futures_util::stream::iter(head).chain(events).boxed()
    });
    let per_choice: Vec<_> = per_choice.collect();
    let app2 = app.clone();
    let id = s.id.clone();
    let prompt_tokens = s.prompt_tokens;
    let tail = futures_util::stream::once(async move {
        let usage = usage(prompt_tokens, generated.load(Ordering::Relaxed));
        json!({"id": id, "object": "text_completion", "created": now(), "model": app2.model, "choices": [],
            "usage": usage})
    })
    .filter(move |_| std::future::ready(s.include_usage));
    sse_response(futures_util::stream::select_all(per_choice).chain(tail))
}

/// A choice's engine events as the chunks of its stream: `make(Some(text), None)` for each
/// piece of text, `make(None, Some(finish))` at its end (its tokens counted in `counted`), an
/// error object when decoding failed.
pub(super) fn choice_chunks(
    events: UnboundedReceiver<Event>,
    counted: Arc<AtomicUsize>,
    make: impl Fn(Option<&str>, Option<Finish>) -> Value + Clone + Send + 'static,
) -> impl futures_util::Stream<Item = Value> + Send {
    futures_util::stream::unfold((events, false), move |(mut rx, ended)| {
        let (make, counted) = (make.clone(), counted.clone());
        async move {
            if ended {
                return None;
            }
            let (data, end) = loop {
                match rx.recv().await? {
                    Event::Prompt(_) => continue,
                    Event::Text(t) => break (make(Some(&t), None), false),
                    Event::Done { finish, tokens, .. } => {
                        counted.fetch_add(tokens.len(), Ordering::Relaxed);
                        break (make(None, Some(finish)), true);
                    }
                    Event::Failed(m) => break (json!({"error": {"message": m, "type": "server_error"}}), true),
                }
            };
            Some((data, (rx, end)))
        }
    })
}

/// One streamed chunk of choice `index`.
fn chunk(app: &App, id: &str, index: usize, text: &str, finish: Option<Finish>, with_usage: bool) -> Value {
    let mut v = json!({
        "id": id, "object": "text_completion", "created": now(), "model": app.model,
        "choices": [{"text": text, "index": index, "logprobs": null, "finish_reason": finish.map(Finish::as_str)}],
    });
    if with_usage {
        v["usage"] = Value::Null;
    }
    v
}
