//! Scoring a pairs run (`data.task = "pairs"`): greedy decoding of every test pair's prompt
//! `source <sep>` with the KV cache, batched, until `<end>`, each prediction scored against its
//! reference into the record [`PairsEval`]. Written to `RUN/pairs_eval.json` when a pairs run
//! finishes, and by `normlab perplexity` for a saved pairs run.

use crate::data::Tokenizer;
use crate::data::pairs::load::TestSet;
use crate::data::pairs::render;
use crate::decode::{DecodeOptions, Decoder, greedy};
use crate::model::Transformer;
use crate::run::pairs_eval::{PairsEval, Prediction, SetScore, by_category, score};
use burn::tensor::Device;
use std::time::Instant;

/// Rows decoded together.
const DECODE_BATCH: usize = 64;

/// The model's greedy outputs for `sources`, in order. Prompts are decoded in batches of
/// similar length; each output stops at `<end>` or after `context` tokens.
pub fn predict(
    model: &Transformer,
    tok: &Tokenizer,
    sources: &[&str],
    context: usize,
    device: &Device,
) -> anyhow::Result<(Vec<String>, usize)> {
    let end = render::end_id(tok)?;
    let prompts: Vec<Vec<u32>> = sources.iter().map(|s| render::prompt(tok, s)).collect::<anyhow::Result<_>>()?;
    let mut order: Vec<usize> = (0..prompts.len()).collect();
    order.sort_by_key(|&i| prompts[i].len());
    let (mut out, mut generated) = (vec![String::new(); prompts.len()], 0);
    let d = Decoder { model, device, context, cache: true };
    // Up to a whole window of target tokens (no trained target was longer); a prompt that
    // outgrows the window slides like any decoding.
    let o = DecodeOptions { max_new: context, stop: Some(end) };
    for chunk in order.chunks(DECODE_BATCH) {
        let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| prompts[i].clone()).collect();
        for (&i, ids) in chunk.iter().zip(greedy(&d, &batch, &o)?) {
            generated += ids.len();
            out[i] = tok.decode(&ids)?;
        }
    }
    Ok((out, generated))
}

/// Decodes and scores every test set.
pub fn score_sets(
    model: &Transformer,
    tok: &Tokenizer,
    tests: &[TestSet],
    context: usize,
    step: usize,
    device: &Device,
) -> anyhow::Result<PairsEval> {
    let t0 = Instant::now();
    let mut sets = Vec::new();
    let mut predictions = Vec::new();
    let mut generated = 0;
    for t in tests {
        let sources: Vec<&str> = t.pairs.iter().map(|p| p.source.as_str()).collect();
        let (outs, n) = predict(model, tok, &sources, context, device)?;
        generated += n;
        let preds: Vec<Prediction> = t
            .pairs
            .iter()
            .zip(outs)
            .map(|(p, out)| Prediction {
                set: t.name.clone(),
                category: p.category.clone().unwrap_or_else(|| "other".into()),
                source: p.source.clone(),
                reference: p.target.clone(),
                prediction: out,
            })
            .collect();
        sets.push(SetScore { name: t.name.clone(), overall: score(preds.iter()), categories: by_category(&preds) });
        predictions.extend(preds);
    }
    Ok(PairsEval { step, sets, predictions, generated_tokens: generated, decode_s: t0.elapsed().as_secs_f64() })
}
