//! `normlab generate`: text sampled from a saved run through the one decoding path.

use crate::decode::{Decoder, SampleOptions, generate as decode_text};
use crate::run::SavedRun;
use std::path::Path;

/// Samples from a saved run, printing the text as it grows and, on standard error, the time to
/// the first token (loading the weights and the prompt's forward included) and the decoding
/// speed after it.
pub fn generate(path: &Path, prompt: &str, opts: SampleOptions, cache: bool) -> anyhow::Result<()> {
    opts.validate()?;
    outp!("{prompt}");
    let t0 = std::time::Instant::now();
    // When text first shows and after how many tokens; tokens generated in all.
    let mut first: Option<(std::time::Instant, usize)> = None;
    let mut n = 0usize;
    sample(path, prompt, &opts, cache, &mut |t, tokens| {
        first.get_or_insert_with(|| (std::time::Instant::now(), tokens));
        n = tokens;
        outp!("{t}");
    })?;
    outln!();
    let cache = if cache { "on" } else { "off" };
    match first {
        Some((f, k)) if n > k => errln!(
            "first text after {:.2} s; then {} tokens in {:.2} s: {:.1} tokens/s (KV cache {cache})",
            (f - t0).as_secs_f64(),
            n - k,
            f.elapsed().as_secs_f64(),
            (n - k) as f64 / f.elapsed().as_secs_f64()
        ),
        _ => errln!("{n} tokens in {:.2} s (KV cache {cache})", t0.elapsed().as_secs_f64()),
    }
    Ok(())
}

/// Samples a continuation of `prompt` from a saved run (with the KV cache unless `cache` is
/// off); `on_text` receives the text as it grows.
pub fn sample(
    path: &Path,
    prompt: &str,
    opts: &SampleOptions,
    cache: bool,
    on_text: &mut dyn FnMut(&str, usize),
) -> anyhow::Result<String> {
    let saved = SavedRun::open(path)?;
    let device = saved.cfg.open_device()?;
    let model = saved.model(&device)?;
    let d = Decoder { model: &model, device: &device, context: saved.cfg.train.seq_len, cache };
    decode_text(&d, &saved.tokenizer, prompt, opts, on_text)
}
