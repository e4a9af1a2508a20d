//! How the next token is drawn from a position's logits: greedy (the arg-max), or from
//! `softmax(logits / temperature)` restricted to the `top_k` most likely tokens and then to the
//! nucleus whose probabilities first reach `top_p`.

use crate::rng::SplitMix64;

/// How the next token is drawn from a position's logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// 0 = greedy (the arg-max).
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (None = all).
    pub top_k: Option<usize>,
    /// Nucleus: keep the most likely tokens whose probabilities first sum to at least `top_p`
    /// (1 = all).
    pub top_p: f64,
}

impl Sampling {
    /// The arg-max at every step.
    pub const GREEDY: Sampling = Sampling { temperature: 0.0, top_k: None, top_p: 1.0 };
}

/// The index of the largest logit (the last of equals).
pub fn argmax(logits: &[f32]) -> usize {
    logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0)
}

/// Draws an index under `s`: top-k, then the nucleus of the renormalised distribution.
pub fn sample(logits: &[f32], s: &Sampling, rng: &mut SplitMix64) -> usize {
    if s.temperature == 0.0 {
        return argmax(logits);
    }
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    idx.truncate(s.top_k.unwrap_or(logits.len()).min(logits.len()));
    let max = logits[idx[0]] as f64;
    let mut weights: Vec<f64> = idx.iter().map(|&i| ((logits[i] as f64 - max) / s.temperature).exp()).collect();
    if s.top_p < 1.0 {
        weights.truncate(nucleus(&weights, s.top_p));
    }
    let mut u = rng.uniform() * weights.iter().sum::<f64>();
    for (k, w) in weights.iter().enumerate() {
        u -= w;
        if u <= 0.0 {
            return idx[k];
        }
    }
    idx[weights.len() - 1]
}

/// How many of `weights` (sorted, largest first) the nucleus keeps: the fewest whose share of
/// the total first reaches `top_p`.
fn nucleus(weights: &[f64], top_p: f64) -> usize {
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    for (k, w) in weights.iter().enumerate() {
        acc += w / total;
        if acc >= top_p {
            return k + 1;
        }
    }
    weights.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nucleus sampling keeps the fewest most likely tokens whose probabilities reach top_p:
    /// with p = (0.5, 0.3, 0.2), top_p 0.5 always draws token 0, top_p 0.8 never token 2, and
    /// 1 draws token 2 about a fifth of the time.
    #[test]
    fn top_p_keeps_the_smallest_nucleus() {
        let logits: Vec<f32> = [0.5f32, 0.3, 0.2].iter().map(|p| p.ln()).collect();
        let mut rng = SplitMix64::new(1);
        let draw = |top_p: f64, rng: &mut SplitMix64| -> Vec<usize> {
            (0..4000).map(|_| sample(&logits, &Sampling { temperature: 1.0, top_k: None, top_p }, rng)).collect()
        };
        assert!(draw(0.5, &mut rng).iter().all(|&t| t == 0));
        assert!(draw(0.8, &mut rng).iter().all(|&t| t < 2));
        let share = draw(1.0, &mut rng).iter().filter(|&&t| t == 2).count() as f64 / 4000.0;
        assert!((share - 0.2).abs() < 0.03, "{share}");
    }

    /// Top-k keeps the k largest logits: with k = 1 every draw is the arg-max.
    #[test]
    fn top_k_one_is_greedy() {
        let logits = [0.1f32, 2.0, -1.0, 1.9];
        let mut rng = SplitMix64::new(7);
        let s = Sampling { temperature: 1.5, top_k: Some(1), top_p: 1.0 };
        assert!((0..200).all(|_| sample(&logits, &s, &mut rng) == 1));
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), 2, "the last of equals");
    }
}
