//! One supervised example as tokens: the tokens a row holds and the ranges of them that are
//! learned (a pair's target, a conversation's assistant turns), and micro-batches of them,
//! one example per row, with every other position masked out of the loss.

use super::batch::Batch;
use std::ops::Range;

/// A tokenized example.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    pub tokens: Vec<u32>,
    /// Index ranges of `tokens` that are learned (predicted and counted by the loss), in order
    /// and disjoint; the tokens before the first range are the prompt. Never empty.
    pub learned: Vec<Range<usize>>,
}

impl Example {
    /// The tokens before the first learned one: what a model decodes the answer from.
    pub fn prompt(&self) -> &[u32] {
        &self.tokens[..self.learned.first().map_or(self.tokens.len(), |r| r.start)]
    }

    pub fn is_learned(&self, i: usize) -> bool {
        self.learned.iter().any(|r| r.contains(&i))
    }

    /// The learned tokens, in order.
    pub fn learned_tokens(&self) -> impl Iterator<Item = u32> + '_ {
        self.learned.iter().flat_map(|r| self.tokens[r.clone()].iter().copied())
    }
}

/// A micro-batch of examples, one per row, right-padded to the longest with `pad`: inputs are
/// `tokens[..n-1]`, targets `tokens[1..]` with every position whose target is not learned, and
/// every padding position, set to −1 (ignored by the loss). Causal attention keeps the padding
/// after a row's end from reaching any of its real positions.
pub fn batch(examples: &[&Example], pad: u32) -> Batch {
    let seq_len = examples.iter().map(|e| e.tokens.len() - 1).max().unwrap_or(1);
    let mut inputs = Vec::with_capacity(examples.len() * seq_len);
    let mut targets = Vec::with_capacity(examples.len() * seq_len);
    for e in examples {
        let n = e.tokens.len() - 1;
        for j in 0..seq_len {
            inputs.push(if j < n { e.tokens[j] } else { pad } as i64);
            let counted = j < n && e.is_learned(j + 1);
            targets.push(if counted { e.tokens[j + 1] as i64 } else { -1 });
        }
    }
    Batch { inputs, targets, batch: examples.len(), seq_len }
}

/// What fitting an example into the context did.
#[derive(Debug, PartialEq, Eq)]
pub enum Fitted {
    Whole(Example),
    /// Cut after a learned range, and how many learned ranges the cut dropped.
    Truncated(Example, usize),
    /// Not even the first learned range fits.
    LeftOut,
}

/// Fits `e` into `max_tokens`: an example that is longer keeps its tokens up to the end of the
/// last learned range that ends inside (a conversation: its turns up to the last assistant
/// turn that fits; a pair, whose target is one range, is whole or left out). A learned range
/// is never cut in the middle.
pub fn fit(e: Example, max_tokens: usize) -> Fitted {
    if e.tokens.len() <= max_tokens {
        return Fitted::Whole(e);
    }
    let Some(keep) = e.learned.iter().rposition(|r| r.end <= max_tokens) else { return Fitted::LeftOut };
    let dropped = e.learned.len() - (keep + 1);
    let end = e.learned[keep].end;
    let learned = e.learned[..=keep].to_vec();
    Fitted::Truncated(Example { tokens: e.tokens[..end].to_vec(), learned }, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_learned_ranges_are_targets_across_several_turns() {
        // tokens 10..=17; learned 2..4 and 6..8 (two answers); the row predicts tokens[j+1].
        let e = Example { tokens: (10..18).collect(), learned: vec![2..4, 6..8] };
        assert_eq!(e.prompt(), &[10, 11]);
        assert_eq!(e.learned_tokens().collect::<Vec<_>>(), vec![12, 13, 16, 17]);
        let b = batch(&[&e], 0);
        assert_eq!((b.batch, b.seq_len), (1, 7));
        assert_eq!(b.targets, vec![-1, 12, 13, -1, -1, 16, 17]);
        assert_eq!(b.inputs, (10..17).map(i64::from).collect::<Vec<_>>());
    }

    #[test]
    fn a_long_example_is_cut_after_a_whole_learned_range() {
        let e = Example { tokens: (0..20).collect(), learned: vec![3..6, 10..14, 17..20] };
        assert_eq!(fit(e.clone(), 20), Fitted::Whole(e.clone()));
        let Fitted::Truncated(t, dropped) = fit(e.clone(), 16) else { panic!("cut") };
        assert_eq!((t.tokens.len(), t.learned.clone(), dropped), (14, vec![3..6, 10..14], 1));
        assert_eq!(fit(e, 5), Fitted::LeftOut);
    }
}
