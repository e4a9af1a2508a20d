//! Scoring a pairs run (`data.task = "pairs"`): greedy decoding of every test pair's prompt
//! `source <sep>` with the KV cache, batched, until `<end>`; exact match and token F1 against
//! the reference (see [`crate::data::pairs::metrics`]), overall and per category, with every
//! prediction kept. Written to `RUN/pairs_eval.json` when a pairs run finishes, and by
//! `normlab eval` for a saved pairs run.

use crate::data::Tokenizer;
use crate::data::pairs::load::TestSet;
use crate::data::pairs::metrics;
use crate::data::pairs::render;
use crate::decode::{DecodeOptions, Decoder, greedy};
use crate::model::Transformer;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Mean exact match and token F1 over `n` pairs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub n: usize,
    pub exact_match: f64,
    pub token_f1: f64,
}

/// One test set's scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetScore {
    pub name: String,
    pub overall: Score,
    /// Per category, sorted by name (pairs without a category count as `other`).
    pub categories: Vec<(String, Score)>,
}

/// One decoded pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub set: String,
    pub category: String,
    pub source: String,
    pub reference: String,
    pub prediction: String,
}

/// `RUN/pairs_eval.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairsEval {
    pub step: usize,
    pub sets: Vec<SetScore>,
    pub predictions: Vec<Prediction>,
    /// Tokens generated and the seconds it took (all sets, KV cache on).
    pub generated_tokens: usize,
    pub decode_s: f64,
}

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

/// Mean EM and F1 of predictions.
pub fn score<'a>(preds: impl Iterator<Item = &'a Prediction>) -> Score {
    let (exact_match, token_f1, n) = metrics::score(preds.map(|p| (p.prediction.as_str(), p.reference.as_str())));
    Score { n, exact_match, token_f1 }
}

fn by_category(preds: &[Prediction]) -> Vec<(String, Score)> {
    let mut groups: BTreeMap<&str, Vec<&Prediction>> = BTreeMap::new();
    for p in preds {
        groups.entry(&p.category).or_default().push(p);
    }
    groups.into_iter().map(|(c, ps)| (c.to_string(), score(ps.into_iter()))).collect()
}

/// One line per set: `generated: EM 0.412, F1 0.873 (300 pairs)`.
pub fn summary(e: &PairsEval) -> String {
    e.sets
        .iter()
        .map(|s| {
            format!(
                "{}: exact match {:.3}, token F1 {:.3} ({} pairs)",
                s.name, s.overall.exact_match, s.overall.token_f1, s.overall.n
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
