//! Mixtures (`[[data.sources]]`): several corpora, each prepared and split on its own, read as
//! one training stream and one validation stream in which each source keeps its range.
//! Training windows pick a source by weight, then a window inside it (never across sources);
//! validation windows are shared among the sources by weight, so the overall validation loss is
//! the mixture's, and each source's loss and bits per byte are reported on their own (one
//! number per domain, as Paloma reports them).

use anyhow::ensure;
use std::ops::Range;

/// One source's place in the mixture.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub name: String,
    /// Normalised over the sources.
    pub weight: f64,
    pub train: Range<usize>,
    pub val: Range<usize>,
    /// UTF-8 bytes per validation token (for bits per byte); unknown for token shards.
    pub val_bytes_per_token: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Mixture {
    pub parts: Vec<Part>,
}

impl Mixture {
    /// The part a uniform draw `u ∈ [0, 1)` picks.
    pub fn pick(&self, u: f64) -> &Part {
        let mut acc = 0.0;
        for p in &self.parts {
            acc += p.weight;
            if u < acc {
                return p;
            }
        }
        self.parts.last().expect("a mixture has sources")
    }

    /// Validation windows per source: `count` shared by weight, at least one each.
    pub fn val_windows(&self, count: usize) -> Vec<usize> {
        self.parts.iter().map(|p| ((count as f64 * p.weight).round() as usize).max(1)).collect()
    }

    pub fn check_seq_len(&self, seq_len: usize) -> anyhow::Result<()> {
        for p in &self.parts {
            for (split, r) in [("training", &p.train), ("validation", &p.val)] {
                ensure!(
                    r.len() > seq_len,
                    "source `{}` has {} {split} tokens, fewer than one window of train.seq_len + 1 = {}; lower \
                     train.seq_len or give it more text",
                    p.name,
                    r.len(),
                    seq_len + 1
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix() -> Mixture {
        let part = |name: &str, weight, train: Range<usize>, val: Range<usize>| Part {
            name: name.into(),
            weight,
            train,
            val,
            val_bytes_per_token: None,
        };
        Mixture { parts: vec![part("a", 0.75, 0..1000, 0..500), part("b", 0.25, 1000..1100, 500..1000)] }
    }

    #[test]
    fn draws_pick_sources_by_cumulative_weight() {
        let m = mix();
        let names: Vec<&str> = [0.0, 0.7499, 0.75, 0.9999].iter().map(|&u| m.pick(u).name.as_str()).collect();
        assert_eq!(names, ["a", "a", "b", "b"]);
        assert_eq!(m.val_windows(16), vec![12, 4]);
        assert_eq!(m.val_windows(2), vec![2, 1], "every source keeps a window");
    }

    #[test]
    fn a_source_shorter_than_a_window_is_named() {
        let e = mix().check_seq_len(128).unwrap_err().to_string();
        assert!(e.contains("source `b`") && e.contains("100 training tokens"), "{e}");
    }
}
