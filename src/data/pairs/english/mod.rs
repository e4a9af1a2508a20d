//! The built-in English text-normalisation pairs (`data.corpus = "textnorm-en"`): a seeded
//! generator of written → spoken pairs over the categories of the held-out set
//! ([`super::wetext`], whose file names are the category names): cardinals (negative, large,
//! with thousands separators), ordinals, decimals (with scales), money (four currencies, with
//! scales and cents), measures (18 units), dates (nine written formats), times (12-hour, zones,
//! o'clock), fractions (mixed and vulgar), telephone numbers, e-mail addresses and domains,
//! Roman numerals, ranges, abbreviations (`whitelist`) and text left as it is (`word`). Half of the pairs are bare, half
//! embedded in a short carrier sentence that is copied unchanged.
//!
//! The spoken forms follow the held-out set's conventions ([`words`]); each category's generator
//! is in [`categories`]; every category is
//! checked by an independent reader (the `text2num` crate parsing the words back to digits, in
//! `tests.rs`).

pub mod categories;
pub mod words;

#[cfg(test)]
mod tests;

use super::Pair;
use crate::rng::SplitMix64;
use categories::*;

pub const NAME: &str = "textnorm-en";

type Generator = fn(&mut SplitMix64) -> (String, String);

/// Category name and relative weight.
pub const CATEGORIES: [(&str, Generator, u32); 14] = [
    ("cardinal", cardinal_pair, 4),
    ("ordinal", ordinal_pair, 2),
    ("decimal", decimal_pair, 2),
    ("money", money_pair, 3),
    ("measure", measure_pair, 3),
    ("date", date_pair, 4),
    ("time", time_pair, 3),
    ("fraction", fraction_pair, 2),
    ("telephone", telephone_pair, 2),
    ("electronic", electronic_pair, 1),
    ("roman", roman_pair, 1),
    ("range", range_pair, 1),
    ("whitelist", abbreviation_pair, 1),
    ("word", word_pair, 1),
];

/// Carrier sentences; `{}` is the expression.
const CARRIERS: [&str; 12] = [
    "It says {} here.",
    "We wrote {} on the form.",
    "The answer was {}.",
    "Please read {} aloud.",
    "The note said {} again.",
    "See {} below.",
    "They expected {} by then.",
    "{} is on the list.",
    "He mentioned {} twice.",
    "Her notes show {} clearly.",
    "Is it really {}?",
    "The sign read {}.",
];

/// One pair drawn from `rng`.
pub fn one(rng: &mut SplitMix64) -> Pair {
    let total: u32 = CATEGORIES.iter().map(|c| c.2).sum();
    let mut r = (rng.next_u64() % total as u64) as u32;
    let (name, generate, _) = *CATEGORIES
        .iter()
        .find(|c| {
            let hit = r < c.2;
            r = r.saturating_sub(c.2);
            hit
        })
        .expect("weights sum to total");
    let (written, spoken) = generate(rng);
    let (source, target) = if rng.uniform() < 0.5 {
        let c = *pick(rng, &CARRIERS);
        (c.replace("{}", &written), c.replace("{}", &spoken))
    } else {
        (written, spoken)
    };
    Pair { source, target, category: Some(name.to_string()) }
}

/// `n` pairs from the stream seeded by `seed`.
pub fn generate(seed: u64, n: usize) -> Vec<Pair> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| one(&mut rng)).collect()
}

/// The training pairs and the generated test split: `n_test` pairs from a second stream,
/// without any whose source occurs in training (so the test split is never trained on).
pub fn splits(seed: u64, n_train: usize, n_test: usize) -> (Vec<Pair>, Vec<Pair>) {
    let train = generate(seed, n_train);
    let mut seen: std::collections::HashSet<String> = train.iter().map(|p| p.source.clone()).collect();
    let mut rng = SplitMix64::new(seed ^ 0x7e57_5917_u64.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut test = Vec::with_capacity(n_test);
    let mut tries = 0;
    while test.len() < n_test && tries < 100 * n_test {
        let p = one(&mut rng);
        if seen.insert(p.source.clone()) {
            test.push(p);
        }
        tries += 1;
    }
    (train, test)
}
