//! Text from a prompt: `normlab generate`'s sampling with temperature, top-k and top-p, the
//! text shown as it grows.

use super::rows::Decoder;
use super::run::{DecodeOptions, decode};
use super::sampling::{Sampling, sample};
use crate::data::Tokenizer;
use crate::rng::SplitMix64;
use anyhow::ensure;

/// What `normlab generate` draws.
#[derive(Clone, Debug)]
pub struct SampleOptions {
    pub max_new_tokens: usize,
    pub sampling: Sampling,
    pub seed: u64,
}

impl SampleOptions {
    /// Refuses options that cannot sample (checked before anything is printed).
    pub fn validate(&self) -> anyhow::Result<()> {
        let t = self.sampling.temperature;
        ensure!(t.is_finite() && t >= 0.0, "--temperature must be a finite number ≥ 0 (0 = greedy), not {t}");
        ensure!(self.sampling.top_k != Some(0), "--top-k must be ≥ 1");
        let p = self.sampling.top_p;
        ensure!(p > 0.0 && p <= 1.0, "--top-p must be in (0, 1], not {p}");
        Ok(())
    }
}

/// Generates a continuation of `prompt` (the document separator when empty); `on_text`
/// receives the decoded text as it grows, never a partial UTF-8 character, with the number of
/// tokens generated so far.
pub fn generate(
    d: &Decoder,
    tok: &Tokenizer,
    prompt: &str,
    opts: &SampleOptions,
    on_text: &mut dyn FnMut(&str, usize),
) -> anyhow::Result<String> {
    opts.validate()?;
    ensure!(d.context >= 2, "the context must hold at least 2 tokens (train.seq_len ≥ 2)");
    let prompt = if prompt.is_empty() { crate::data::dataset::DOC_SEPARATOR } else { prompt };
    let ids = tok.encode(prompt)?;
    ensure!(!ids.is_empty(), "the prompt encodes to no tokens");
    let mut rng = SplitMix64::new(opts.seed);
    let o = DecodeOptions { max_new: opts.max_new_tokens, stop: None };
    let mut shown = 0;
    let mut pick = |_: usize, l: &[f32]| sample(l, &opts.sampling, &mut rng) as u32;
    let mut show = |out: &[Vec<u32>]| {
        // Hold back a trailing partial UTF-8 sequence until its remaining bytes arrive.
        let text = tok.decode(&out[0]).unwrap_or_default();
        let stable = text.trim_end_matches('\u{FFFD}');
        if stable.len() > shown {
            on_text(&stable[shown..], out[0].len());
            shown = stable.len();
        }
    };
    let out = decode(d, &[ids], &o, &mut pick, &mut show)?;
    tok.decode(&out[0])
}
