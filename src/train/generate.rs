//! Sampling text from a trained model: a plain loop that re-runs the forward over the last
//! `context` tokens for every new token (no KV cache yet), with temperature and top-k.

use crate::data::Tokenizer;
use crate::model::Transformer;
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
}

impl SampleOptions {
    /// Refuses options that cannot sample (checked before anything is printed).
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.temperature >= 0.0 && self.temperature.is_finite(), "--temperature must be ≥ 0");
        ensure!(self.top_k != Some(0), "--top-k must be ≥ 1");
        Ok(())
    }
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
    let prompt = if prompt.is_empty() { crate::data::dataset::DOC_SEPARATOR } else { prompt };
    let mut ids = tok.encode(prompt)?;
    let start = ids.len();
    let mut rng = SplitMix64::new(opts.seed);
    let mut shown = 0;
    for _ in 0..opts.max_new_tokens {
        let ctx = &ids[ids.len().saturating_sub(opts.context)..];
        let x = Tensor::<2, Int>::from_data(
            TensorData::new(ctx.iter().map(|&i| i as i64).collect::<Vec<_>>(), [1, ctx.len()]),
            device,
        );
        let logits = model.forward(x, false, false).logits;
        let v = logits.dims()[2];
        let last: Vec<f32> = logits
            .slice([0..1, ctx.len() - 1..ctx.len(), 0..v])
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        ids.push(sample(&last, opts.temperature, opts.top_k, &mut rng) as u32);
        let text = tok.decode(&ids[start..])?;
        // Hold back a trailing partial UTF-8 sequence until its remaining bytes arrive.
        let stable = text.trim_end_matches('\u{FFFD}');
        if stable.len() > shown {
            on_text(&stable[shown..]);
            shown = stable.len();
        }
    }
    tok.decode(&ids[start..])
}

/// Draws an index from `softmax(logits / temperature)` restricted to the `top_k` largest; the
/// arg-max when `temperature` is 0.
pub fn sample(logits: &[f32], temperature: f64, top_k: Option<usize>, rng: &mut SplitMix64) -> usize {
    let argmax = || logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
    if temperature == 0.0 {
        return argmax();
    }
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    idx.truncate(top_k.unwrap_or(logits.len()).min(logits.len()));
    let max = logits[idx[0]] as f64;
    let weights: Vec<f64> = idx.iter().map(|&i| ((logits[i] as f64 - max) / temperature).exp()).collect();
    let mut u = rng.uniform() * weights.iter().sum::<f64>();
    for (k, w) in weights.iter().enumerate() {
        u -= w;
        if u <= 0.0 {
            return idx[k];
        }
    }
    idx[idx.len() - 1]
}
