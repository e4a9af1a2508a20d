//! Paired rounds (`bench model --rounds N`): `pre` (fused kernels, f32) and the PyTorch twin measured
//! one after the other, `N` times, and the median of the per-round ratios.
//!
//! On a shared 2-core VM the machine's speed drifts by ±15 % over a minute, and the two sides of
//! one ratio are measured a minute apart: a single pair lands on either side of the truth. Each
//! round's ratio is taken between runs seconds apart, and the median of several rounds is what
//! one invocation can say; every round is kept in the report.

use super::{RecipeBench, TorchBench};
use serde::{Deserialize, Serialize};

/// One round: normlab's `pre` and PyTorch, measured back to back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    pub normlab_train_tok_s: f64,
    pub normlab_fwd_tok_s: f64,
    pub torch_train_tok_s: f64,
    pub torch_fwd_tok_s: f64,
}

impl Pair {
    pub fn of(normlab: &RecipeBench, torch: &TorchBench) -> Pair {
        Pair {
            normlab_train_tok_s: normlab.train_tok_s,
            normlab_fwd_tok_s: normlab.fwd_tok_s,
            torch_train_tok_s: torch.train_tok_s,
            torch_fwd_tok_s: torch.fwd_tok_s,
        }
    }

    fn train_ratio(&self) -> f64 {
        self.normlab_train_tok_s / self.torch_train_tok_s
    }

    fn fwd_ratio(&self) -> f64 {
        self.normlab_fwd_tok_s / self.torch_fwd_tok_s
    }
}

/// Every round and the medians of their ratios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    pub pairs: Vec<Pair>,
    pub train_ratios: Vec<f64>,
    pub fwd_ratios: Vec<f64>,
    pub train_ratio_median: f64,
    pub fwd_ratio_median: f64,
}

impl Rounds {
    pub fn of(pairs: Vec<Pair>) -> Rounds {
        let train_ratios: Vec<f64> = pairs.iter().map(Pair::train_ratio).collect();
        let fwd_ratios: Vec<f64> = pairs.iter().map(Pair::fwd_ratio).collect();
        Rounds {
            train_ratio_median: crate::stats::median(&train_ratios),
            fwd_ratio_median: crate::stats::median(&fwd_ratios),
            pairs,
            train_ratios,
            fwd_ratios,
        }
    }
}

/// `first` (the main pass's pair) and `rounds − 1` more from `measure`, each printed as it comes.
pub fn run(first: Pair, rounds: usize, mut measure: impl FnMut() -> anyhow::Result<Pair>) -> anyhow::Result<Rounds> {
    let mut pairs = vec![first];
    while pairs.len() < rounds {
        let p = measure()?;
        crate::io::term::err(format_args!(
            "round {}: pre train {:.0} vs PyTorch {:.0} tok/s ({:.3}×), forward {:.0} vs {:.0} ({:.3}×)",
            pairs.len() + 1,
            p.normlab_train_tok_s,
            p.torch_train_tok_s,
            p.train_ratio(),
            p.normlab_fwd_tok_s,
            p.torch_fwd_tok_s,
            p.fwd_ratio()
        ));
        pairs.push(p);
    }
    Ok(Rounds::of(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_per_round_ratios() {
        // Train ratios 1.2, 0.8, 1.0 and forward 2.0, 1.0, 0.5: both medians are 1.0 (the
        // forward ratio of the mean rates would be 3.5 / 3).
        let p = |nt: f64, tt: f64, nf: f64, tf: f64| Pair {
            normlab_train_tok_s: nt,
            torch_train_tok_s: tt,
            normlab_fwd_tok_s: nf,
            torch_fwd_tok_s: tf,
        };
        let r = Rounds::of(vec![p(1200.0, 1000.0, 2.0, 1.0), p(800.0, 1000.0, 1.0, 1.0), p(1000.0, 1000.0, 0.5, 1.0)]);
        assert_eq!(r.train_ratios, vec![1.2, 0.8, 1.0]);
        assert_eq!((r.train_ratio_median, r.fwd_ratio_median), (1.0, 1.0));
    }

    #[test]
    fn one_round_is_the_main_pair() {
        let first =
            Pair { normlab_train_tok_s: 3.0, normlab_fwd_tok_s: 4.0, torch_train_tok_s: 2.0, torch_fwd_tok_s: 8.0 };
        let r = run(first.clone(), 1, || anyhow::bail!("no second round")).unwrap();
        assert_eq!((r.pairs, r.train_ratio_median, r.fwd_ratio_median), (vec![first], 1.5, 0.5));
    }
}
