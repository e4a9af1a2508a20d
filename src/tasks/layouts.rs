//! The tasks in the layouts they are published in on the Hugging Face hub, each record turned
//! into an [`Item`] with lm-evaluation-harness's zero-shot template for that task (its task
//! YAML and `utils.py`, version 0.4):
//!
//! | task | fields | context | choices | answer |
//! |---|---|---|---|---|
//! | `arc_easy`, `arc_challenge` | question, choices.{text,label}, answerKey | `Question: {question}\nAnswer:` | choices.text | label of answerKey |
//! | `hellaswag` | activity_label, ctx_a, ctx_b, endings, label | `preprocess(activity_label + ": " + ctx_a + " " + Capitalized(ctx_b))` | `preprocess(ending)` | label |
//! | `piqa` | goal, sol1, sol2, label | `Question: {goal}\nAnswer:` | sol1, sol2 | label |
//! | `social_iqa` | context, question, answerA/B/C, label ("1"–"3") | `Q: {context} {question}\nA:` | answerA–C | label − 1 |
//! | `winogrande` | sentence, option1, option2, answer ("1"/"2") | the sentence up to `_` with each option (partial scoring) | — | answer − 1 |
//! | `openbookqa` | question_stem, choices.{text,label}, answerKey | question_stem | choices.text | label of answerKey |
//! | `boolq` | passage, question, label | `{passage}\nQuestion: {question}?\nAnswer:` | no, yes | label |
//! | `lambada_openai` | text | all but the last word | — (cloze: ` {last word}`) | — |
//! | `mmlu` | question, subject, choices, answer | `The following are multiple choice questions (with answers) about {subject}.\n\n{question}\nA. …\nD. …\nAnswer:` | A, B, C, D | answer |
//! | `multiple_choice` (generic) | context, choices, answer, category? | context | choices | answer |
//! | `text` | text (or a whole plain-text file) | — (bits per byte) | — | — |
//!
//! Choices follow the context after a space (lm-eval's `target_delimiter`). `acc_norm` is
//! reported where lm-eval reports it (ARC, HellaSwag, PIQA, OpenBookQA, the generic form).

use super::item::{Item, Request, Scoring, choice};
use anyhow::{Context, bail, ensure};
use serde_json::Value;

/// A record's field, or an error naming it.
fn field<'a>(rec: &'a Value, path: &str) -> anyhow::Result<&'a Value> {
    let mut v = rec;
    for key in path.split('.') {
        v = v.get(key).with_context(|| format!("no field `{path}`"))?;
    }
    Ok(v)
}

fn text(rec: &Value, path: &str) -> anyhow::Result<String> {
    match field(rec, path)? {
        Value::String(s) => Ok(s.clone()),
        other => bail!("field `{path}` is {other}, not a string"),
    }
}

fn texts(rec: &Value, path: &str) -> anyhow::Result<Vec<String>> {
    let v = field(rec, path)?;
    let a = v.as_array().with_context(|| format!("field `{path}` is not a list"))?;
    a.iter().map(|x| x.as_str().map(String::from).with_context(|| format!("`{path}` holds {x}, not text"))).collect()
}

/// The answer field `path` of an item of `count` choices, given as a number or a numeral
/// (`"3"`) counting from `base`; refused when it is no index or names no choice.
fn answer(rec: &Value, path: &str, base: usize, count: usize) -> anyhow::Result<usize> {
    let v = field(rec, path)?;
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(u64::from(*b)),
        _ => None,
    };
    let i = n.and_then(|n| usize::try_from(n).ok()?.checked_sub(base));
    let i = i.with_context(|| format!("field `{path}` is {v}, not an index"))?;
    ensure!(
        i < count,
        "field `{path}` is {v}, which names no choice: there are {count} ({base} to {}); correct the answer or \
         remove the item",
        count - 1 + base
    );
    Ok(i)
}

/// An item its scoring can score: a multiple-choice item has two choices or more, none of them
/// empty (an empty choice's log-likelihood beats every real one); a text has something in it.
fn checked(item: Item) -> anyhow::Result<Item> {
    match &item {
        Item::Choice { requests, lengths, answer, .. } => {
            ensure!(
                requests.len() >= 2,
                "the item has {} choice(s); a multiple-choice item needs at least two",
                requests.len()
            );
            ensure!(*answer < requests.len(), "the answer names choice {answer} of {} (from 0)", requests.len());
            if let Some(i) = lengths.iter().position(|c| c.trim().is_empty()) {
                bail!("choice {i} is empty; an empty choice would always be the most likely");
            }
        }
        Item::Text { text } => ensure!(!text.trim().is_empty(), "the text is empty: there is nothing to score"),
        Item::Cloze { .. } => {}
    }
    Ok(item)
}

/// The position of `key` among the labels at `labels` (ARC's and OpenBookQA's answerKey).
fn label_index(rec: &Value, labels: &str, key: &str) -> anyhow::Result<usize> {
    let key = text(rec, key)?;
    let labels = texts(rec, labels)?;
    labels
        .iter()
        .position(|l| l == key.trim_start())
        .with_context(|| format!("answerKey `{key}` is not among {labels:?}"))
}

/// lm-eval's HellaSwag `preprocess`: strip, `" [title]"` → `". "`, drop `[…]`, `"  "` → `" "`.
pub fn hellaswag_preprocess(s: &str) -> String {
    let s = s.trim().replace(" [title]", ". ");
    let mut out = String::with_capacity(s.len());
    let mut depth = 0;
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // A non-greedy `\[.*?\]`: from `[` to the next `]`.
        if chars[i] == '[' && chars[i..].contains(&']') {
            depth += 1;
        }
        if depth == 0 {
            out.push(chars[i]);
        }
        if chars[i] == ']' && depth > 0 {
            depth = 0;
        }
        i += 1;
    }
    out.replacen("  ", " ", usize::MAX)
}

/// Python's `str.capitalize`: the first character upper case, the rest lower case.
fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c.flat_map(char::to_lowercase)).collect(),
        None => String::new(),
    }
}

/// Where a published layout's files come from on the Hugging Face hub: the dataset and its
/// configuration, as lm-evaluation-harness 0.4's task YAML names them.
pub fn hub(layout: &str) -> Option<(&'static str, Option<&'static str>)> {
    Some(match layout {
        "arc_easy" => ("allenai/ai2_arc", Some("ARC-Easy")),
        "arc_challenge" => ("allenai/ai2_arc", Some("ARC-Challenge")),
        "hellaswag" => ("Rowan/hellaswag", None),
        "piqa" => ("baber/piqa", None),
        "social_iqa" => ("lighteval/siqa", None),
        "winogrande" => ("allenai/winogrande", Some("winogrande_xl")),
        "openbookqa" => ("allenai/openbookqa", Some("main")),
        "boolq" => ("aps/super_glue", Some("boolq")),
        "lambada_openai" => ("EleutherAI/lambada_openai", Some("default")),
        "mmlu" => ("cais/mmlu", Some("all")),
        _ => return None,
    })
}

/// The scoring of a task layout, or `None` for a name normlab does not know.
pub fn scoring(layout: &str) -> Option<Scoring> {
    Some(match layout {
        "arc_easy" | "arc_challenge" | "hellaswag" | "piqa" | "openbookqa" | "multiple_choice" => {
            Scoring::MultipleChoice { acc_norm: true }
        }
        "social_iqa" | "winogrande" | "boolq" | "mmlu" => Scoring::MultipleChoice { acc_norm: false },
        "lambada_openai" => Scoring::Cloze,
        "text" => Scoring::Text,
        _ => return None,
    })
}

/// One record of layout `layout` as an item, refused when it cannot be scored right
/// ([`checked`]).
pub fn item(layout: &str, rec: &Value) -> anyhow::Result<Item> {
    checked(record_item(layout, rec)?)
}

fn record_item(layout: &str, rec: &Value) -> anyhow::Result<Item> {
    Ok(match layout {
        "arc_easy" | "arc_challenge" => {
            let ctx = format!("Question: {}\nAnswer:", text(rec, "question")?);
            choice(&ctx, &texts(rec, "choices.text")?, label_index(rec, "choices.label", "answerKey")?, None)
        }
        "openbookqa" => {
            let ctx = text(rec, "question_stem")?;
            choice(&ctx, &texts(rec, "choices.text")?, label_index(rec, "choices.label", "answerKey")?, None)
        }
        "hellaswag" => hellaswag(rec)?,
        "piqa" => {
            let ctx = format!("Question: {}\nAnswer:", text(rec, "goal")?);
            choice(&ctx, &[text(rec, "sol1")?, text(rec, "sol2")?], answer(rec, "label", 0, 2)?, None)
        }
        "social_iqa" => {
            let ctx = format!("Q: {} {}\nA:", text(rec, "context")?, text(rec, "question")?);
            let choices = [text(rec, "answerA")?, text(rec, "answerB")?, text(rec, "answerC")?];
            choice(&ctx, &choices, answer(rec, "label", 1, 3)?, None)
        }
        "winogrande" => winogrande(rec)?,
        "boolq" => {
            let ctx = format!("{}\nQuestion: {}?\nAnswer:", text(rec, "passage")?, text(rec, "question")?);
            choice(&ctx, &["no".into(), "yes".into()], answer(rec, "label", 0, 2)?, None)
        }
        "lambada_openai" => {
            let t = text(rec, "text")?;
            let (ctx, last) = t.rsplit_once(' ').context("the text has a single word")?;
            Item::Cloze { request: Request { context: ctx.into(), continuation: format!(" {last}") } }
        }
        "mmlu" => mmlu(rec)?,
        "multiple_choice" => {
            let category = field(rec, "category").ok().and_then(|c| c.as_str().map(String::from));
            let choices = texts(rec, "choices")?;
            choice(&text(rec, "context")?, &choices, answer(rec, "answer", 0, choices.len().max(1))?, category)
        }
        "text" => Item::Text { text: text(rec, "text")? },
        other => bail!("unknown task layout `{other}`"),
    })
}

fn hellaswag(rec: &Value) -> anyhow::Result<Item> {
    let ctx = format!("{} {}", text(rec, "ctx_a")?, capitalize(&text(rec, "ctx_b")?));
    let query = hellaswag_preprocess(&format!("{}: {ctx}", text(rec, "activity_label")?));
    let choices: Vec<String> = texts(rec, "endings")?.iter().map(|e| hellaswag_preprocess(e)).collect();
    Ok(choice(&query, &choices, answer(rec, "label", 0, choices.len().max(1))?, None))
}

/// Partial scoring: each option completes the sentence up to `_` as a context, and the rest of
/// the sentence (after a space) is scored given each.
fn winogrande(rec: &Value) -> anyhow::Result<Item> {
    let s = text(rec, "sentence")?;
    let at = s.find('_').context("the sentence has no `_`")?;
    let rest = format!(" {}", s[at + 1..].trim());
    let contexts: Vec<String> =
        [text(rec, "option1")?, text(rec, "option2")?].iter().map(|o| format!("{}{o}", &s[..at])).collect();
    let requests = contexts.iter().map(|c| Request { context: c.clone(), continuation: rest.clone() }).collect();
    Ok(Item::Choice { requests, lengths: contexts, answer: answer(rec, "answer", 1, 2)?, category: None })
}

fn mmlu(rec: &Value) -> anyhow::Result<Item> {
    let subject = text(rec, "subject")?;
    let c = texts(rec, "choices")?;
    anyhow::ensure!(c.len() == 4, "an MMLU question has 4 choices, this one {}", c.len());
    let ctx = format!(
        "The following are multiple choice questions (with answers) about {}.\n\n{}\nA. {}\nB. {}\nC. {}\nD. {}\nAnswer:",
        subject.replace('_', " "),
        text(rec, "question")?.trim(),
        c[0],
        c[1],
        c[2],
        c[3]
    );
    Ok(choice(&ctx, &["A", "B", "C", "D"].map(String::from), answer(rec, "answer", 0, 4)?, Some(subject)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// lm-eval's HellaSwag preprocessing, worked by hand on the dataset's WikiHow artefacts.
    #[test]
    fn hellaswag_text_is_preprocessed_as_lm_eval_does() {
        assert_eq!(hellaswag_preprocess("  Walk [title] the dog [header] slowly  "), "Walk. the dog slowly");
        assert_eq!(capitalize("tHE man"), "The man");
        let rec = json!({"activity_label": "Baking", "ctx_a": "He mixes flour.", "ctx_b": "then HE",
            "endings": ["bakes [step] it.", "sleeps."], "label": "0"});
        let Item::Choice { requests, lengths, answer, .. } = item("hellaswag", &rec).unwrap() else { panic!() };
        assert_eq!(requests[0].context, "Baking: He mixes flour. Then he");
        assert_eq!(requests[0].continuation, " bakes it.");
        assert_eq!((lengths[1].as_str(), answer), ("sleeps.", 0));
    }

    /// Winogrande: the option completes the context; the rest is scored after a space.
    #[test]
    fn winogrande_scores_the_rest_after_each_option() {
        let rec = json!({"sentence": "Sam gave Ann the book because _ was done.", "option1": "Sam", "option2": "Ann",
            "answer": "2"});
        let Item::Choice { requests, answer, .. } = item("winogrande", &rec).unwrap() else { panic!() };
        assert_eq!(requests[1].context, "Sam gave Ann the book because Ann");
        assert_eq!(requests[0].continuation, " was done.");
        assert_eq!(answer, 1);
    }

    /// A missing field or an answer key not among the labels is named.
    #[test]
    fn broken_records_name_their_field() {
        let e = item("arc_easy", &json!({"question": "q"})).unwrap_err().to_string();
        assert!(e.contains("choices.text"), "{e}");
        let rec = json!({"question": "q", "choices": {"text": ["a"], "label": ["A"]}, "answerKey": "B"});
        assert!(item("arc_easy", &rec).unwrap_err().to_string().contains("answerKey `B`"));
    }
}
