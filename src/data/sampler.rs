//! Training batches: random contiguous windows of `seq_len + 1` tokens, drawn from a seeded
//! generator whose whole state is one `u64` (saved in checkpoints). The windows evaluation
//! reads are chosen in [`super::windows`].

pub use super::batch::Batch;
use super::mixture::Mixture;
use super::pairs::render::{self, Example};
use super::shards::TokenFile;
use super::windows::windows;
use crate::rng::SplitMix64;

/// The training-window generator.
pub struct Sampler {
    rng: SplitMix64,
}

impl Sampler {
    pub fn new(seed: u64) -> Self {
        Self { rng: SplitMix64::new(seed) }
    }

    /// Resumes from a saved [`Sampler::state`].
    pub fn from_state(state: u64) -> Self {
        Self { rng: SplitMix64::new(state) }
    }

    pub fn state(&self) -> u64 {
        self.rng.state()
    }

    /// `batch` windows with uniformly random starts in `0 ..= len − seq_len − 1`.
    /// One optimizer step of pairs: `batch` examples drawn uniformly (with replacement), sorted
    /// by length and cut into micro-batches of `micro` (so each micro-batch pads to a similar
    /// length: the step's examples are the same as without sorting, only their grouping into
    /// forward passes changes), one example per row, right-padded with `pad` and prompt-masked
    /// ([`render::batch`]).
    pub fn next_pairs(&mut self, examples: &[Example], batch: usize, micro: usize, pad: u32) -> Vec<Batch> {
        let mut picked: Vec<&Example> =
            (0..batch).map(|_| &examples[(self.rng.next_u64() % examples.len() as u64) as usize]).collect();
        picked.sort_by_key(|e| e.tokens.len());
        picked.chunks(micro.max(1)).map(|c| render::batch(c, pad)).collect()
    }

    /// A mixture's windows: each row picks a source by weight, then a uniformly random start
    /// inside that source's range (a window never crosses sources).
    pub fn next_mixed(&mut self, tokens: &TokenFile, m: &Mixture, batch: usize, seq_len: usize) -> Batch {
        let starts: Vec<usize> = (0..batch)
            .map(|_| {
                let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let part = m.pick(u);
                let range = (part.train.len() - seq_len) as u64;
                part.train.start + (self.rng.next_u64() % range) as usize
            })
            .collect();
        windows(tokens, &starts, seq_len)
    }

    pub fn next_batch(&mut self, tokens: &TokenFile, batch: usize, seq_len: usize) -> Batch {
        let starts_range = (tokens.len() - seq_len) as u64;
        let starts: Vec<usize> = (0..batch).map(|_| (self.rng.next_u64() % starts_range) as usize).collect();
        windows(tokens, &starts, seq_len)
    }
}
