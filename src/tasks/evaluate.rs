//! A task evaluated on a model: every request scored ([`super::score`]), each item's result
//! kept (as lm-evaluation-harness's samples are), and the task's metrics.

use super::item::{Item, Scoring, Task};
use super::metrics::{Metrics, bits_per_byte, choice_scores, mean_with_stderr, perplexity};
use super::score::{score_requests, score_text};
use crate::data::Tokenizer;
use crate::decode::Decoder;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One item's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ItemResult {
    /// Each request's log-likelihood (a text's: over all its windows).
    pub lls: Vec<f64>,
    /// Whether each request's continuation is the greedy one.
    pub greedy: Vec<bool>,
    /// The answer, for a choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// A task's result: its metrics, per category where items have one, and every item's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub task: String,
    pub n: usize,
    pub metrics: Metrics,
    /// `acc` per category (MMLU's subjects, the built-in suite's phenomena).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<String, super::metrics::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ItemResult>,
}

/// `RUN/evaluation.json` (or `normlab evaluate --out`): a saved run's downstream results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub run: String,
    /// The weights evaluated and the step they were saved at.
    pub weights: String,
    pub step: Option<usize>,
    pub seconds: f64,
    pub results: Vec<TaskResult>,
}

/// Evaluates `task`; an empty context stands for `prefix` (the run's document boundary).
pub fn evaluate(d: &Decoder, tok: &Tokenizer, prefix: u32, task: &Task) -> anyhow::Result<TaskResult> {
    let requests: Vec<_> = task.items.iter().flat_map(Item::requests).collect();
    let mut scored = score_requests(d, tok, prefix, &requests)?.into_iter();
    let mut items = Vec::with_capacity(task.items.len());
    for item in &task.items {
        let r = match item {
            Item::Text { text } => ItemResult {
                lls: vec![score_text(d, tok, prefix, text)?],
                greedy: vec![],
                answer: None,
                category: None,
            },
            Item::Choice { requests, answer, category, .. } => {
                let l: Vec<_> = scored.by_ref().take(requests.len()).collect();
                let (lls, greedy) = l.iter().map(|x| (x.loglik, x.greedy)).unzip();
                ItemResult { lls, greedy, answer: Some(*answer), category: category.clone() }
            }
            Item::Cloze { .. } => {
                let l = scored.next().expect("a cloze has one request");
                ItemResult { lls: vec![l.loglik], greedy: vec![l.greedy], answer: None, category: None }
            }
        };
        items.push(r);
    }
    Ok(summarise(task, items))
}

/// The task's metrics from its items' results.
pub fn summarise(task: &Task, items: Vec<ItemResult>) -> TaskResult {
    let mut metrics = Metrics::new();
    let mut categories = BTreeMap::new();
    match task.scoring {
        Scoring::MultipleChoice { acc_norm } => {
            let scores: Vec<(f64, f64)> = task
                .items
                .iter()
                .zip(&items)
                .map(|(item, r)| match item {
                    Item::Choice { lengths, answer, .. } => choice_scores(&r.lls, lengths, *answer),
                    _ => (0.0, 0.0),
                })
                .collect();
            metrics.insert("acc".into(), mean_with_stderr(&scores.iter().map(|s| s.0).collect::<Vec<_>>()));
            if acc_norm {
                metrics.insert("acc_norm".into(), mean_with_stderr(&scores.iter().map(|s| s.1).collect::<Vec<_>>()));
            }
            let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for (r, s) in items.iter().zip(&scores) {
                if let Some(c) = &r.category {
                    by.entry(c.clone()).or_default().push(s.0);
                }
            }
            categories = by.into_iter().map(|(c, xs)| (c, mean_with_stderr(&xs))).collect();
        }
        Scoring::Cloze => {
            let lls: Vec<f64> = items.iter().map(|r| r.lls[0]).collect();
            let acc: Vec<f64> = items.iter().map(|r| f64::from(r.greedy[0])).collect();
            metrics.insert("acc".into(), mean_with_stderr(&acc));
            metrics.insert("perplexity".into(), perplexity(&lls));
        }
        Scoring::Text => {
            let lls: Vec<f64> = items.iter().map(|r| r.lls[0]).collect();
            let bytes: Vec<usize> = task
                .items
                .iter()
                .map(|i| match i {
                    Item::Text { text } => text.len(),
                    _ => 0,
                })
                .collect();
            metrics.insert("bits_per_byte".into(), bits_per_byte(&lls, &bytes));
        }
    }
    TaskResult { task: task.name.clone(), n: items.len(), metrics, categories, items }
}

/// Results in one line: `sotu_continuation acc 0.412 ± 0.028, agreement_pairs acc 0.633 ± 0.028`.
pub fn summary(results: &[TaskResult]) -> String {
    results
        .iter()
        .map(|r| {
            let (name, v) = r
                .metrics
                .iter()
                .next()
                .map(|(k, v)| (k.as_str(), *v))
                .unwrap_or(("n", super::metrics::Value { value: r.n as f64, stderr: None }));
            match v.stderr {
                Some(se) => format!("{} {name} {:.3} ± {se:.3}", r.task, v.value),
                None => format!("{} {name} {:.4}", r.task, v.value),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
