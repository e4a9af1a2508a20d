//! A task's requests through the one scoring path ([`crate::decode::score`]): each request's
//! log-likelihood and whether its continuation is the greedy one, computed in batches of
//! similar lengths; a text's log-likelihood over lm-eval's rolling windows.

use super::encode::{Encoded, encode};
use super::item::Request;
use crate::data::Tokenizer;
use crate::decode::Decoder;
use crate::decode::score::TokenScore;
use crate::decode::shared::{Shared, score_shared};

/// A request's log-likelihood (natural log) and whether every continuation token is the arg-max.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Likelihood {
    pub loglik: f64,
    pub greedy: bool,
}

/// Scores encoded sequences, each's last `continuation` tokens summed.
pub fn score_encoded(d: &Decoder, encoded: &[Encoded]) -> anyhow::Result<Vec<Likelihood>> {
    // Longest first, as lm-eval orders them: neighbours pad to similar lengths.
    let mut order: Vec<usize> = (0..encoded.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(encoded[i].tokens.len()));
    let seqs: Vec<Vec<u32>> = order.iter().map(|&i| encoded[i].tokens.clone()).collect();
    let scored = crate::decode::score::score(d, &seqs, 0)?;
    let mut out = vec![Likelihood { loglik: 0.0, greedy: true }; encoded.len()];
    for (&i, s) in order.iter().zip(scored) {
        let n = encoded[i].continuation;
        out[i] = likelihood(&s.tokens[s.tokens.len() - n..]);
    }
    Ok(out)
}

/// Scores each item's requests for a model of context `d.context`, an empty context standing
/// for `prefix`. Requests of one item whose sequences share their context tokens (a
/// multiple-choice item's choices, unless truncation cut them differently) run the context
/// once ([`crate::decode::shared`]); the others are scored whole.
pub fn score_requests(
    d: &Decoder,
    tok: &Tokenizer,
    prefix: u32,
    items: &[Vec<Request>],
) -> anyhow::Result<Vec<Vec<Likelihood>>> {
    let encoded: Vec<Vec<Encoded>> = items
        .iter()
        .map(|rs| rs.iter().map(|r| encode(tok, r, prefix, d.context)).collect::<anyhow::Result<_>>())
        .collect::<anyhow::Result<_>>()?;
    let (shared, alone): (Vec<usize>, Vec<usize>) = (0..items.len()).partition(|&i| shares_context(&encoded[i]));
    let mut out = vec![Vec::new(); items.len()];
    let groups: Vec<Shared> = shared.iter().map(|&i| split(&encoded[i])).collect();
    for (&i, scored) in shared.iter().zip(score_shared(d, &groups)?) {
        out[i] = scored.iter().map(|t| likelihood(t)).collect();
    }
    let whole: Vec<Encoded> = alone.iter().flat_map(|&i| encoded[i].iter().cloned()).collect();
    let mut scored = score_encoded(d, &whole)?.into_iter();
    for &i in &alone {
        out[i] = scored.by_ref().take(encoded[i].len()).collect();
    }
    Ok(out)
}

/// Do the sequences (more than one) hold the same tokens before their continuations?
fn shares_context(e: &[Encoded]) -> bool {
    fn context(x: &Encoded) -> &[u32] {
        &x.tokens[..x.tokens.len() - x.continuation]
    }
    e.len() > 1 && e.iter().all(|x| context(x) == context(&e[0]))
}

/// The shared context and each continuation.
fn split(e: &[Encoded]) -> Shared {
    let cut = |x: &Encoded| x.tokens.len() - x.continuation;
    Shared {
        context: e[0].tokens[..cut(&e[0])].to_vec(),
        continuations: e.iter().map(|x| x.tokens[cut(x)..].to_vec()).collect(),
    }
}

fn likelihood(tokens: &[TokenScore]) -> Likelihood {
    Likelihood { loglik: tokens.iter().map(|t| t.logprob).sum(), greedy: tokens.iter().all(|t| t.greedy) }
}

/// lm-eval's `get_rolling_token_windows` with `context_len = 1` and `make_disjoint_window`:
/// the first window predicts up to `window` tokens after `prefix`; each next one the following
/// `window` tokens given the `window` before them, each token predicted once.
pub fn rolling_windows(tokens: &[u32], prefix: u32, window: usize) -> Vec<Encoded> {
    let mut out = Vec::new();
    if tokens.is_empty() || window == 0 {
        return out;
    }
    let first = window.min(tokens.len());
    let mut seq = vec![prefix];
    seq.extend(&tokens[..first]);
    out.push(Encoded { tokens: seq, continuation: first });
    let mut predicted = first;
    while predicted < tokens.len() {
        let n = window.min(tokens.len() - predicted);
        let end = predicted + n;
        let start = end.saturating_sub(window + 1);
        out.push(Encoded { tokens: tokens[start..end].to_vec(), continuation: n });
        predicted = end;
    }
    out
}

/// A text's log-likelihood over its rolling windows.
pub fn score_text(d: &Decoder, tok: &Tokenizer, prefix: u32, text: &str) -> anyhow::Result<f64> {
    let windows = rolling_windows(&tok.encode(text)?, prefix, d.context);
    Ok(score_encoded(d, &windows)?.iter().map(|l| l.loglik).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten tokens, windows of four (worked through lm-eval's `get_rolling_token_windows` and
    /// `make_disjoint_window` by hand): [p, 0‥3] predicts 0‥3, [3‥7] predicts 4‥7 given 3,
    /// [5‥9] predicts 8, 9 given 5‥7: every token predicted once, never with more than four
    /// tokens fed.
    #[test]
    fn rolling_windows_predict_every_token_once() {
        let t: Vec<u32> = (0..10).collect();
        let w = rolling_windows(&t, 99, 4);
        let got: Vec<(Vec<u32>, usize)> = w.into_iter().map(|e| (e.tokens, e.continuation)).collect();
        assert_eq!(got, vec![(vec![99, 0, 1, 2, 3], 4), (vec![3, 4, 5, 6, 7], 4), (vec![5, 6, 7, 8, 9], 2)]);
    }
}
