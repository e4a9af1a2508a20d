//! Log-likelihood scoring: the log-probability of every token of a sequence given the tokens
//! before it, whether each was the model's most likely token there, and on request the most
//! likely tokens at each position. One forward per group of sequences (right padded: under the
//! causal mask padding after a sequence changes none of its positions), with BHyT's fixed T the
//! training length, so that a scored position gets the logits decoding would give it.
//!
//! The server's `echo`/`logprobs` and downstream evaluation both score through [`score`].

use super::logprobs::top;
use super::rows::Decoder;
use anyhow::ensure;
use burn::tensor::{Int, Tensor, TensorData};

/// Logits one forward of a group materialises at most (values).
const GROUP_LIMIT: usize = 1 << 25;

/// Positions one forward of a group feeds at most: groups of a training batch's size keep
/// the activations in cache (on 1 CPU core, 600 sequences of 32 bytes through a 16-layer
/// d = 64 model score 1.6× faster in groups of 256 positions than in one group).
pub const GROUP_TOKENS: usize = 256;

/// One token of a scored sequence (every token after the first).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenScore {
    /// `log p(token | tokens before it)`, natural log.
    pub logprob: f64,
    /// The token is the arg-max there (lm-evaluation-harness's `is_greedy`).
    pub greedy: bool,
    /// The `top_k` most likely tokens there with their log-probabilities (empty when 0 asked).
    pub top: Vec<(u32, f64)>,
}

/// A scored sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    /// Tokens 1 … n − 1 of the sequence, each given the ones before it.
    pub tokens: Vec<TokenScore>,
    /// The logits after the last token: what decoding would draw the next token from (`None`
    /// for a sequence of context + 1 tokens, whose last token is only a target).
    pub next: Option<Vec<f32>>,
}

/// Scores every sequence (each non-empty, at most the context + 1 tokens: the last one of
/// such a sequence is scored, never fed); `top_k` most likely tokens are kept at each
/// position. Sequences of similar lengths next to each other pad least.
pub fn score(d: &Decoder, seqs: &[Vec<u32>], top_k: usize) -> anyhow::Result<Vec<Scored>> {
    for s in seqs {
        ensure!(!s.is_empty(), "a sequence to score must hold at least one token");
        ensure!(s.len() <= d.context + 1, "a sequence of {} tokens exceeds the context of {}", s.len(), d.context);
    }
    let vocab = d.model.tok_emb.dims()[0];
    let longest = seqs.iter().map(Vec::len).max().unwrap_or(1);
    let rows = (GROUP_LIMIT / (vocab * longest)).min(GROUP_TOKENS / longest).max(1);
    let mut out = Vec::with_capacity(seqs.len());
    for group in seqs.chunks(rows) {
        out.extend(score_group(d, group, top_k)?);
    }
    Ok(out)
}

/// `[B, T]` of `seqs` right padded with `pad`, shifted left by `shift` positions.
fn padded(seqs: &[Vec<u32>], t: usize, shift: usize, d: &Decoder) -> Tensor<2, Int> {
    let ids: Vec<i64> =
        seqs.iter().flat_map(|s| (0..t).map(move |i| s.get(i + shift).map_or(0, |&x| i64::from(x)))).collect();
    Tensor::from_data(TensorData::new(ids, [seqs.len(), t]), d.device)
}

fn host_f32<const D: usize>(t: Tensor<D>) -> anyhow::Result<Vec<f32>> {
    t.into_data().convert::<f32>().try_into_vec::<f32>().map_err(|e| anyhow::anyhow!("reading scores failed: {e:?}"))
}

fn host_int<const D: usize>(t: Tensor<D, Int>) -> anyhow::Result<Vec<i64>> {
    t.into_data().convert::<i64>().try_into_vec::<i64>().map_err(|e| anyhow::anyhow!("reading scores failed: {e:?}"))
}

/// `[B, V]`: each row's logits at its last position (one gather, one read for the group).
fn last_logits(logits: Tensor<3>, seqs: &[Vec<u32>], d: &Decoder) -> Tensor<2> {
    let [b, t, v] = logits.dims();
    let at: Vec<i64> = seqs.iter().flat_map(|s| std::iter::repeat_n((s.len() - 1).min(t - 1) as i64, v)).collect();
    let index = Tensor::<3, Int>::from_data(TensorData::new(at, [b, 1, v]), d.device);
    logits.gather(1, index).reshape([b, v])
}

fn score_group(d: &Decoder, seqs: &[Vec<u32>], top_k: usize) -> anyhow::Result<Vec<Scored>> {
    let b = seqs.len();
    // The positions fed: every token but a last one past the context.
    let t = seqs.iter().map(Vec::len).max().unwrap_or(1).min(d.context);
    let logits = d.model.forward_masked(padded(seqs, t, 0, d), &vec![0; b], d.context);
    let v = logits.dims()[2];
    let logp = burn::tensor::activation::log_softmax(logits.clone(), 2);
    let picked = host_f32(logp.clone().gather(2, padded(seqs, t, 1, d).reshape([b, t, 1])))?;
    let best = host_int(logp.clone().argmax(2))?;
    let nexts = host_f32(last_logits(logits, seqs, d))?;
    let mut out = Vec::with_capacity(b);
    for (r, s) in seqs.iter().enumerate() {
        let last = s.len() - 1;
        let next = (last < t).then(|| nexts[r * v..(r + 1) * v].to_vec());
        // `top` needs the whole distribution; read only when asked, position by position.
        let tops = match top_k {
            0 => vec![Vec::new(); last],
            k => host_f32(logp.clone().slice([r..r + 1, 0..last, 0..v]))?
                .chunks(v)
                .map(|row| top(&row.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(), k))
                .collect(),
        };
        let tokens = (0..last)
            .zip(tops)
            .map(|(i, top)| {
                let logprob = f64::from(picked[r * t + i]);
                // As lm-evaluation-harness's `hf` model: the arg-max is the token.
                let greedy = best[r * t + i] == i64::from(s[i + 1]);
                TokenScore { logprob, greedy, top }
            })
            .collect();
        out.push(Scored { tokens, next });
    }
    Ok(out)
}
