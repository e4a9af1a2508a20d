//! Whether adjacent recipes of a ranked table differ beyond their seeds' noise: Welch's t-test
//! ([`crate::stats::welch`]) on each pair's final validation losses at LR* (one value per
//! seed), and on each downstream task's headline per seed.
//!
//! Welch's test, not a bootstrap: a sweep has two to a few seeds per recipe, and a bootstrap
//! of two values has three distinct resamples, so its interval is the range of the data; the t
//! distribution carries the uncertainty of so few values (its quantile for one degree of
//! freedom is 12.7, not 1.96), and Welch's form does not assume the two recipes' seeds spread
//! alike. A pair is *separated* when the two-sided p-value is below [`ALPHA`]; a pair without
//! two seeds on each side cannot be tested and is never called separated.

use super::aggregate::MethodSummary;
use crate::stats::{Welch, welch};
use serde::{Deserialize, Serialize};

/// The level below which a difference is called beyond noise.
pub const ALPHA: f64 = 0.05;

/// One test of a pair on one measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairTest {
    /// `final_val_loss`, or a task's `task metric`.
    pub measure: String,
    /// The better one's mean minus the other's (negative for a loss: lower is better).
    pub diff: f64,
    /// Welch's t, degrees of freedom and two-sided p; `None` without two seeds on each side.
    pub t: Option<f64>,
    pub df: Option<f64>,
    pub p: Option<f64>,
}

impl PairTest {
    pub fn of(measure: &str, a: &[f64], b: &[f64]) -> Self {
        let w: Option<Welch> = welch(a, b);
        let diff = crate::stats::mean(a) - crate::stats::mean(b);
        Self { measure: measure.into(), diff, t: w.map(|w| w.t), df: w.map(|w| w.df), p: w.map(|w| w.p) }
    }

    /// Whether the difference is beyond noise at [`ALPHA`].
    pub fn separated(&self) -> bool {
        self.p.is_some_and(|p| p < ALPHA)
    }
}

/// A p-value to three decimals, in two significant digits under 0.001, `< 1e-4` below that
/// (a table cell).
pub fn p_text(p: f64) -> String {
    match p {
        p if p < 1e-4 => "< 1e-4".into(),
        p if p < 1e-3 => format!("{p:.1e}"),
        p => format!("{p:.3}"),
    }
}

/// `p = 0.031`, `p = 4.2e-4` or `p < 1e-4` (in a sentence).
pub fn p_is(p: f64) -> String {
    match p_text(p) {
        t if t.starts_with('<') => format!("p {t}"),
        t => format!("p = {t}"),
    }
}

/// A ranked pair: `ahead` ranks directly above `behind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdjacentPair {
    pub ahead: String,
    pub behind: String,
    pub loss: PairTest,
    /// One test per downstream task both were scored on.
    pub tasks: Vec<PairTest>,
}

/// Every pair of adjacent methods of the ranking `ms` (best first) that both have a mean.
pub fn adjacent_pairs(ms: &[MethodSummary]) -> Vec<AdjacentPair> {
    let ranked: Vec<&MethodSummary> = ms.iter().filter(|m| m.mean.is_some()).collect();
    ranked
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let tasks = a
                .tasks
                .iter()
                .zip(&a.task_finals)
                .filter_map(|(t, av)| {
                    let i = b.tasks.iter().position(|s| s.task == t.task && s.metric == t.metric)?;
                    Some(PairTest::of(&format!("{} {}", t.task, t.metric), av, b.task_finals.get(i)?))
                })
                .collect();
            AdjacentPair {
                ahead: a.method.clone(),
                behind: b.method.clone(),
                loss: PairTest::of("final_val_loss", &a.finals, &b.finals),
                tasks,
            }
        })
        .collect()
}

/// The adjacent pairs whose final losses are not separated.
pub fn unseparated(ms: &[MethodSummary]) -> Vec<AdjacentPair> {
    adjacent_pairs(ms).into_iter().filter(|p| !p.loss.separated()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(name: &str, finals: &[f64]) -> MethodSummary {
        let mean = finals.iter().sum::<f64>() / finals.len() as f64;
        let mut m = MethodSummary::for_tests(name, mean, Vec::new());
        m.finals = finals.to_vec();
        m.seeds_at_lr_star = finals.len();
        m
    }

    /// Two seeds a recipe, as `compare` has them (KiteNorm's and Peri-LN's final losses on one
    /// machine): Welch's t = −7.08 on 1.56
    /// degrees of freedom, p = 0.0362 (scipy.stats.ttest_ind(equal_var=False)): separated; a
    /// pair whose seeds interleave is a tie; a single seed is untested.
    #[test]
    fn adjacent_pairs_are_tested_by_welch() {
        let ms = [
            method("kitenorm", &[2.0150, 2.0508]),
            method("peri", &[2.2631, 2.3281]),
            method("gpt2-pre", &[2.2992, 2.4559]),
            method("one", &[2.5]),
        ];
        let pairs = adjacent_pairs(&ms);
        assert_eq!(pairs.len(), 3);
        let p = pairs[0].loss.p.unwrap();
        assert!((p - 0.036_245_348_075_476_81).abs() < 1e-9, "{p}");
        assert!(pairs[0].loss.separated());
        assert!(!pairs[1].loss.separated());
        assert!(pairs[2].loss.p.is_none() && !pairs[2].loss.separated());
        let names: Vec<String> = unseparated(&ms).into_iter().map(|p| p.ahead).collect();
        assert_eq!(names, ["peri", "gpt2-pre"]);
    }

    #[test]
    fn p_values_read_in_cells_and_sentences() {
        assert_eq!((p_text(0.0362), p_is(0.0362)), ("0.036".to_string(), "p = 0.036".to_string()));
        assert_eq!((p_text(4.2e-4), p_is(4.2e-4)), ("4.2e-4".to_string(), "p = 4.2e-4".to_string()));
        assert_eq!((p_text(3e-7), p_is(3e-7)), ("< 1e-4".to_string(), "p < 1e-4".to_string()));
    }
}
