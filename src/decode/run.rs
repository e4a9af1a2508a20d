//! A fixed batch of prompts decoded to their ends: every row draws its next token from its own
//! logits, and leaves the batch when it reaches its stop token or its length.

use super::rows::{Decoder, Rows};

/// How a batch is decoded.
#[derive(Clone, Copy, Debug)]
pub struct DecodeOptions {
    /// Tokens each row generates at most.
    pub max_new: usize,
    /// A row ends when it produces this token (not included in its output).
    pub stop: Option<u32>,
}

/// Continues every prompt (non-empty token ids) by up to `o.max_new` tokens; `pick(row,
/// logits)` chooses row `row`'s next token from its last position's logits, and `on_step`
/// sees every row's output after each step. Returns each row's new tokens.
pub fn decode(
    d: &Decoder,
    prompts: &[Vec<u32>],
    o: &DecodeOptions,
    pick: &mut dyn FnMut(usize, &[f32]) -> u32,
    on_step: &mut dyn FnMut(&[Vec<u32>]),
) -> anyhow::Result<Vec<Vec<u32>>> {
    let mut out = vec![Vec::new(); prompts.len()];
    if o.max_new == 0 {
        return Ok(out);
    }
    let mut rows = Rows::new();
    // The prompt index of each row still decoding.
    let mut live: Vec<usize> = (0..prompts.len()).collect();
    let mut logits = rows.join(d, prompts.to_vec())?;
    while !live.is_empty() {
        let mut next = Vec::with_capacity(live.len());
        let mut keep = Vec::with_capacity(live.len());
        for (&i, l) in live.iter().zip(&logits) {
            let t = pick(i, l);
            let stopped = Some(t) == o.stop;
            if !stopped {
                out[i].push(t);
            }
            keep.push(!stopped && out[i].len() < o.max_new);
            next.push(t);
        }
        on_step(&out);
        rows.retain(&keep);
        (live, next) = kept(&keep, live, next);
        if live.is_empty() {
            break;
        }
        logits = rows.step(d, &next)?;
    }
    Ok(out)
}

/// The entries of `a` and `b` whose `keep` is true.
fn kept(keep: &[bool], a: Vec<usize>, b: Vec<u32>) -> (Vec<usize>, Vec<u32>) {
    keep.iter().zip(a.into_iter().zip(b)).filter(|(k, _)| **k).map(|(_, ab)| ab).unzip()
}

/// Greedy continuations of a batch, each ending at `o.stop` or after `o.max_new` tokens.
pub fn greedy(d: &Decoder, prompts: &[Vec<u32>], o: &DecodeOptions) -> anyhow::Result<Vec<Vec<u32>>> {
    decode(d, prompts, o, &mut |_, l| super::sampling::argmax(l) as u32, &mut |_| {})
}
