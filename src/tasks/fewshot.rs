//! Few-shot contexts as lm-evaluation-harness 0.4 builds them, so that a normlab number with
//! `num_fewshot = k` is lm-eval's number with `--num_fewshot k` on the same files.
//!
//! - **Which examples**: lm-eval's default sampler, `random.Random(seed).sample(pool, k)`, one
//!   generator carried through the items in order ([`super::pyrandom`]); MMLU's `first_n`
//!   sampler, the pool's first `k` questions of the item's subject (its dev split). The pool
//!   is the file named by `fewshot_path` (a train or dev split), else the task file itself,
//!   whole even under `limit` — as lm-eval falls back to the test split when a task has no
//!   other, and then, like it, an item may draw itself as an example.
//! - **The text**: each example's context and its answer (`context + " " + answer`; for
//!   Winogrande the sentence with the right option and its rest), joined by blank lines and
//!   followed by one, then the item's context; a task description (MMLU's first paragraph)
//!   once, at the start.

use super::item::{Item, Request};
use super::pyrandom::PyRandom;
use anyhow::{bail, ensure};

/// How the examples of an item are chosen.
pub enum Sampler {
    /// lm-eval's default: a seeded random sample of the pool (its 2.5 kB of state boxed).
    Random(Box<PyRandom>),
    /// MMLU's `first_n`: the pool's first examples of the item's category (subject).
    FirstOfCategory,
}

impl Sampler {
    /// The sampler lm-eval uses for `layout`.
    pub fn for_layout(layout: &str, seed: u64) -> Self {
        match layout {
            "mmlu" => Sampler::FirstOfCategory,
            _ => Sampler::Random(Box::new(PyRandom::new(seed))),
        }
    }

    fn pick(&mut self, item: &Item, pool: &[Item], k: usize) -> anyhow::Result<Vec<usize>> {
        match self {
            Sampler::Random(rng) => {
                ensure!(
                    pool.len() >= k,
                    "{k} examples need at least {k} items to draw from; the pool has {}",
                    pool.len()
                );
                Ok(rng.sample(pool.len(), k))
            }
            Sampler::FirstOfCategory => {
                let picked: Vec<usize> =
                    (0..pool.len()).filter(|&j| category(&pool[j]) == category(item)).take(k).collect();
                ensure!(
                    picked.len() == k,
                    "{k} examples of {:?} are asked, the examples' file has {}",
                    category(item).unwrap_or_default(),
                    picked.len()
                );
                Ok(picked)
            }
        }
    }
}

fn category(item: &Item) -> Option<&str> {
    match item {
        Item::Choice { category, .. } => category.as_deref(),
        _ => None,
    }
}

/// `items` with `k` solved examples from `pool` before each context; `described`: the
/// contexts open with a task description paragraph (MMLU), kept once at the start.
pub fn with_fewshot(
    items: Vec<Item>,
    pool: &[Item],
    k: usize,
    mut sampler: Sampler,
    described: bool,
) -> anyhow::Result<Vec<Item>> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let shots: Vec<String> = sampler
            .pick(&item, pool, k)?
            .iter()
            .map(|&j| solved(&pool[j], described))
            .collect::<anyhow::Result<_>>()?;
        let Item::Choice { requests, lengths, answer, category } = item else {
            bail!("few-shot needs multiple-choice items")
        };
        let requests = requests
            .into_iter()
            .map(|r| {
                let (head, body) = split_description(&r.context, described);
                Request { context: format!("{head}{}\n\n{body}", shots.join("\n\n")), continuation: r.continuation }
            })
            .collect();
        out.push(Item::Choice { requests, lengths, answer, category });
    }
    Ok(out)
}

/// An example as lm-eval writes it: its context (less any description) and its right answer.
fn solved(example: &Item, described: bool) -> anyhow::Result<String> {
    let Item::Choice { requests, answer, .. } = example else { bail!("few-shot examples must be multiple choice") };
    let r = &requests[*answer];
    Ok(format!("{}{}", split_description(&r.context, described).1, r.continuation))
}

/// (`description + "\n\n"`, the rest) of a described context; (``, the context) otherwise.
fn split_description(context: &str, described: bool) -> (String, String) {
    match (described, context.split_once("\n\n")) {
        (true, Some((d, rest))) => (format!("{d}\n\n"), rest.to_string()),
        _ => (String::new(), context.to_string()),
    }
}
