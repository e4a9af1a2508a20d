//! What a task asks of a model, as lm-evaluation-harness asks it: each item is one or more
//! log-likelihood requests, a context and a continuation scored given it.

/// One log-likelihood request: `log p(continuation | context)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub context: String,
    pub continuation: String,
}

/// One item of a task.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// Multiple choice: one request per choice, the most likely one the model's answer.
    /// `lengths` holds what `acc_norm` divides by (the choices' text, as lm-eval's
    /// `doc_to_choice` gives it); Winogrande's partial scoring puts the options in the contexts
    /// and scores the shared rest of the sentence.
    Choice { requests: Vec<Request>, lengths: Vec<String>, answer: usize, category: Option<String> },
    /// A cloze (LAMBADA): the target's log-likelihood (for perplexity) and whether it is the
    /// greedy continuation (accuracy).
    Cloze { request: Request },
    /// A text scored whole, in rolling windows (bits per byte).
    Text { text: String },
}

/// What a task's items are scored as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scoring {
    /// `acc` (and `acc_norm` where lm-eval reports it).
    MultipleChoice { acc_norm: bool },
    /// `acc` and `perplexity` (LAMBADA).
    Cloze,
    /// `bits_per_byte`.
    Text,
}

/// A task: its name, how it is scored, its items.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub name: String,
    pub scoring: Scoring,
    pub items: Vec<Item>,
}

impl Item {
    /// The item's requests, in order.
    pub fn requests(&self) -> Vec<Request> {
        match self {
            Item::Choice { requests, .. } => requests.clone(),
            Item::Cloze { request } => vec![request.clone()],
            Item::Text { .. } => Vec::new(),
        }
    }
}

/// A multiple-choice item with lm-eval's usual layout: one context, the choices after a space
/// (`target_delimiter`), `acc_norm` dividing by the choices' own text.
pub fn choice(context: &str, choices: &[String], answer: usize, category: Option<String>) -> Item {
    choice_after(context, " ", choices, answer, category)
}

/// A multiple-choice item whose choices follow the context after `delimiter` (empty where a
/// choice completes the context's last word).
pub fn choice_after(
    context: &str,
    delimiter: &str,
    choices: &[String],
    answer: usize,
    category: Option<String>,
) -> Item {
    let requests = choices
        .iter()
        .map(|c| Request { context: context.to_string(), continuation: format!("{delimiter}{c}") })
        .collect();
    Item::Choice { requests, lengths: choices.to_vec(), answer, category }
}
