//! Log-likelihood scoring of several continuations of one context, the context run once: a
//! multiple-choice item's choices share its context's keys and values (KV cache) instead of
//! each re-running it. The scores are those of [`super::score::score`] on each whole sequence
//! (the cached forward computes what the uncached one does, `decode::tests`).
//!
//! A group's contexts are prefilled together, left padded; each context's cache is then
//! repeated once per continuation, and every continuation (right padded: under the causal mask
//! padding after a row changes none of its positions) is fed in one more forward.

use super::rows::Decoder;
use super::score::{GROUP_TOKENS, TokenScore};
use crate::model::KvCache;
use anyhow::ensure;
use burn::tensor::{Int, Tensor, TensorData};

/// A context and the continuations scored after it (each non-empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shared {
    pub context: Vec<u32>,
    pub continuations: Vec<Vec<u32>>,
}

impl Shared {
    fn longest(&self) -> usize {
        self.continuations.iter().map(Vec::len).max().unwrap_or(0)
    }
}

/// Logits one group materialises at most (values).
const GROUP_LIMIT: usize = 1 << 25;

/// Each continuation's tokens scored given its context and the continuation's tokens before
/// it; a context with its longest continuation must fit the context + 1 tokens.
pub fn score_shared(d: &Decoder, items: &[Shared]) -> anyhow::Result<Vec<Vec<Vec<TokenScore>>>> {
    for s in items {
        ensure!(!s.context.is_empty(), "a shared context must hold at least one token");
        ensure!(s.continuations.iter().all(|c| !c.is_empty()), "a continuation must hold at least one token");
        let n = s.context.len() + s.longest();
        ensure!(n <= d.context + 1, "a sequence of {n} tokens exceeds the context of {}", d.context);
    }
    let vocab = d.model.tok_emb.dims()[0];
    let mut out = Vec::with_capacity(items.len());
    let mut start = 0;
    while start < items.len() {
        let mut end = start + 1;
        let cost = |s: &Shared| s.context.len() + s.continuations.len() * s.longest();
        let fits = |n: usize| n * vocab <= GROUP_LIMIT && n <= GROUP_TOKENS;
        let mut total = cost(&items[start]);
        while end < items.len() && fits(total + cost(&items[end])) {
            total += cost(&items[end]);
            end += 1;
        }
        out.extend(score_group(d, &items[start..end])?);
        start = end;
    }
    Ok(out)
}

/// `[B, V]` log-probabilities of every context's next token, and the contexts' cache.
fn prefill(d: &Decoder, items: &[Shared]) -> (Tensor<2>, KvCache, Vec<usize>) {
    let longest = items.iter().map(|s| s.context.len()).max().unwrap_or(0);
    let pads: Vec<usize> = items.iter().map(|s| longest - s.context.len()).collect();
    let ids: Vec<i64> = items
        .iter()
        .zip(&pads)
        .flat_map(|(s, &p)| std::iter::repeat_n(0, p).chain(s.context.iter().map(|&t| i64::from(t))))
        .collect();
    let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [items.len(), longest]), d.device);
    let mut cache = KvCache::new(d.model.n_layers());
    let logits = d.model.forward_cached(x, &mut cache, &pads, d.context);
    let [b, t, v] = logits.dims();
    let last = logits.slice([0..b, t - 1..t, 0..v]).reshape([b, v]);
    (burn::tensor::activation::log_softmax(last, 1), cache, pads)
}

/// The cache's rows `rows` (repeats allowed).
fn repeat_rows(cache: KvCache, rows: &[usize], d: &Decoder) -> KvCache {
    let ids: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
    let index = Tensor::<1, Int>::from_data(TensorData::new(ids, [rows.len()]), d.device);
    let pick = |t: Tensor<4>| t.select(0, index.clone());
    let slots = cache.slots.into_iter().map(|s| s.map(|(k, v)| (pick(k), pick(v)))).collect();
    KvCache { slots, len: cache.len, value_output: cache.value_output }
}

fn score_group(d: &Decoder, items: &[Shared]) -> anyhow::Result<Vec<Vec<Vec<TokenScore>>>> {
    let (first, cache, pads) = prefill(d, items);
    // One row per continuation: its item, and the continuation.
    let rows: Vec<(usize, &Vec<u32>)> =
        items.iter().enumerate().flat_map(|(i, s)| s.continuations.iter().map(move |c| (i, c))).collect();
    let item_of: Vec<usize> = rows.iter().map(|r| r.0).collect();
    let [_, v] = first.dims();
    let first = first.select(0, index(&item_of, d)).reshape([rows.len(), 1, v]);
    let first = Picked::read(first, &rows, 0, d)?;
    let rest = continue_rows(d, repeat_rows(cache, &item_of, d), &item_of, &pads, &rows)?;
    let mut out: Vec<Vec<Vec<TokenScore>>> = items.iter().map(|s| Vec::with_capacity(s.continuations.len())).collect();
    for (r, &(i, c)) in rows.iter().enumerate() {
        let tokens = (0..c.len())
            .map(|j| match j {
                0 => first.at(r, 0),
                _ => rest.as_ref().expect("a continuation past one token").at(r, j - 1),
            })
            .collect();
        out[i].push(tokens);
    }
    Ok(out)
}

fn index(rows: &[usize], d: &Decoder) -> Tensor<1, Int> {
    let ids: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
    Tensor::<1, Int>::from_data(TensorData::new(ids, [rows.len()]), d.device)
}

/// Each row's continuation but its last token, fed after the repeated cache; `None` when every
/// continuation is one token.
fn continue_rows(
    d: &Decoder,
    mut cache: KvCache,
    item_of: &[usize],
    pads: &[usize],
    rows: &[(usize, &Vec<u32>)],
) -> anyhow::Result<Option<Picked>> {
    let t = rows.iter().map(|r| r.1.len()).max().unwrap_or(1) - 1;
    if t == 0 {
        return Ok(None);
    }
    let ids: Vec<i64> =
        rows.iter().flat_map(|(_, c)| (0..t).map(move |j| c.get(j).map_or(0, |&x| i64::from(x)))).collect();
    let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [rows.len(), t]), d.device);
    let row_pads: Vec<usize> = item_of.iter().map(|&i| pads[i]).collect();
    let logits = d.model.forward_cached(x, &mut cache, &row_pads, d.context);
    Picked::read(burn::tensor::activation::log_softmax(logits, 2), rows, 1, d).map(Some)
}

/// Each row's target tokens' log-probabilities and whether each is the arg-max, `[R, T]`, on
/// the host.
struct Picked {
    logp: Vec<f32>,
    best: Vec<i64>,
    targets: Vec<i64>,
    t: usize,
}

impl Picked {
    /// From `logp` `[R, T, V]` whose position `j` predicts each row's continuation token
    /// `skip + j` (padding past a row's end predicts token 0, never read).
    fn read(logp: Tensor<3>, rows: &[(usize, &Vec<u32>)], skip: usize, d: &Decoder) -> anyhow::Result<Self> {
        let [r, t, _] = logp.dims();
        let targets: Vec<i64> =
            rows.iter().flat_map(|(_, c)| (0..t).map(move |j| c.get(j + skip).map_or(0, |&x| i64::from(x)))).collect();
        let index = Tensor::<2, Int>::from_data(TensorData::new(targets.clone(), [r, t]), d.device);
        let picked = logp.clone().gather(2, index.reshape([r, t, 1]));
        let err = |e| anyhow::anyhow!("reading scores failed: {e:?}");
        // As lm-evaluation-harness's `hf` model and `score`: greedy where the arg-max is the token.
        let best = logp.argmax(2).into_data().convert::<i64>().try_into_vec::<i64>().map_err(err)?;
        let logp = picked.into_data().convert::<f32>().try_into_vec::<f32>().map_err(err)?;
        Ok(Self { logp, best, targets, t })
    }

    /// Row `r`'s score at position `j`.
    fn at(&self, r: usize, j: usize) -> TokenScore {
        let k = r * self.t + j;
        TokenScore { logprob: f64::from(self.logp[k]), greedy: self.best[k] == self.targets[k], top: Vec::new() }
    }
}
