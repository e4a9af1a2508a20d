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
    /// A multiple-choice task's accuracy by chance (the mean over items of 1 / choices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chance: Option<f64>,
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
    let requests: Vec<Vec<_>> = task.items.iter().map(Item::requests).collect();
    let scored = score_requests(d, tok, prefix, &requests)?;
    let mut items = Vec::with_capacity(task.items.len());
    for (item, l) in task.items.iter().zip(scored) {
        let (lls, greedy) = l.iter().map(|x| (x.loglik, x.greedy)).unzip();
        let r = match item {
            Item::Text { text } => ItemResult {
                lls: vec![score_text(d, tok, prefix, text)?],
                greedy: vec![],
                answer: None,
                category: None,
            },
            Item::Choice { answer, category, .. } => {
                ItemResult { lls, greedy, answer: Some(*answer), category: category.clone() }
            }
            Item::Cloze { .. } => ItemResult { lls, greedy, answer: None, category: None },
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
    TaskResult { task: task.name.clone(), n: items.len(), metrics, chance: chance(task), categories, items }
}

/// A multiple-choice task's accuracy by chance.
fn chance(task: &Task) -> Option<f64> {
    let per_item: Vec<f64> = task
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Choice { requests, .. } => Some(1.0 / requests.len() as f64),
            _ => None,
        })
        .collect();
    (!per_item.is_empty()).then(|| per_item.iter().sum::<f64>() / per_item.len() as f64)
}

/// A task's headline number: `acc_norm` where the task has it (lm-eval's papers' choice for
/// HellaSwag, ARC, PIQA, OpenBookQA), else `acc`, else bits per byte. The value sweeps and
/// reports carry per run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskScore {
    pub task: String,
    pub metric: String,
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<f64>,
    /// The accuracy by chance, for an accuracy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chance: Option<f64>,
}

/// Every (task, metric) of `scores`, in order of first appearance: the columns of a table of
/// runs that may have been evaluated on different tasks.
pub fn score_keys<'a>(scores: impl IntoIterator<Item = &'a TaskScore>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for s in scores {
        if !out.iter().any(|(t, m)| t == &s.task && m == &s.metric) {
            out.push((s.task.clone(), s.metric.clone()));
        }
    }
    out
}

/// The score of `task`'s `metric` among `scores`.
pub fn find_score<'a>(scores: &'a [TaskScore], task: &str, metric: &str) -> Option<&'a TaskScore> {
    scores.iter().find(|s| s.task == task && s.metric == metric)
}

impl TaskScore {
    /// Is a higher value better (accuracies) or a lower one (bits per byte, perplexity)?
    pub fn higher_is_better(&self) -> bool {
        self.metric.starts_with("acc")
    }
}

impl TaskResult {
    /// The headline metric ([`TaskScore`]).
    pub fn headline(&self) -> Option<TaskScore> {
        let (metric, v) = ["acc_norm", "acc", "bits_per_byte", "perplexity"]
            .iter()
            .find_map(|k| self.metrics.get(*k).map(|v| (*k, v)))?;
        let chance = self.chance.filter(|_| metric.starts_with("acc"));
        Some(TaskScore { task: self.task.clone(), metric: metric.into(), value: v.value, stderr: v.stderr, chance })
    }
}

/// Headlines in one line: `sotu_words acc_norm 0.463 ± 0.029, agreement_pairs acc 0.550 ± 0.029`.
pub fn summary(results: &[TaskResult]) -> String {
    results
        .iter()
        .filter_map(TaskResult::headline)
        .map(|h| match h.stderr {
            Some(se) => format!("{} {} {:.3} ± {se:.3}", h.task, h.metric, h.value),
            None => format!("{} {} {:.4}", h.task, h.metric, h.value),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
