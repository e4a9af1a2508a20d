//! `RUN/pairs_eval.json`: a pairs run's test sets scored (exact match and token F1 against the
//! reference, overall and per category, with every prediction kept; see
//! [`crate::data::pairs::metrics`]), and the scores of a list of predictions.

use crate::data::pairs::metrics;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Mean EM and F1 of predictions.
pub fn score<'a>(preds: impl Iterator<Item = &'a Prediction>) -> Score {
    let (exact_match, token_f1, n) = metrics::score(preds.map(|p| (p.prediction.as_str(), p.reference.as_str())));
    Score { n, exact_match, token_f1 }
}

pub fn by_category(preds: &[Prediction]) -> Vec<(String, Score)> {
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
