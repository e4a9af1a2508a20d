//! Decoding from a trained model: one loop ([`decode`]) for a batch of prompts, with a KV cache
//! (each step feeds only the new token) or without (each step re-runs the visible window), the
//! two giving the same tokens; [`generate`] samples text from one prompt with temperature and
//! top-k; [`greedy`] continues a batch greedily up to a stop token.
//!
//! The visible window is at most `context` tokens (the training sequence length): when a
//! sequence would outgrow it, decoding continues from its last `context / 2` positions (the
//! cache is rebuilt from them), in both modes alike.

use crate::data::Tokenizer;
use crate::model::{KvCache, Transformer};
use crate::rng::SplitMix64;
use anyhow::ensure;
use burn::tensor::{Device, Int, Tensor, TensorData};

#[derive(Clone, Debug)]
pub struct SampleOptions {
    pub max_new_tokens: usize,
    /// 0 = greedy.
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (None = all).
    pub top_k: Option<usize>,
    pub seed: u64,
    /// Longest context fed to the model (the training sequence length).
    pub context: usize,
    /// Decode with a KV cache (the default) or re-run the window every step.
    pub cache: bool,
}

impl SampleOptions {
    /// Refuses options that cannot sample (checked before anything is printed).
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.temperature >= 0.0 && self.temperature.is_finite(), "--temperature must be ≥ 0");
        ensure!(self.top_k != Some(0), "--top-k must be ≥ 1");
        Ok(())
    }
}

/// How a batch is decoded.
#[derive(Clone, Copy, Debug)]
pub struct DecodeOptions {
    pub max_new: usize,
    /// A row ends when it produces this token (not included in its output).
    pub stop: Option<u32>,
    pub context: usize,
    pub cache: bool,
}

/// Continues every prompt (non-empty token ids) by up to `o.max_new` tokens; `pick(row,
/// logits)` chooses each row's next token from its last position's logits. Prompts are left
/// padded to the longest (token 0, hidden by the key mask). Returns each row's new tokens.
pub fn decode(
    model: &Transformer,
    prompts: &[Vec<u32>],
    o: &DecodeOptions,
    device: &Device,
    pick: &mut dyn FnMut(usize, &[f32]) -> u32,
    on_step: &mut dyn FnMut(&[Vec<u32>]),
) -> anyhow::Result<Vec<Vec<u32>>> {
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let pads: Vec<usize> = prompts.iter().map(|p| longest - p.len()).collect();
    let mut seqs: Vec<Vec<u32>> = prompts.iter().zip(&pads).map(|(p, &n)| [vec![0; n], p.clone()].concat()).collect();
    let (mut out, mut done) = (vec![Vec::new(); prompts.len()], vec![false; prompts.len()]);
    let (mut start, mut cache): (usize, Option<KvCache>) = (0, None);
    for _ in 0..o.max_new {
        let len = seqs[0].len();
        if len - start > o.context {
            start = len - (o.context / 2).max(1);
            cache = None;
        }
        let row_pads: Vec<usize> = pads.iter().map(|&p| p.saturating_sub(start)).collect();
        let logits = if o.cache {
            let c = cache.get_or_insert_with(|| KvCache::new(model.n_layers()));
            let x = window(&seqs, start + c.len, len, device);
            model.forward_cached(x, c, &row_pads, o.context)
        } else {
            model.forward_masked(window(&seqs, start, len, device), &row_pads, o.context)
        };
        for (b, row) in last_logits(logits)?.iter().enumerate() {
            let t = if done[b] { o.stop.unwrap_or(0) } else { pick(b, row) };
            if !done[b] {
                if Some(t) == o.stop { done[b] = true } else { out[b].push(t) }
            }
            seqs[b].push(t);
        }
        on_step(&out);
        if done.iter().all(|&d| d) {
            break;
        }
    }
    Ok(out)
}

/// `[B, to − from]` tokens of every row.
fn window(seqs: &[Vec<u32>], from: usize, to: usize, device: &Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = seqs.iter().flat_map(|s| s[from..to].iter().map(|&t| t as i64)).collect();
    Tensor::from_data(TensorData::new(ids, [seqs.len(), to - from]), device)
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

/// Greedy continuations of a batch, each ending at `stop` or after `max_new` tokens.
pub fn greedy(
    model: &Transformer,
    prompts: &[Vec<u32>],
    o: &DecodeOptions,
    device: &Device,
) -> anyhow::Result<Vec<Vec<u32>>> {
    decode(model, prompts, o, device, &mut |_, l| argmax(l) as u32, &mut |_| {})
}

/// Generates a continuation of `prompt`; `on_text` receives the decoded text as it grows.
pub fn generate(
    model: &Transformer,
    tok: &Tokenizer,
    prompt: &str,
    opts: &SampleOptions,
    device: &Device,
    on_text: &mut dyn FnMut(&str),
) -> anyhow::Result<String> {
    opts.validate()?;
    ensure!(opts.context >= 2, "the context must hold at least 2 tokens (train.seq_len ≥ 2)");
    let prompt = if prompt.is_empty() { crate::data::dataset::DOC_SEPARATOR } else { prompt };
    let ids = tok.encode(prompt)?;
    ensure!(!ids.is_empty(), "the prompt encodes to no tokens");
    let mut rng = SplitMix64::new(opts.seed);
    let o = DecodeOptions { max_new: opts.max_new_tokens, stop: None, context: opts.context, cache: opts.cache };
    let mut shown = 0;
    let mut pick = |_: usize, l: &[f32]| sample(l, opts.temperature, opts.top_k, &mut rng) as u32;
    let mut show = |out: &[Vec<u32>]| {
        // Hold back a trailing partial UTF-8 sequence until its remaining bytes arrive.
        let text = tok.decode(&out[0]).unwrap_or_default();
        let stable = text.trim_end_matches('\u{FFFD}');
        if stable.len() > shown {
            on_text(&stable[shown..]);
            shown = stable.len();
        }
    };
    let out = decode(model, &[ids], &o, device, &mut pick, &mut show)?;
    tok.decode(&out[0])
}

/// The index of the largest logit (the last of equals).
pub fn argmax(logits: &[f32]) -> usize {
    logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0)
}

/// How the next token is drawn from a position's logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// 0 = greedy (the arg-max).
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (None = all).
    pub top_k: Option<usize>,
    /// Nucleus: keep the most likely tokens whose probabilities first sum to at least `top_p`
    /// (1 = all).
    pub top_p: f64,
}

/// Draws an index from `softmax(logits / temperature)` restricted to the `top_k` largest; the
/// arg-max when `temperature` is 0.
pub fn sample(logits: &[f32], temperature: f64, top_k: Option<usize>, rng: &mut SplitMix64) -> usize {
    sample_with(logits, &Sampling { temperature, top_k, top_p: 1.0 }, rng)
}

/// Draws an index under `s`: top-k, then the nucleus of the renormalised distribution.
pub fn sample_with(logits: &[f32], s: &Sampling, rng: &mut SplitMix64) -> usize {
    if s.temperature == 0.0 {
        return argmax(logits);
    }
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    idx.truncate(s.top_k.unwrap_or(logits.len()).min(logits.len()));
    let max = logits[idx[0]] as f64;
    let mut weights: Vec<f64> = idx.iter().map(|&i| ((logits[i] as f64 - max) / s.temperature).exp()).collect();
    if s.top_p < 1.0 {
        let total: f64 = weights.iter().sum();
        let (mut acc, mut keep) = (0.0, weights.len());
        for (k, w) in weights.iter().enumerate() {
            acc += w / total;
            if acc >= s.top_p {
                keep = k + 1;
                break;
            }
        }
        weights.truncate(keep);
    }
    let mut u = rng.uniform() * weights.iter().sum::<f64>();
    for (k, w) in weights.iter().enumerate() {
        u -= w;
        if u <= 0.0 {
            return idx[k];
        }
    }
    idx[weights.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::ParamSource;
    use crate::model::ModelConfig;
    use crate::recipe::{PRESET_NAMES, RecipeConfig};
    use crate::testutil::cpu;

    fn model(recipe: &str) -> Transformer {
        let cfg = ModelConfig {
            vocab_size: 32,
            d_model: 16,
            n_layers: 2,
            n_heads: 2,
            // Far from uniform logits: the arg-max is decided by the weights, not by rounding.
            init_std: 0.3,
            recipe: RecipeConfig::Preset(recipe.into()),
            ..Default::default()
        };
        Transformer::new(&cfg, ParamSource::Seeded(3), &cpu()).unwrap()
    }

    fn opts(cache: bool) -> DecodeOptions {
        // Context 12 < 5 + 10: the window slides once, in both modes.
        DecodeOptions { max_new: 10, stop: None, context: 12, cache }
    }

    /// Nucleus sampling keeps the fewest most likely tokens whose probabilities reach top_p:
    /// with p = (0.5, 0.3, 0.2), top_p 0.5 always draws token 0, top_p 0.8 never token 2, and
    /// 1 draws token 2 about a fifth of the time.
    #[test]
    fn top_p_keeps_the_smallest_nucleus() {
        let logits: Vec<f32> = [0.5f32, 0.3, 0.2].iter().map(|p| p.ln()).collect();
        let mut rng = SplitMix64::new(1);
        let draw = |top_p: f64, rng: &mut SplitMix64| -> Vec<usize> {
            (0..4000).map(|_| sample_with(&logits, &Sampling { temperature: 1.0, top_k: None, top_p }, rng)).collect()
        };
        assert!(draw(0.5, &mut rng).iter().all(|&t| t == 0));
        assert!(draw(0.8, &mut rng).iter().all(|&t| t < 2));
        let share = draw(1.0, &mut rng).iter().filter(|&&t| t == 2).count() as f64 / 4000.0;
        assert!((share - 0.2).abs() < 0.03, "{share}");
    }

    /// The KV cache changes nothing: for every preset, greedy decoding of three left-padded
    /// prompts of different lengths gives the same tokens with and without it.
    #[test]
    fn cached_and_uncached_decoding_give_the_same_tokens_for_every_recipe() {
        let prompts = vec![vec![1, 2, 3, 4, 5], vec![7], vec![9, 8, 7]];
        for name in PRESET_NAMES {
            let m = model(name);
            let cached = greedy(&m, &prompts, &opts(true), &cpu()).unwrap();
            let plain = greedy(&m, &prompts, &opts(false), &cpu()).unwrap();
            assert_eq!(cached, plain, "{name}");
            assert!(cached.iter().all(|r| r.len() == 10), "{name}: {cached:?}");
        }
    }

    /// Padding is invisible: a prompt decoded in a batch beside a longer one (so left-padded)
    /// continues exactly as when decoded alone, and a stop token ends only its own row.
    #[test]
    fn a_padded_row_decodes_as_it_would_alone_and_stops_at_its_stop_token() {
        let m = model("pre");
        // A context the sequences never outgrow: the windows stay the same.
        let o = DecodeOptions { context: 32, ..opts(true) };
        let alone = greedy(&m, &[vec![7, 3]], &o, &cpu()).unwrap();
        let batched = greedy(&m, &[vec![1, 2, 3, 4, 5, 6], vec![7, 3]], &o, &cpu()).unwrap();
        assert_eq!(batched[1], alone[0]);
        let stop = alone[0][3];
        let o = DecodeOptions { stop: Some(stop), ..o };
        let stopped = greedy(&m, &[vec![7, 3]], &o, &cpu()).unwrap();
        let first = alone[0].iter().position(|&t| t == stop).unwrap();
        assert_eq!(stopped[0], alone[0][..first], "ends before its first stop token");
    }
}
