//! The decoding loop: one thread owns the model and steps every active request together.
//!
//! Between steps, waiting requests join (each prompt prefilled alone, its first token drawn
//! from the prefill's logits) and finished ones leave; a step feeds every row its last token
//! through the shared KV cache ([`BatchCache`]). Each request draws its tokens from its own
//! generator, so its text does not depend on what it was batched with.

use super::batch::BatchCache;
use super::metrics::Metrics;
use super::text::{Progress, TextState};
use crate::data::Tokenizer;
use crate::model::{KvCache, Transformer};
use crate::rng::SplitMix64;
use crate::train::generate::{Sampling, sample_with};
use burn::tensor::{Device, Int, Tensor, TensorData};
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
    /// New text.
    Text(String),
    Done {
        finish: Finish,
        tokens: usize,
    },
    Failed(String),
}

/// One request, validated and tokenised.
pub struct Job {
    pub prompt: Vec<u32>,
    pub max_new: usize,
    pub sampling: Sampling,
    pub seed: u64,
    pub stops: Vec<String>,
    /// A token that ends the completion (a pairs run's `<end>`), not part of the text.
    pub end_token: Option<u32>,
    pub arrived: Instant,
    pub events: UnboundedSender<Event>,
}

/// A request in the batch.
struct Row {
    job: Job,
    rng: SplitMix64,
    out: Vec<u32>,
    text: TextState,
    /// The token to feed at the next step.
    next: u32,
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
        let (mut rows, mut cache) = (Vec::<Row>::new(), BatchCache::new());
        loop {
            if rows.is_empty() {
                match rx.recv() {
                    Ok(job) => self.admit(job, &mut rows, &mut cache),
                    Err(_) => return,
                }
            }
            while rows.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(job) => self.admit(job, &mut rows, &mut cache),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) if rows.is_empty() => return,
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            if !rows.is_empty()
                && let Err(e) = self.step(&mut rows, &mut cache)
            {
                for r in rows.drain(..) {
                    let _ = r.job.events.send(Event::Failed(format!("decoding failed: {e}")));
                }
                cache = BatchCache::new();
            }
            self.metrics.active.store(rows.len(), Ordering::Relaxed);
        }
    }

    /// Prefills `job`'s prompt alone, draws its first token and adds it to the batch (unless
    /// that token already ends it).
    fn admit(&self, job: Job, rows: &mut Vec<Row>, cache: &mut BatchCache) {
        self.metrics.queued.fetch_sub(1, Ordering::Relaxed);
        let mut row_cache = KvCache::new(self.model.n_layers());
        let ids: Vec<i64> = job.prompt.iter().map(|&t| i64::from(t)).collect();
        let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [1, job.prompt.len()]), &self.device);
        let logits = self.model.forward_cached(x, &mut row_cache, &[0], self.context);
        let [_, t, v] = logits.dims();
        let last = match host(logits.slice([0..1, t - 1..t, 0..v]).reshape([1, v])) {
            Ok(l) => l,
            Err(e) => {
                let _ = job.events.send(Event::Failed(format!("decoding failed: {e}")));
                return;
            }
        };
        let text = TextState::new(job.stops.clone());
        let mut row = Row { rng: SplitMix64::new(job.seed), job, out: Vec::new(), text, next: 0 };
        if self.advance(&mut row, &last[0]) {
            rows.push(row);
            cache.join(row_cache);
        }
    }

    /// One decoding step of every row; finished rows leave.
    fn step(&self, rows: &mut Vec<Row>, cache: &mut BatchCache) -> anyhow::Result<()> {
        let tokens: Vec<u32> = rows.iter().map(|r| r.next).collect();
        let logits = host(cache.step(&self.model, &tokens, self.context, &self.device))?;
        let keep: Vec<bool> = rows.iter_mut().zip(&logits).map(|(r, l)| self.advance(r, l)).collect();
        let mut i = 0;
        rows.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        cache.retain(&keep);
        Ok(())
    }

    /// Draws `row`'s next token from `logits` and sends its text; false when the row is done
    /// (or its client has gone).
    fn advance(&self, row: &mut Row, logits: &[f32]) -> bool {
        let t = sample_with(logits, &row.job.sampling, &mut row.rng) as u32;
        row.next = t;
        let send = |row: &Row, s: String| s.is_empty() || row.job.events.send(Event::Text(s)).is_ok();
        if Some(t) == row.job.end_token {
            let text = self.tokenizer.decode(&row.out).unwrap_or_default();
            let rest = row.text.finish(&text);
            send(row, rest);
            return self.done(row, Finish::Stop);
        }
        row.out.push(t);
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

    fn done(&self, row: &Row, finish: Finish) -> bool {
        self.metrics.observe(row.job.arrived.elapsed());
        let _ = row.job.events.send(Event::Done { finish, tokens: row.out.len() });
        false
    }
}

/// Rows of `[B, V]` logits on the host.
fn host(logits: Tensor<2>) -> anyhow::Result<Vec<Vec<f32>>> {
    let v = logits.dims()[1];
    let flat: Vec<f32> = logits
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| anyhow::anyhow!("reading the logits from the device failed: {e:?}"))?;
    Ok(flat.chunks(v).map(<[f32]>::to_vec).collect())
}
