//! The built-in suite: downstream tasks a CPU miniature can move off chance, made from the
//! built-in corpus's held-out addresses (the years ending in 0, never trained on) and from
//! rules, each fixed by a seed:
//!
//! - `sotu_continuation` (HellaSwag's form): a held-out passage (at most 40 characters, whole
//!   words) and its next two or three words, against the words after three passages of other
//!   held-out addresses; acc and acc_norm, chance 25 %. An item fits a 64-byte window.
//! - `sotu_words` (HellaSwag's form at the level of spelling): a held-out passage cut after
//!   the first one or two letters of a word of five letters or more, its true remaining
//!   letters against the remaining letters of three words of other held-out addresses; acc and
//!   acc_norm, chance 25 %. A model that has learnt words, not only letter frequencies, moves
//!   it off chance long before it can use a passage's meaning.
//! - `agreement_pairs` (BLiMP's form): a grammatical sentence against the same sentence with
//!   one agreement broken (subject–verb, subject–verb across a prepositional phrase,
//!   determiner–noun), each scored whole; acc, chance 50 %, per phenomenon.

use super::item::{Item, Scoring, Task, choice, choice_after};
use crate::rng::SplitMix64;
use std::path::Path;

/// The suite's tasks, in order.
pub const SUITE: [&str; 3] = ["sotu_words", "sotu_continuation", "agreement_pairs"];

/// Built-in task `name` with `n` items drawn with `seed`, each fitting a model of `context`
/// tokens whole (a candidate that does not is drawn again; at 64 and more every candidate fits).
pub fn task(name: &str, n: usize, seed: u64, cache: &Path, context: usize) -> anyhow::Result<Task> {
    let draw = Draw { name, n, max_bytes: context + 1, rng: SplitMix64::new(seed) };
    match name {
        "sotu_words" => words(draw, cache),
        "sotu_continuation" => continuation(draw, cache),
        "agreement_pairs" => agreement(draw),
        other => anyhow::bail!("no built-in task `{other}`; the built-in ones are {}", SUITE.join(", ")),
    }
}

/// How a task's items are drawn: how many, within how many bytes, from which generator.
struct Draw<'a> {
    name: &'a str,
    n: usize,
    /// A request's context and continuation together at most (a byte is at most a token).
    max_bytes: usize,
    rng: SplitMix64,
}

impl Draw<'_> {
    /// A uniform index below `n`.
    fn below(rng: &mut SplitMix64, n: usize) -> usize {
        (rng.uniform() * n as f64) as usize % n.max(1)
    }

    /// `n` items from `make` (called with the generator and the index of the item it makes;
    /// `None`: no item from this draw), keeping those that fit.
    fn items(mut self, mut make: impl FnMut(&mut SplitMix64, usize) -> Option<Item>) -> anyhow::Result<Vec<Item>> {
        let mut items = Vec::with_capacity(self.n);
        let mut tries = 0usize;
        while items.len() < self.n {
            tries += 1;
            anyhow::ensure!(
                tries <= 1000 * (self.n + 1),
                "the built-in task `{}` finds too few items that fit a context of {} tokens; give the run a \
                 train.seq_len of 64 or more, or leave the task out of [eval]",
                self.name,
                self.max_bytes - 1
            );
            if let Some(item) = make(&mut self.rng, items.len()).filter(|i| fits(i, self.max_bytes)) {
                items.push(item);
            }
        }
        Ok(items)
    }
}

/// Does every request of `item` fit `max_bytes` (an empty context is one token)?
fn fits(item: &Item, max_bytes: usize) -> bool {
    item.requests().iter().all(|r| r.context.len().max(1) + r.continuation.len() <= max_bytes)
}

/// The words of each held-out address.
fn held_out_words(cache: &Path) -> anyhow::Result<Vec<Vec<String>>> {
    let docs = crate::data::sotu::split(crate::data::sotu::load(cache)?).val;
    Ok(docs.iter().map(|d| d.text.split_whitespace().map(String::from).collect()).collect())
}

/// Longest context, in characters: with a 20-character end the item fits a 64-byte window.
const CONTEXT_CHARS: usize = 40;
const END_CHARS: usize = 20;
/// The passage before a cut word: spelling needs the word's first letters and a few words.
const WORD_CONTEXT_CHARS: usize = 24;

/// A passage ending before word `at` of `words` (its last words, at most [`CONTEXT_CHARS`])
/// and the 2 or 3 words from `at` (at most [`END_CHARS`]); `None` where they do not fit.
fn passage(words: &[String], at: usize, n_end: usize) -> Option<(String, String)> {
    passage_within(words, at, n_end, CONTEXT_CHARS)
}

/// [`passage`] with at most `chars` characters before the cut.
fn passage_within(words: &[String], at: usize, n_end: usize, chars: usize) -> Option<(String, String)> {
    let end = words.get(at..at + n_end)?.join(" ");
    let mut ctx = String::new();
    for w in words[..at].iter().rev() {
        let longer = if ctx.is_empty() { w.clone() } else { format!("{w} {ctx}") };
        if longer.len() > chars {
            break;
        }
        ctx = longer;
    }
    (ctx.split(' ').count() >= 4 && end.len() <= END_CHARS).then_some((ctx, end))
}

fn continuation(draw: Draw, cache: &Path) -> anyhow::Result<Task> {
    let docs = held_out_words(cache)?;
    anyhow::ensure!(docs.len() >= 2, "the held-out addresses are too few");
    let below = Draw::below;
    let items = draw.items(|rng, _| {
        let d = below(rng, docs.len());
        let n_end = 2 + below(rng, 2);
        let (ctx, end) = passage(&docs[d], 8 + below(rng, docs[d].len().saturating_sub(12)), n_end)?;
        let mut ends = vec![end];
        while ends.len() < 4 {
            let o = below(rng, docs.len());
            let other = passage(&docs[o], 8 + below(rng, docs[o].len().saturating_sub(12)), n_end);
            if let Some((_, e)) = other.filter(|(_, e)| o != d && !ends.contains(e)) {
                ends.push(e);
            }
        }
        let answer = below(rng, 4);
        ends.swap(0, answer);
        Some(choice(&ctx, &ends, answer, None))
    })?;
    Ok(Task { name: "sotu_continuation".into(), scoring: Scoring::MultipleChoice { acc_norm: true }, items })
}

/// Is `w` a word of at least five letters (no digits or punctuation)?
fn long_word(w: &str) -> bool {
    w.len() >= 5 && w.bytes().all(|b| b.is_ascii_alphabetic())
}

/// The passage before word `at` of `words` and that word's first `k` letters, and its other
/// letters; `None` where the word is not a [`long_word`] or the passage is too short.
fn word_cut(words: &[String], at: usize, k: usize) -> Option<(String, String)> {
    let w = words.get(at).filter(|w| long_word(w))?;
    let (ctx, _) = passage_within(words, at, 1, WORD_CONTEXT_CHARS)?;
    Some((format!("{ctx} {}", &w[..k]), w[k..].to_string()))
}

/// The letters after the first `k` of a long word drawn from `words`, if the draw is one.
fn word_rest(words: &[String], at: usize, k: usize) -> Option<String> {
    words.get(at).filter(|w| long_word(w)).map(|w| w[k..].to_string())
}

fn words(draw: Draw, cache: &Path) -> anyhow::Result<Task> {
    let docs = held_out_words(cache)?;
    anyhow::ensure!(docs.len() >= 2, "the held-out addresses are too few");
    let below = Draw::below;
    let items = draw.items(|rng, _| {
        let (d, k) = (below(rng, docs.len()), 1 + below(rng, 2));
        let (ctx, rest) = word_cut(&docs[d], 8 + below(rng, docs[d].len().saturating_sub(12)), k)?;
        let mut rests = vec![rest];
        while rests.len() < 4 {
            let o = below(rng, docs.len());
            let other = word_rest(&docs[o], below(rng, docs[o].len()), k);
            if let Some(r) = other.filter(|r| o != d && !rests.contains(r)) {
                rests.push(r);
            }
        }
        let answer = below(rng, 4);
        rests.swap(0, answer);
        Some(choice_after(&ctx, "", &rests, answer, None))
    })?;
    Ok(Task { name: "sotu_words".into(), scoring: Scoring::MultipleChoice { acc_norm: true }, items })
}

/// Singular and plural nouns of the addresses' register.
const SINGULAR: [&str; 16] = [
    "nation",
    "government",
    "treasury",
    "economy",
    "army",
    "department",
    "program",
    "law",
    "budget",
    "commission",
    "senator",
    "citizen",
    "farmer",
    "worker",
    "court",
    "treaty",
];
const PLURAL: [&str; 16] = [
    "nations",
    "governments",
    "taxes",
    "laws",
    "programs",
    "states",
    "courts",
    "citizens",
    "farmers",
    "workers",
    "senators",
    "officers",
    "treaties",
    "revenues",
    "families",
    "schools",
];
/// A verb's singular and plural forms and what follows it.
const VERBS: [(&str, &str, &str); 7] = [
    ("has", "have", "grown in the past year"),
    ("is", "are", "strong"),
    ("was", "were", "approved by the Congress"),
    ("requires", "require", "our attention"),
    ("deserves", "deserve", "our support"),
    ("needs", "need", "more funds"),
    ("remains", "remain", "our first concern"),
];

/// A grammatical sentence and its one-agreement-broken twin, of phenomenon `kind`.
fn pair(kind: usize, rng: &mut SplitMix64) -> (String, String, &'static str) {
    let draw = |rng: &mut SplitMix64, n: usize| (rng.uniform() * n as f64) as usize % n;
    let plural = rng.uniform() < 0.5;
    let (sg, pl) = (SINGULAR[draw(rng, SINGULAR.len())], PLURAL[draw(rng, PLURAL.len())]);
    let (v_sg, v_pl, rest) = VERBS[draw(rng, VERBS.len())];
    let (noun, other, good_v, bad_v) = if plural { (pl, sg, v_pl, v_sg) } else { (sg, pl, v_sg, v_pl) };
    match kind {
        0 => (format!("The {noun} {good_v} {rest}."), format!("The {noun} {bad_v} {rest}."), "subject_verb"),
        1 => (
            format!("The {noun} of the {other} {good_v} {rest}."),
            format!("The {noun} of the {other} {bad_v} {rest}."),
            "subject_verb_attractor",
        ),
        _ => {
            let (good_d, bad_d) = if plural { ("These", "This") } else { ("This", "These") };
            (format!("{good_d} {noun} {good_v} {rest}."), format!("{bad_d} {noun} {good_v} {rest}."), "determiner_noun")
        }
    }
}

fn agreement(draw: Draw) -> anyhow::Result<Task> {
    let items = draw.items(|rng, i| {
        let (good, bad, kind) = pair(i % 3, rng);
        // Scored whole, as BLiMP in lm-eval (an empty context: the run's boundary token).
        Some(choice("", &[good, bad], 0, Some(kind.into())))
    })?;
    Ok(Task { name: "agreement_pairs".into(), scoring: Scoring::MultipleChoice { acc_norm: false }, items })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::item::Item;

    fn pairs(n: usize, seed: u64, context: usize) -> anyhow::Result<Task> {
        agreement(Draw { name: "agreement_pairs", n, max_bytes: context + 1, rng: SplitMix64::new(seed) })
    }

    /// Each pair differs in exactly one word, the agreeing form in the grammatical sentence.
    #[test]
    fn minimal_pairs_differ_in_one_word() {
        let t = pairs(60, 3, 64).unwrap();
        assert_eq!(t.items.len(), 60);
        for item in &t.items {
            let Item::Choice { requests, answer, category, .. } = item else { panic!() };
            assert_eq!(*answer, 0);
            let (a, b) = (&requests[0].continuation, &requests[1].continuation);
            let diff = a.split(' ').zip(b.split(' ')).filter(|(x, y)| x != y).count();
            assert_eq!(diff, 1, "{a} / {b}");
            assert!(category.is_some());
        }
        assert_eq!(pairs(60, 3, 64).unwrap(), t, "seeded");
        let Item::Choice { requests, .. } = &pairs(3, 9, 64).unwrap().items[2] else { panic!() };
        let good = &requests[0].continuation;
        assert!(good.starts_with(" These") || good.starts_with(" This"), "{good}");
    }

    /// Items fit the context they are made for: at 32 tokens every request of 60 pairs is at
    /// most 33 bytes (the boundary token and 32 of the sentence); at 8 none fits and the task
    /// says so, naming the fix.
    #[test]
    fn items_fit_the_context() {
        let t = pairs(60, 3, 32).unwrap();
        assert!(t.items.iter().flat_map(Item::requests).all(|r| r.continuation.len() < 33));
        let e = pairs(5, 3, 8).unwrap_err().to_string();
        assert!(e.contains("fit a context of 8 tokens") && e.contains("train.seq_len of 64"), "{e}");
    }

    /// A passage is the words before the cut (at most 40 characters, whole words) and the
    /// next words; it rejoins the text.
    #[test]
    fn a_passage_is_the_words_before_a_cut_and_the_next_ones() {
        let words: Vec<String> =
            "We have built a new economy for the people of this land".split(' ').map(String::from).collect();
        let (ctx, end) = passage(&words, 8, 3).unwrap();
        assert_eq!((ctx.as_str(), end.as_str()), ("We have built a new economy for the", "people of this"));
        assert!(passage(&words, 11, 3).is_none(), "past the end");
    }
}
