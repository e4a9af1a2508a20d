//! The windows evaluation reads, all chosen here: a fixed, evenly spaced set for validation (the
//! same in every run and every evaluation of it), non-overlapping tiles of a whole file for
//! `normlab perplexity --data`, and the batch of inputs and targets of given starts.

use super::batch::Batch;
use super::shards::TokenFile;

/// `count` validation windows with evenly spaced starts over the whole split (fewer if the
/// split is short; at least one).
pub fn validation_starts(len: usize, seq_len: usize, count: usize) -> Vec<usize> {
    let last = len - seq_len - 1;
    let count = count.min(last / seq_len.max(1) + 1).max(1);
    if count == 1 {
        return vec![0];
    }
    (0..count).map(|i| i * last / (count - 1)).collect()
}

/// The windows starting at `starts`, split into inputs and targets.
pub fn windows(tokens: &TokenFile, starts: &[usize], seq_len: usize) -> Batch {
    let mut inputs = Vec::with_capacity(starts.len() * seq_len);
    let mut targets = Vec::with_capacity(starts.len() * seq_len);
    for &s in starts {
        tokens.extend_window(s, seq_len, &mut inputs);
        tokens.extend_window(s + 1, seq_len, &mut targets);
    }
    Batch { inputs, targets, batch: starts.len(), seq_len }
}

/// Non-overlapping windows covering a whole token file (for `normlab perplexity --data`), at most
/// `limit` of them.
pub fn tiling_starts(len: usize, seq_len: usize, limit: Option<usize>) -> Vec<usize> {
    let n = (len.saturating_sub(1)) / seq_len;
    let all: Vec<usize> = (0..n).map(|i| i * seq_len).collect();
    match limit {
        Some(l) if l < all.len() => (0..l).map(|i| all[i * all.len() / l]).collect(),
        _ => all,
    }
}
