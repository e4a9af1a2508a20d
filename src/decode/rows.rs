//! The rows decoded together: one KV cache shared by left padding, rows that join (prefilled
//! together in one forward) and leave between steps, each row rotated at its own positions
//! ([`Transformer::forward_cached`]) so that its logits are those of decoding it alone.
//!
//! A row sees at most `context` tokens (the training sequence length): a row that would outgrow
//! it continues from its last `context / 2` tokens, as it would decoded alone; the cache is then
//! rebuilt from every row's window. Without the cache ([`Decoder::cache`] off) every step
//! re-runs every row's window, the reference the cached path is checked against.

use crate::model::attention::self_attention::KvSlot;
use crate::model::{KvCache, Transformer};
use anyhow::ensure;
use burn::tensor::{Device, Int, Tensor, TensorData};
use std::ops::Range;

/// A model and what decoding it needs.
#[derive(Clone, Copy)]
pub struct Decoder<'a> {
    pub model: &'a Transformer,
    pub device: &'a Device,
    /// The longest window a row sees, and BHyT's fixed T: the training sequence length.
    pub context: usize,
    /// Keep keys and values between steps (each step then feeds one token per row), or re-run
    /// every row's window at every step.
    pub cache: bool,
}

/// The rows in decoding: their shared cache, left padding and visible windows.
#[derive(Default)]
pub struct Rows {
    cache: Option<KvCache>,
    /// Each row's left padding in the cache.
    pads: Vec<usize>,
    /// Each row's tokens in its window: its prompt (or the end of it) and what it generated.
    windows: Vec<Vec<u32>>,
}

impl Rows {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Adds `prompts` (each non-empty) after the rows there are, prompts of similar length
    /// prefilled together ([`similar_runs`]); returns each new row's next-token logits.
    pub fn join(&mut self, d: &Decoder, prompts: Vec<Vec<u32>>) -> anyhow::Result<Vec<Vec<f32>>> {
        ensure!(prompts.iter().all(|p| !p.is_empty()), "a prompt to decode must hold at least one token");
        let windows: Vec<Vec<u32>> = prompts.into_iter().map(|p| window_of(p, d.context)).collect();
        let mut logits = Vec::with_capacity(windows.len());
        for run in similar_runs(&windows) {
            let p = prefill(d, &windows[run.clone()])?;
            self.merge(p.cache, p.pads);
            self.windows.extend_from_slice(&windows[run]);
            logits.extend(p.logits);
        }
        Ok(logits)
    }

    /// Feeds every row its next token (one per row, in order); returns each row's next-token
    /// logits.
    pub fn step(&mut self, d: &Decoder, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>> {
        ensure!(tokens.len() == self.len(), "{} tokens for {} rows", tokens.len(), self.len());
        for (w, &t) in self.windows.iter_mut().zip(tokens) {
            w.push(t);
        }
        let cached = self.cache.as_mut().filter(|_| d.cache);
        match cached {
            Some(c) if self.windows.iter().all(|w| w.len() <= d.context) => {
                let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
                let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [tokens.len(), 1]), d.device);
                last_logits(d.model.forward_cached(x, c, &self.pads, d.context))
            }
            _ => self.rebuild(d),
        }
    }

    /// Keeps the rows whose `keep` is true (in order); trims the padding they all share.
    pub fn retain(&mut self, keep: &[bool]) {
        let idx: Vec<usize> = (0..keep.len()).filter(|&i| keep[i]).collect();
        if idx.is_empty() {
            *self = Self::new();
            return;
        }
        self.windows = idx.iter().map(|&i| std::mem::take(&mut self.windows[i])).collect();
        self.pads = idx.iter().map(|&i| self.pads[i]).collect();
        let trim = self.pads.iter().copied().min().unwrap_or(0);
        self.pads.iter_mut().for_each(|p| *p -= trim);
        if let Some(c) = &mut self.cache {
            let all = idx.len() == keep.len();
            for slot in c.slots.iter_mut() {
                *slot = slot.take().map(|(k, v)| (keep_rows(k, &idx, all, trim), keep_rows(v, &idx, all, trim)));
            }
            c.len -= trim;
        }
    }

    /// Slides every window that outgrew the context, then prefills all windows afresh.
    fn rebuild(&mut self, d: &Decoder) -> anyhow::Result<Vec<Vec<f32>>> {
        for w in self.windows.iter_mut() {
            if w.len() > d.context {
                *w = window_of(std::mem::take(w), d.context);
            }
        }
        let p = prefill(d, &self.windows)?;
        self.cache = p.cache;
        self.pads = p.pads;
        Ok(p.logits)
    }

    /// Appends the rows of `row` (prefilled from an empty cache, left padded by `pads`) to the
    /// batch, left padding whichever holds fewer positions. Without a cache on both sides
    /// there is nothing to align, and the next step rebuilds.
    fn merge(&mut self, row: Option<KvCache>, pads: Vec<usize>) {
        match (self.cache.take(), row) {
            (Some(batch), Some(row)) => {
                let len = batch.len.max(row.len);
                let (grow_batch, grow_row) = (len - batch.len, len - row.len);
                let slots = stack(batch.slots, grow_batch, row.slots, grow_row);
                self.pads.iter_mut().for_each(|p| *p += grow_batch);
                self.pads.extend(pads.into_iter().map(|p| p + grow_row));
                self.cache = Some(KvCache { slots, len, value_output: batch.value_output });
            }
            (None, row) if self.is_empty() => {
                self.cache = row;
                self.pads = pads;
            }
            _ => self.pads.extend(pads),
        }
    }
}

/// `windows` split, in order, into runs prefilled in one forward each: a run takes the next
/// window while its left padding stays within a quarter of its tokens or 32 positions. Prompts
/// of similar length share a forward (one forward's fixed cost for several), while a short
/// prompt is not padded to a long one's length (which would multiply the work on it).
fn similar_runs(windows: &[Vec<u32>]) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    // The last run's longest window and its tokens.
    let (mut longest, mut tokens) = (0, 0);
    for (i, w) in windows.iter().enumerate() {
        let (l, t) = (longest.max(w.len()), tokens + w.len());
        match runs.last_mut() {
            Some(r) if l * (r.len() + 1) - t <= (t / 4).max(32) => {
                r.end = i + 1;
                longest = l;
                tokens = t;
            }
            _ => {
                runs.push(i..i + 1);
                longest = w.len();
                tokens = w.len();
            }
        }
    }
    runs
}

/// A prompt's window: the prompt, or its last `context / 2` tokens when it outgrows `context`.
fn window_of(tokens: Vec<u32>, context: usize) -> Vec<u32> {
    if tokens.len() <= context {
        return tokens;
    }
    let keep = (context / 2).max(1);
    tokens[tokens.len() - keep..].to_vec()
}

/// What a prefill leaves.
struct Prefilled {
    /// The keys and values (when decoding keeps them).
    cache: Option<KvCache>,
    /// Each row's left padding.
    pads: Vec<usize>,
    /// Each row's next-token logits.
    logits: Vec<Vec<f32>>,
}

/// One forward of `windows` left padded to the longest (token 0, hidden by the key mask), from
/// an empty cache.
fn prefill(d: &Decoder, windows: &[Vec<u32>]) -> anyhow::Result<Prefilled> {
    let longest = windows.iter().map(Vec::len).max().unwrap_or(0);
    let pads: Vec<usize> = windows.iter().map(|w| longest - w.len()).collect();
    let ids: Vec<i64> = windows
        .iter()
        .zip(&pads)
        .flat_map(|(w, &p)| std::iter::repeat_n(0, p).chain(w.iter().map(|&t| i64::from(t))))
        .collect();
    let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [windows.len(), longest]), d.device);
    if !d.cache {
        let logits = last_logits(d.model.forward_masked(x, &pads, d.context))?;
        return Ok(Prefilled { cache: None, pads, logits });
    }
    let mut cache = KvCache::new(d.model.n_layers());
    let logits = last_logits(d.model.forward_cached(x, &mut cache, &pads, d.context))?;
    Ok(Prefilled { cache: Some(cache), pads, logits })
}

/// `t` `[B, H, len, h]` with `n` zero positions prepended.
fn left_pad(t: Tensor<4>, n: usize) -> Tensor<4> {
    if n == 0 {
        return t;
    }
    let [b, h, _, d] = t.dims();
    let zeros = Tensor::<4>::zeros([b, h, n, d], &t.device());
    Tensor::cat(vec![zeros, t], 2)
}

/// The rows `idx` of `t` `[B, H, len, h]` (all of them when `all`), less their first `trim`
/// positions.
fn keep_rows(t: Tensor<4>, idx: &[usize], all: bool, trim: usize) -> Tensor<4> {
    let t = if all {
        t
    } else {
        let ids: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
        let i = Tensor::<1, Int>::from_data(TensorData::new(ids, [idx.len()]), &t.device());
        t.select(0, i)
    };
    let [b, h, len, d] = t.dims();
    if trim > 0 { t.slice([0..b, 0..h, trim..len, 0..d]) } else { t }
}

/// The last position's logits of every row, on the host.
fn last_logits(logits: Tensor<3>) -> anyhow::Result<Vec<Vec<f32>>> {
    let [b, t, v] = logits.dims();
    let flat: Vec<f32> = logits
        .slice([0..b, t - 1..t, 0..v])
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| anyhow::anyhow!("reading the logits from the device failed: {e:?}"))?;
    Ok(flat.chunks(v).map(<[f32]>::to_vec).collect())
}

/// Two caches' slots side by side (`a`'s rows first), `a`'s left padded by `grow_a` positions
/// and `b`'s by `grow_b`.
fn stack(a: Vec<KvSlot>, grow_a: usize, b: Vec<KvSlot>, grow_b: usize) -> Vec<KvSlot> {
    let side_by_side = |x: Tensor<4>, y: Tensor<4>| Tensor::cat(vec![left_pad(x, grow_a), left_pad(y, grow_b)], 0);
    a.into_iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Some((ka, va)), Some((kb, vb))) => Some((side_by_side(ka, kb), side_by_side(va, vb))),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::similar_runs;

    fn windows(lengths: &[usize]) -> Vec<Vec<u32>> {
        lengths.iter().map(|&n| vec![1; n]).collect()
    }

    /// By hand: the padding a run would hold against max(its tokens / 4, 32).
    #[test]
    fn prompts_of_similar_length_are_prefilled_together() {
        // 40 and 3: 37 padding positions > max(43 / 4, 32) = 32.
        assert_eq!(similar_runs(&windows(&[40, 3])), vec![0..1, 1..2]);
        // 2 and 25: 23 ≤ 32.
        assert_eq!(similar_runs(&windows(&[2, 25])), vec![0..2]);
        // 500, 480, 510: 40 ≤ 1490 / 4; then 8 would add 542 > 1498 / 4; 8 and 12: 4 ≤ 32.
        assert_eq!(similar_runs(&windows(&[500, 480, 510, 8, 12])), vec![0..3, 3..5]);
        assert!(similar_runs(&[]).is_empty());
    }
}
