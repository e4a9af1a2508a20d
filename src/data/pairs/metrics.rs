//! Exact match and token-level F1 of predictions against references (SQuAD's definitions),
//! both after a light normalisation: lower case, and runs of whitespace (including around the
//! ends) collapsed to single spaces. Tokens are whitespace-separated words; F1 treats each side
//! as a bag of tokens (counts matter, order does not).

use std::collections::HashMap;

/// `s` in lower case with whitespace collapsed and trimmed.
pub fn normalize(s: &str) -> String {
    s.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// 1 when the normalised strings are equal, else 0.
pub fn exact_match(prediction: &str, reference: &str) -> f64 {
    if normalize(prediction) == normalize(reference) { 1.0 } else { 0.0 }
}

/// `2PR / (P + R)` over the bags of normalised tokens: `P` = shared / predicted tokens, `R` =
/// shared / reference tokens. Two empty sides score 1, one empty side 0.
pub fn token_f1(prediction: &str, reference: &str) -> f64 {
    let (p, r) = (normalize(prediction), normalize(reference));
    let (p, r): (Vec<&str>, Vec<&str>) = (p.split_whitespace().collect(), r.split_whitespace().collect());
    if p.is_empty() || r.is_empty() {
        return if p.is_empty() && r.is_empty() { 1.0 } else { 0.0 };
    }
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in &r {
        *counts.entry(t).or_default() += 1;
    }
    let mut shared = 0;
    for t in &p {
        if let Some(c) = counts.get_mut(t).filter(|c| **c > 0) {
            *c -= 1;
            shared += 1;
        }
    }
    if shared == 0 {
        return 0.0;
    }
    let (precision, recall) = (shared as f64 / p.len() as f64, shared as f64 / r.len() as f64);
    2.0 * precision * recall / (precision + recall)
}

/// Mean exact match and token F1 over `(prediction, reference)` pairs, and their count.
pub fn score<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (f64, f64, usize) {
    let mut em = 0.0;
    let mut f1 = 0.0;
    let mut n = 0;
    for (p, r) in pairs {
        em += exact_match(p, r);
        f1 += token_f1(p, r);
        n += 1;
    }
    let n_f = n.max(1) as f64;
    (em / n_f, f1 / n_f, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_hand() {
        assert_eq!(normalize("  Twenty   Five\tDollars "), "twenty five dollars");
        assert_eq!(exact_match("Twenty five dollars", " twenty  five dollars"), 1.0);
        assert_eq!(exact_match("twenty five", "twenty-five"), 0.0);
        // Prediction "one two two three" against "one two three four": shared one, two, three
        // (the second "two" finds no partner): P = 3/4, R = 3/4, F1 = 0.75.
        assert_eq!(token_f1("one two two three", "one two three four"), 0.75);
        // "five euros" vs "five euro cents": shared 1; P = 1/2, R = 1/3, F1 = 2·(1/6)/(5/6) = 0.4.
        assert!((token_f1("five euros", "five euro cents") - 0.4).abs() < 1e-12);
        assert_eq!(token_f1("", ""), 1.0);
        assert_eq!(token_f1("x", ""), 0.0);
        assert_eq!(token_f1("a b", "c d"), 0.0);
        let (em, f1, n) = score([("a b", "a b"), ("a", "a b")]);
        // F1 of "a" vs "a b": P = 1, R = 1/2, F1 = 2/3; mean (1 + 2/3) / 2 = 5/6.
        assert_eq!((em, n), (0.5, 2));
        assert!((f1 - 5.0 / 6.0).abs() < 1e-12);
    }
}
