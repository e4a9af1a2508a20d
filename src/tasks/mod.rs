//! Downstream evaluation: what a trained model can do, scored as lm-evaluation-harness scores
//! it, in one implementation used by `normlab evaluate`, evaluation during training, sweeps,
//! studies and reports.
//!
//! - [`item`]: a task's items as log-likelihood requests
//! - [`encode`]: a request as tokens, exactly as lm-eval builds it (its truncation included)
//! - [`score`]: requests through the one scoring path (`decode::score`), rolling windows
//! - [`metrics`]: acc, acc_norm, perplexity, bits per byte, standard errors
//! - [`evaluate`]: a task on a model: per-item results and metrics
//! - [`layouts`]: the tasks' published layouts with lm-eval's templates
//! - [`builtin`]: the built-in suite from the built-in corpus and rules
//! - [`spec`]: which tasks to evaluate (`[eval]`, `--tasks`), loading, few-shot
//! - [`fewshot`]: few-shot contexts as lm-evaluation-harness 0.4 draws them
//! - [`pyrandom`]: CPython's `random.Random`, which lm-eval's few-shot sampling draws with
//! - [`papers`]: the papers' downstream task sets as named suites

pub mod builtin;
pub mod encode;
pub mod evaluate;
pub mod fewshot;
pub mod item;
pub mod layouts;
pub mod metrics;
pub mod papers;
pub mod pyrandom;
pub mod score;
pub mod spec;

pub use evaluate::{TaskResult, TaskScore, evaluate};
pub use item::{Item, Request, Scoring, Task};
pub use spec::TaskSpec;

#[cfg(test)]
mod tests;
