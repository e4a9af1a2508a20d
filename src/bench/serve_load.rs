//! The request loads of `normlab bench serve`, each a list of request bodies that clients
//! send in turn:
//! - `fixed`: a pairs run's test sources to `/v1/normalize` (greedy to `<end>`), any other run
//!   short fixed prompts to `/v1/completions` (`--max-tokens` tokens, greedy);
//! - `mixed`: prompts of 8 to 512 tokens (log-uniform, cut to the context) from held-out text of
//!   the built-in corpus, 8 to 64 new tokens each, arriving staggered (each client starts 2 ms
//!   after the one before and waits an exponential 5 ms on average between requests);
//! - `loglik`: lm-evaluation-harness's log-likelihood requests, four choices a request (a
//!   context of 8 to 256 tokens and four continuations of 4 to 32), `echo` with `logprobs: 1`
//!   and `max_tokens: 1`.
//!
//! Prompts are text (so that any normlab server, older ones included, can be measured with the
//! same load), cut from the tokenised text and left 8 tokens of room for re-encoding.

use crate::data::Tokenizer;
use crate::rng::SplitMix64;
use anyhow::{Context, ensure};
use serde_json::json;
use std::path::Path;

/// Which load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadKind {
    Fixed,
    Mixed,
    Loglik,
}

impl LoadKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Mixed => "mixed",
            Self::Loglik => "loglik",
        }
    }
}

/// A load's requests and how clients send them.
pub struct Load {
    pub kind: LoadKind,
    /// `/v1/completions` or `/v1/normalize`.
    pub path: &'static str,
    pub bodies: Vec<String>,
    /// Staggered arrival: the mean pause (ms) between a client's requests, and each client's
    /// start after the previous one's; 0 = back to back.
    pub think_ms: f64,
}

/// What the loads are made for.
pub struct Target<'a> {
    pub run: &'a Path,
    pub tokenizer: &'a Tokenizer,
    pub context: usize,
    pub pairs: bool,
    /// The fixed load's completion length.
    pub max_tokens: usize,
    /// How many distinct requests the mixed and log-likelihood loads hold.
    pub count: usize,
}

/// Room left for re-encoding a decoded window.
const MARGIN: usize = 8;

pub fn build(kind: LoadKind, t: &Target) -> anyhow::Result<Load> {
    match kind {
        LoadKind::Fixed => fixed(t),
        LoadKind::Mixed => mixed(t),
        LoadKind::Loglik => loglik(t),
    }
}

fn fixed(t: &Target) -> anyhow::Result<Load> {
    if t.pairs {
        let p = crate::run::layout::pairs_eval(t.run);
        let e: crate::run::pairs_eval::PairsEval = crate::io::json::read(&p).with_context(|| {
            format!("{} is missing: the benchmark asks a pairs run its test sources; finish the run first", p.display())
        })?;
        let bodies: Vec<String> = e.predictions.iter().map(|p| json!({"input": p.source}).to_string()).collect();
        ensure!(!bodies.is_empty(), "{} has no test sources", p.display());
        return Ok(Load { kind: LoadKind::Fixed, path: "/v1/normalize", bodies, think_ms: 0.0 });
    }
    let prompts = ["Fellow citizens, ", "The State of the Union ", "We must ", "In the year ", "Congress has "];
    let bodies = prompts
        .iter()
        .map(|p| json!({"prompt": p, "max_tokens": t.max_tokens, "temperature": 0}).to_string())
        .collect();
    Ok(Load { kind: LoadKind::Fixed, path: "/v1/completions", bodies, think_ms: 0.0 })
}

/// Tokens of held-out text (the built-in corpus's validation addresses).
fn held_out_tokens(tok: &Tokenizer) -> anyhow::Result<Vec<u32>> {
    let docs = crate::data::sotu::load(&crate::data::cache::default_dir())?;
    let val = crate::data::sotu::split(docs).val;
    let text: String = val.iter().take(6).map(|d| d.text.as_str()).collect::<Vec<_>>().join("\n\n");
    tok.encode(&text)
}

/// A length in `[lo, hi]`, log-uniform.
fn log_uniform(rng: &mut SplitMix64, lo: usize, hi: usize) -> usize {
    let (a, b) = ((lo.max(1) as f64).ln(), (hi.max(lo).max(1) as f64).ln());
    ((a + rng.uniform() * (b - a)).exp().round() as usize).clamp(lo, hi.max(lo))
}

/// The text of `n` tokens of `tokens` from a random start.
fn window(tok: &Tokenizer, tokens: &[u32], n: usize, rng: &mut SplitMix64) -> anyhow::Result<String> {
    let start = (rng.uniform() * (tokens.len() - n) as f64) as usize;
    tok.decode(&tokens[start..start + n])
}

fn mixed(t: &Target) -> anyhow::Result<Load> {
    ensure!(t.context >= 8 + 8 + MARGIN, "the mixed load needs a context of at least 24 tokens");
    let tokens = held_out_tokens(t.tokenizer)?;
    let mut rng = SplitMix64::new(1);
    let mut bodies = Vec::with_capacity(t.count);
    for _ in 0..t.count {
        let max_tokens = 8 + (rng.uniform() * 57.0) as usize;
        let room = t.context.saturating_sub(max_tokens + MARGIN).clamp(8, 512);
        let prompt = window(t.tokenizer, &tokens, log_uniform(&mut rng, 8, room), &mut rng)?;
        bodies.push(json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).to_string());
    }
    Ok(Load { kind: LoadKind::Mixed, path: "/v1/completions", bodies, think_ms: 5.0 })
}

fn loglik(t: &Target) -> anyhow::Result<Load> {
    ensure!(t.context > 8 + 32 + MARGIN, "the log-likelihood load needs a context of at least 49 tokens");
    let tokens = held_out_tokens(t.tokenizer)?;
    let mut rng = SplitMix64::new(2);
    let mut bodies = Vec::with_capacity(t.count);
    for _ in 0..t.count {
        let longest = 4 + (rng.uniform() * 29.0) as usize;
        let room = (t.context - longest - MARGIN - 1).clamp(8, 256);
        let context = window(t.tokenizer, &tokens, log_uniform(&mut rng, 8, room), &mut rng)?;
        let choices: Vec<String> = (0..4)
            .map(|_| {
                window(t.tokenizer, &tokens, log_uniform(&mut rng, 4, longest), &mut rng).map(|c| context.clone() + &c)
            })
            .collect::<anyhow::Result<_>>()?;
        let body = json!({"prompt": choices, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0});
        bodies.push(body.to_string());
    }
    Ok(Load { kind: LoadKind::Loglik, path: "/v1/completions", bodies, think_ms: 0.0 })
}
