//! Log-probabilities of a position's next token from its logits, as the OpenAI completions
//! API reports them (`token_logprobs`, `top_logprobs`) and as log-likelihood scoring sums them.

/// `log softmax(logits)`, accumulated in f64 (the max subtracted first).
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let log_z = max + sum.ln();
    logits.iter().map(|&l| l as f64 - log_z).collect()
}

/// The `k` most likely tokens and their log-probabilities, most likely first (ties by id).
pub fn top(logp: &[f64], k: usize) -> Vec<(u32, f64)> {
    let mut idx: Vec<usize> = (0..logp.len()).collect();
    idx.sort_by(|&a, &b| logp[b].total_cmp(&logp[a]).then(a.cmp(&b)));
    idx.into_iter().take(k).map(|i| (i as u32, logp[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logits (ln 0.5, ln 0.25, ln 0.25) + any constant give log-probabilities ln ½, ln ¼, ln ¼.
    #[test]
    fn log_softmax_by_hand() {
        let logits: Vec<f32> = [0.5f32, 0.25, 0.25].iter().map(|p| p.ln() + 40.0).collect();
        let lp = log_softmax(&logits);
        for (got, want) in lp.iter().zip([0.5f64.ln(), 0.25f64.ln(), 0.25f64.ln()]) {
            assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        }
        assert_eq!(top(&lp, 2), vec![(0, lp[0]), (1, lp[1])], "ties broken by the lower id");
    }
}
