//! The scaling law `L(N) = E + A·N^(−α)` (KiteNorm Fig. 4, the Chinchilla form with one
//! variable) fitted to a recipe's final losses over a ladder of sizes, and a bootstrap
//! interval for α over the seeds.
//!
//! For a fixed irreducible loss `E` the law is a line, `ln(L − E) = ln A − α ln N`, fitted by
//! least squares; `E` is chosen in `[0, min L)` (a loss is never negative) to minimise the squared error of `L` itself
//! (a grid, then golden-section refinement). Three sizes fit three parameters exactly, so R²
//! says something only from four sizes on.

use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

/// A fitted law and how well it fits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerLaw {
    /// The irreducible loss `E`.
    pub e: f64,
    pub a: f64,
    pub alpha: f64,
    /// `1 − SSE/SST` over the points fitted.
    pub r2: f64,
}

impl PowerLaw {
    pub fn at(&self, n: f64) -> f64 {
        self.e + self.a * n.powf(-self.alpha)
    }
}

/// The least-squares law through `(N, L)` points (`N > 0`, finite `L`); `None` with fewer
/// than three points or all losses equal.
pub fn fit(points: &[(f64, f64)]) -> Option<PowerLaw> {
    let pts: Vec<(f64, f64)> = points.iter().copied().filter(|(n, l)| *n > 0.0 && l.is_finite()).collect();
    let lo = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    if pts.len() < 3 || hi - lo <= 0.0 {
        return None;
    }
    // A loss cannot fall below 0, so neither can its irreducible part: E ∈ [0, min L).
    let (e_min, e_max) = (0.0, lo - 1e-9 * (1.0 + lo.abs()));
    if e_max <= e_min {
        return None;
    }
    let sse = |e: f64| law_for(&pts, e).map_or(f64::INFINITY, |(a, alpha)| sse_of(&pts, e, a, alpha));
    let grid = 400;
    let (mut best, mut best_sse) = (e_min, f64::INFINITY);
    for i in 0..=grid {
        let e = e_min + (e_max - e_min) * i as f64 / grid as f64;
        let s = sse(e);
        if s < best_sse {
            best = e;
            best_sse = s;
        }
    }
    let step = (e_max - e_min) / grid as f64;
    let e = golden_min(&sse, (best - step).max(e_min), (best + step).min(e_max));
    let (a, alpha) = law_for(&pts, e)?;
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let sst: f64 = pts.iter().map(|p| (p.1 - mean).powi(2)).sum();
    Some(PowerLaw { e, a, alpha, r2: 1.0 - sse_of(&pts, e, a, alpha) / sst })
}

/// `(A, α)` of the least-squares line through `(ln N, ln(L − E))`.
fn law_for(pts: &[(f64, f64)], e: f64) -> Option<(f64, f64)> {
    let xy: Vec<(f64, f64)> = pts.iter().map(|&(n, l)| (n.ln(), (l - e).ln())).collect();
    if xy.iter().any(|p| !p.1.is_finite()) {
        return None;
    }
    let k = xy.len() as f64;
    let (mx, my) = (xy.iter().map(|p| p.0).sum::<f64>() / k, xy.iter().map(|p| p.1).sum::<f64>() / k);
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    Some(((my - slope * mx).exp(), -slope))
}

fn sse_of(pts: &[(f64, f64)], e: f64, a: f64, alpha: f64) -> f64 {
    pts.iter().map(|&(n, l)| (l - (e + a * n.powf(-alpha))).powi(2)).sum()
}

/// The minimiser of `f` on `[lo, hi]` by golden-section search (60 steps).
fn golden_min(f: &dyn Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (c, d) = (hi - g * (hi - lo), lo + g * (hi - lo));
        if f(c) <= f(d) {
            hi = d;
        } else {
            lo = c;
        }
    }
    (lo + hi) / 2.0
}

/// A 95 % bootstrap interval for α: `rounds` refits, each taking at every size one of its
/// seeds' losses at random (seeded: the same data give the same interval). `None` unless some
/// size has two seeds or more.
pub fn alpha_interval(sizes: &[(f64, Vec<f64>)], rounds: usize, seed: u64) -> Option<(f64, f64)> {
    if sizes.iter().all(|(_, ls)| ls.len() < 2) {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut alphas: Vec<f64> = (0..rounds)
        .filter_map(|_| {
            let pick: Vec<(f64, f64)> = sizes
                .iter()
                .filter(|(_, ls)| !ls.is_empty())
                .map(|(n, ls)| (*n, ls[(rng.next_u64() % ls.len() as u64) as usize]))
                .collect();
            fit(&pick).map(|f| f.alpha)
        })
        .collect();
    if alphas.len() < 20 {
        return None;
    }
    alphas.sort_by(f64::total_cmp);
    let q = |p: f64| alphas[((alphas.len() - 1) as f64 * p).round() as usize];
    Some((q(0.025), q(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_power_law_is_recovered() {
        // L = 1.5 + 30·N^(−0.3) at N = 10⁴ … 10⁷.
        let pts: Vec<(f64, f64)> = [1e4, 1e5, 1e6, 1e7].iter().map(|&n: &f64| (n, 1.5 + 30.0 * n.powf(-0.3))).collect();
        let f = fit(&pts).unwrap();
        assert!((f.alpha - 0.3).abs() < 1e-4, "{f:?}");
        assert!((f.e - 1.5).abs() < 1e-3, "{f:?}");
        assert!((f.a - 30.0).abs() / 30.0 < 1e-2, "{f:?}");
        assert!(f.r2 > 1.0 - 1e-9, "{f:?}");
        assert!((f.at(1e8) - (1.5 + 30.0 * 1e8f64.powf(-0.3))).abs() < 1e-3);
    }

    #[test]
    fn a_pure_power_law_fits_with_no_irreducible_loss() {
        // L = 5·N^(−0.1): E = 0 and a straight log-log line.
        let pts: Vec<(f64, f64)> = [1e3, 1e4, 1e5, 1e6].iter().map(|&n: &f64| (n, 5.0 * n.powf(-0.1))).collect();
        let f = fit(&pts).unwrap();
        assert!((f.alpha - 0.1).abs() < 1e-3 && f.e.abs() < 1e-2, "{f:?}");
    }

    #[test]
    fn too_few_or_flat_points_do_not_fit() {
        assert!(fit(&[(1e3, 3.0), (1e4, 2.5)]).is_none());
        assert!(fit(&[(1e3, 3.0), (1e4, 3.0), (1e5, 3.0)]).is_none());
    }

    #[test]
    fn the_bootstrap_interval_holds_the_seeds_alpha_and_needs_two_seeds() {
        let law = |n: f64, s: f64| 1.0 + 20.0 * n.powf(-0.25) + s;
        let sizes: Vec<(f64, Vec<f64>)> =
            [1e4, 1e5, 1e6, 1e7].iter().map(|&n| (n, vec![law(n, -0.01), law(n, 0.01)])).collect();
        let (lo, hi) = alpha_interval(&sizes, 400, 1).unwrap();
        assert!(lo <= 0.25 && 0.25 <= hi && hi - lo < 0.2, "({lo}, {hi})");
        assert_eq!(alpha_interval(&sizes, 400, 1), Some((lo, hi)), "seeded");
        let one: Vec<(f64, Vec<f64>)> = sizes.iter().map(|(n, ls)| (*n, ls[..1].to_vec())).collect();
        assert!(alpha_interval(&one, 400, 1).is_none());
    }
}
