//! A request as token ids, exactly as lm-evaluation-harness's causal models build it
//! (`TemplateLM._encode_pair`, `loglikelihood`, `_loglikelihood_tokens`):
//! - trailing whitespace of the context moves to the continuation;
//! - the continuation's tokens are those of `context + continuation` after the context's
//!   (so a merge across the boundary is scored as the whole sequence tokenizes);
//! - an empty context is the prefix token (the run's document boundary, lm-eval's BOS/EOS);
//! - a sequence longer than the window is cut from the left, keeping the continuation.

use super::item::Request;
use crate::data::Tokenizer;
use anyhow::ensure;

/// A request's tokens: the sequence fed (at most `window` + 1 tokens) and how many of its last
/// tokens are the continuation's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub tokens: Vec<u32>,
    pub continuation: usize,
}

/// Refuses `task` when one of its requests cannot be scored by a model of context `window`
/// (its continuation alone fills the window), naming the item and the fix; run before training.
pub fn check_fits(task: &super::item::Task, tok: &Tokenizer, prefix: u32, window: usize) -> anyhow::Result<()> {
    for (i, item) in task.items.iter().enumerate() {
        for r in item.requests() {
            encode(tok, &r, prefix, window).map_err(|e| {
                anyhow::anyhow!(
                    "eval task `{}` item {}: {e}; raise train.seq_len, or leave the task out of [eval]",
                    task.name,
                    i + 1
                )
            })?;
        }
    }
    Ok(())
}

/// Encodes `r` for a model of context `window`, with `prefix` for an empty context.
pub fn encode(tok: &Tokenizer, r: &Request, prefix: u32, window: usize) -> anyhow::Result<Encoded> {
    let (context, continuation) = if r.context.is_empty() {
        let cont = tok.encode(&r.continuation)?;
        ensure!(!cont.is_empty(), "a request's continuation encodes to no tokens");
        if cont[0] == prefix { (cont[..1].to_vec(), cont[1..].to_vec()) } else { (vec![prefix], cont) }
    } else {
        split_pair(tok, &r.context, &r.continuation)?
    };
    ensure!(!continuation.is_empty(), "the continuation `{}` adds no tokens to its context", r.continuation);
    let mut all = context;
    let n = continuation.len();
    all.extend(continuation);
    // lm-eval: `(context_enc + continuation_enc)[-(max_length + 1):]`, the last token only a target.
    let keep = all.len().min(window + 1);
    let tokens = all[all.len() - keep..].to_vec();
    ensure!(n < tokens.len(), "the continuation alone ({n} tokens) fills the model's context of {window}");
    Ok(Encoded { tokens, continuation: n })
}

/// `_encode_pair`: the context's tokens and the continuation's, from the whole's.
fn split_pair(tok: &Tokenizer, context: &str, continuation: &str) -> anyhow::Result<(Vec<u32>, Vec<u32>)> {
    let trimmed = context.trim_end();
    let (context, continuation) = (trimmed, format!("{}{continuation}", &context[trimmed.len()..]));
    let whole = tok.encode(&format!("{context}{continuation}"))?;
    let ctx = tok.encode(context)?;
    let n = ctx.len().min(whole.len());
    Ok((ctx, whole[n..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(c: &str, x: &str) -> Request {
        Request { context: c.into(), continuation: x.into() }
    }

    /// Byte tokens: ids are the bytes, so every case is checkable by hand.
    #[test]
    fn pairs_split_as_lm_eval_splits_them() {
        let t = Tokenizer::Byte;
        // Trailing spaces move into the continuation.
        let e = encode(&t, &req("Q: a? ", "yes"), 10, 64).unwrap();
        assert_eq!(e.tokens, b"Q: a? yes".iter().map(|&b| u32::from(b)).collect::<Vec<_>>());
        assert_eq!(e.continuation, 4, "\" yes\"");
        // An empty context is the prefix token.
        let e = encode(&t, &req("", "ab"), 10, 64).unwrap();
        assert_eq!((e.tokens, e.continuation), (vec![10, 97, 98], 2));
        // …unless the continuation starts with it, which then conditions the rest.
        let e = encode(&t, &req("", "\nab"), 10, 64).unwrap();
        assert_eq!((e.tokens, e.continuation), (vec![10, 97, 98], 2));
        // Cut from the left to window + 1 tokens, the continuation kept.
        let e = encode(&t, &req("abcdefgh", "xy"), 10, 4).unwrap();
        assert_eq!((e.tokens, e.continuation), (vec![102, 103, 104, 120, 121], 2));
        assert!(encode(&t, &req("ab", "xyz"), 10, 2).is_err(), "a continuation that fills the window");
    }
}
