//! The decoding loop: one thread owns the model and steps every active request together.
//!
//! Between steps, waiting requests join (their prompts prefilled together, each one's first
//! token drawn from its prefill logits) and finished ones leave; a step feeds every row its
//! last token through the shared KV cache ([`Rows`], each row at its own positions). Each
//! request draws its tokens from its own generator, so its text does not depend on what it
//! was batched with.
//!
//! A request that scores its prompt (`echo` with `logprobs`) is scored first, all such
//! waiting prompts in one forward ([`score`]); its first token is drawn from the scored
//! logits, and it joins the batch only if it goes on (lm-evaluation-harness's log-likelihood
//! requests, `max_tokens` 1, never do).

use super::metrics::Metrics;
use super::text::{Progress, TextState};
use crate::data::Tokenizer;
use crate::decode::logprobs::{log_softmax, top};
use crate::decode::score::{TokenScore, score};
use crate::decode::{Decoder, Rows, Sampling, argmax, sample};
use crate::model::Transformer;
use crate::rng::SplitMix64;
use burn::tensor::Device;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// Why a completion ended (OpenAI's `finish_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// A stop string or the end token.
    Stop,
    /// `max_tokens` reached.
    Length,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// What the engine tells a request's handler.
#[derive(Debug)]
pub enum Event {
    /// The prompt's tokens scored (after the first), before any text; only when asked.
    Prompt(Vec<TokenScore>),
    /// New text.
    Text(String),
    Done {
        finish: Finish,
        /// The generated tokens (not the end token).
        tokens: Vec<u32>,
        /// Their log-probabilities, when asked.
        scores: Vec<TokenScore>,
    },
    Failed(String),
}

/// One request's choice, validated and tokenised.
pub struct Job {
    pub prompt: Vec<u32>,
    /// 0: only the prompt is scored.
    pub max_new: usize,
    pub sampling: Sampling,
    pub seed: u64,
    pub stops: Vec<String>,
    /// The chat template's end-of-turn marker (also in `stops`), held back when a completion
    /// is cut inside it.
    pub end_of_turn: Option<String>,
    /// A token that ends the completion (a pairs run's `<end>`), not part of the text.
    pub end_token: Option<u32>,
    /// The `k` most likely tokens kept at each scored position; `None`: no log-probabilities.
    pub logprobs: Option<usize>,
    /// Score the prompt's tokens (`echo` with `logprobs`).
    pub score_prompt: bool,
    pub arrived: Instant,
    pub events: UnboundedSender<Event>,
}

/// A request in decoding.
struct Row {
    job: Job,
    rng: SplitMix64,
    out: Vec<u32>,
    scores: Vec<TokenScore>,
    text: TextState,
    /// The token to feed at the next step.
    next: u32,
}

impl Row {
    fn new(job: Job) -> Self {
        let text = TextState::new(job.stops.clone(), job.end_of_turn.clone());
        Self { rng: SplitMix64::new(job.seed), job, out: Vec::new(), scores: Vec::new(), text, next: 0 }
    }
}

pub struct Engine {
    pub model: Transformer,
    pub tokenizer: Arc<Tokenizer>,
    pub device: Device,
    /// The training sequence length: the context, and BHyT's fixed T.
    pub context: usize,
    pub max_batch: usize,
    pub metrics: Arc<Metrics>,
}

impl Engine {
    /// Serves jobs from `rx` until every sender is dropped.
    pub fn run(self, rx: Receiver<Job>) {
        let d = Decoder { model: &self.model, device: &self.device, context: self.context, cache: true };
        let (mut rows, mut batch) = (Vec::<Row>::new(), Rows::new());
        while let Some(waiting) = self.wait(&rx, rows.len()) {
            let result = self.admit(&d, waiting, &mut rows, &mut batch).and_then(|()| match rows.is_empty() {
                true => Ok(()),
                false => self.step(&d, &mut rows, &mut batch),
            });
            if let Err(e) = result {
                for r in rows.drain(..) {
                    let _ = r.job.events.send(Event::Failed(format!("decoding failed: {e}")));
                }
                batch = Rows::new();
            }
            self.metrics.active.store(rows.len(), Ordering::Relaxed);
        }
    }

    /// The jobs that join before the next step: blocks for one while no row decodes, then
    /// takes what waits, up to the batch's room. `None` once every sender has gone and
    /// nothing is left to decode.
    fn wait(&self, rx: &Receiver<Job>, active: usize) -> Option<Vec<Job>> {
        let mut waiting = Vec::new();
        if active == 0 {
            waiting.push(rx.recv().ok()?);
        }
        while active + waiting.len() < self.max_batch {
            match rx.try_recv() {
                Ok(job) => waiting.push(job),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if active == 0 && waiting.is_empty() => return None,
                Err(TryRecvError::Disconnected) => break,
            }
        }
        Some(waiting)
    }

    /// Scores the prompts that asked for it, then prefills the jobs that generate together,
    /// draws each one's first token and keeps those that token does not already end.
    fn admit(&self, d: &Decoder, jobs: Vec<Job>, rows: &mut Vec<Row>, batch: &mut Rows) -> anyhow::Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.metrics.queued.fetch_sub(jobs.len(), Ordering::Relaxed);
        let (scored, plain): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.score_prompt);
        // `echo` without log-probabilities and nothing to generate: the answer is the prompt.
        let (idle, plain): (Vec<Job>, Vec<Job>) = plain.into_iter().partition(|j| j.max_new == 0);
        for j in idle {
            self.done(&Row::new(j), Finish::Length);
        }
        // Scored rows come with their first token drawn; plain ones draw it after the prefill.
        let mut joining: Vec<(Row, bool)> = self.score_prompts(d, scored);
        joining.extend(plain.into_iter().map(|j| (Row::new(j), false)));
        if joining.is_empty() {
            return Ok(());
        }
        let prompts = joining.iter().map(|(r, _)| r.job.prompt.clone()).collect();
        let logits = match batch.join(d, prompts) {
            Ok(l) => l,
            Err(e) => {
                for (r, _) in joining {
                    let _ = r.job.events.send(Event::Failed(format!("decoding failed: {e}")));
                }
                return Ok(());
            }
        };
        let mut keep = vec![true; rows.len()];
        for ((mut row, drawn), l) in joining.into_iter().zip(&logits) {
            keep.push(drawn || self.advance(&mut row, l));
            rows.push(row);
        }
        retain(rows, batch, &keep);
        Ok(())
    }

    /// Scores `jobs`' prompts in one forward, sends each its scores, and draws the first token
    /// of those that generate; returns the rows that go on decoding, each with whether its
    /// first token is drawn (a prompt of context + 1 tokens has no next-token logits in the
    /// scoring forward: it joins the batch as a plain prompt, whose window slides).
    fn score_prompts(&self, d: &Decoder, jobs: Vec<Job>) -> Vec<(Row, bool)> {
        if jobs.is_empty() {
            return Vec::new();
        }
        let k = jobs.iter().filter_map(|j| j.logprobs).max().unwrap_or(0);
        let prompts: Vec<Vec<u32>> = jobs.iter().map(|j| j.prompt.clone()).collect();
        let scored = match score(d, &prompts, k) {
            Ok(s) => s,
            Err(e) => {
                for j in jobs {
                    let _ = j.events.send(Event::Failed(format!("scoring failed: {e}")));
                }
                return Vec::new();
            }
        };
        let mut going = Vec::new();
        for (job, mut s) in jobs.into_iter().zip(scored) {
            let own_k = job.logprobs.unwrap_or(0);
            s.tokens.iter_mut().for_each(|t| t.top.truncate(own_k));
            let _ = job.events.send(Event::Prompt(s.tokens));
            let mut row = Row::new(job);
            match &s.next {
                _ if row.job.max_new == 0 => {
                    self.done(&row, Finish::Length);
                }
                Some(next) => {
                    if self.advance(&mut row, next) {
                        going.push((row, true));
                    }
                }
                None => going.push((row, false)),
            }
        }
        going
    }

    /// One decoding step of every row; finished rows leave.
    fn step(&self, d: &Decoder, rows: &mut Vec<Row>, batch: &mut Rows) -> anyhow::Result<()> {
        let tokens: Vec<u32> = rows.iter().map(|r| r.next).collect();
        let logits = batch.step(d, &tokens)?;
        let keep: Vec<bool> = rows.iter_mut().zip(&logits).map(|(r, l)| self.advance(r, l)).collect();
        retain(rows, batch, &keep);
        Ok(())
    }

    /// Draws `row`'s next token from `logits` and sends its text; false when the row is done
    /// (or its client has gone).
    fn advance(&self, row: &mut Row, logits: &[f32]) -> bool {
        let t = sample(logits, &row.job.sampling, &mut row.rng) as u32;
        row.next = t;
        let send = |row: &Row, s: String| s.is_empty() || row.job.events.send(Event::Text(s)).is_ok();
        if Some(t) == row.job.end_token {
            let text = self.tokenizer.decode(&row.out).unwrap_or_default();
            let rest = row.text.finish(&text);
            send(row, rest);
            return self.done(row, Finish::Stop);
        }
        row.out.push(t);
        if let Some(k) = row.job.logprobs {
            row.scores.push(token_score(logits, t, k));
        }
        self.metrics.generated_tokens.fetch_add(1, Ordering::Relaxed);
        let text = self.tokenizer.decode(&row.out).unwrap_or_default();
        match row.text.push(&text) {
            Progress::Stopped(rest) => {
                send(row, rest);
                self.done(row, Finish::Stop)
            }
            Progress::More(s) if row.out.len() >= row.job.max_new => {
                let rest = s + &row.text.finish(&text);
                send(row, rest);
                self.done(row, Finish::Length)
            }
            // A closed channel: the client has gone, and the row leaves.
            Progress::More(s) => send(row, s) && !row.job.events.is_closed(),
        }
    }

    /// Sends the end of `row`'s completion; false (the row leaves).
    fn done(&self, row: &Row, finish: Finish) -> bool {
        self.metrics.observe(row.job.arrived.elapsed());
        let (tokens, scores) = (row.out.clone(), row.scores.clone());
        let _ = row.job.events.send(Event::Done { finish, tokens, scores });
        false
    }
}

/// Token `t`'s log-probability under `logits`, whether it is the arg-max, and the `k` most
/// likely tokens.
fn token_score(logits: &[f32], t: u32, k: usize) -> TokenScore {
    let lp = log_softmax(logits);
    TokenScore { logprob: lp[t as usize], greedy: argmax(logits) == t as usize, top: top(&lp, k) }
}

/// Keeps the requests whose `keep` is true, in the engine's list and in the decoding batch.
fn retain(rows: &mut Vec<Row>, batch: &mut Rows, keep: &[bool]) {
    let mut i = 0;
    rows.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    batch.retain(keep);
}
