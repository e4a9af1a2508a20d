//! A task's metrics from its items' log-likelihoods, with lm-evaluation-harness's
//! definitions: `acc` (the most likely choice is the answer), `acc_norm` (likelihood divided by
//! the choice's length in characters, lm-eval's `len(choice)`), `perplexity` `exp(−mean ll)`
//! for a cloze, `bits_per_byte` `−Σ ll / (ln 2 · Σ bytes)` for text; every mean with its
//! standard error `sample std / √n` (lm-eval's `mean_stderr`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A metric's value over a task's items and its standard error.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Value {
    pub value: f64,
    /// `None` where it is not defined (one item; perplexity and bits per byte).
    pub stderr: Option<f64>,
}

/// The mean of `xs` and its standard error (`None` for fewer than two).
pub fn mean_with_stderr(xs: &[f64]) -> Value {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n.max(1.0);
    let stderr = (xs.len() > 1).then(|| {
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (var / n).sqrt()
    });
    Value { value: mean, stderr }
}

/// The index of the largest value (the first of equals, as `numpy.argmax`).
pub fn argmax(xs: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in xs.iter().enumerate() {
        if *x > xs[best] {
            best = i;
        }
    }
    best
}

/// A multiple-choice item's `acc` and `acc_norm` (1 or 0).
pub fn choice_scores(lls: &[f64], lengths: &[String], answer: usize) -> (f64, f64) {
    let norm: Vec<f64> = lls.iter().zip(lengths).map(|(l, c)| l / c.chars().count().max(1) as f64).collect();
    (f64::from(argmax(lls) == answer), f64::from(argmax(&norm) == answer))
}

/// Metrics by name (`acc`, `acc_norm`, `perplexity`, `bits_per_byte`).
pub type Metrics = BTreeMap<String, Value>;

/// `perplexity` of cloze log-likelihoods: `exp(−mean)`.
pub fn perplexity(lls: &[f64]) -> Value {
    Value { value: (-lls.iter().sum::<f64>() / lls.len().max(1) as f64).exp(), stderr: None }
}

/// `bits_per_byte` of texts: `−Σ ll / (ln 2 · Σ bytes)`.
pub fn bits_per_byte(lls: &[f64], bytes: &[usize]) -> Value {
    let total: usize = bytes.iter().sum();
    Value { value: -lls.iter().sum::<f64>() / (std::f64::consts::LN_2 * total.max(1) as f64), stderr: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: log-likelihoods (−2, −3) for choices "ab" and "abcdef": acc picks 0 (−2 > −3),
    /// acc_norm picks 1 (−3/6 = −0.5 > −2/2 = −1).
    #[test]
    fn acc_and_acc_norm_by_hand() {
        let lengths = vec!["ab".to_string(), "abcdef".to_string()];
        assert_eq!(choice_scores(&[-2.0, -3.0], &lengths, 0), (1.0, 0.0));
        assert_eq!(choice_scores(&[-2.0, -3.0], &lengths, 1), (0.0, 1.0));
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), 1, "the first of equals");
    }

    /// (1, 0, 1, 1): mean 0.75, sample std √(0.25) = 0.5, stderr 0.5/2 = 0.25.
    #[test]
    fn standard_error_is_lm_evals_mean_stderr() {
        let v = mean_with_stderr(&[1.0, 0.0, 1.0, 1.0]);
        assert!((v.value - 0.75).abs() < 1e-12 && (v.stderr.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(mean_with_stderr(&[1.0]).stderr, None);
    }

    /// ll −ln 2 · 8 over 8 bytes is 1 bit per byte; mean ll −ln 4 is perplexity 4.
    #[test]
    fn bits_per_byte_and_perplexity_by_hand() {
        let ln2 = std::f64::consts::LN_2;
        assert!((bits_per_byte(&[-ln2 * 3.0, -ln2 * 5.0], &[3, 5]).value - 1.0).abs() < 1e-12);
        assert!((perplexity(&[-(4f64.ln()), -(4f64.ln())]).value - 4.0).abs() < 1e-12);
    }
}
