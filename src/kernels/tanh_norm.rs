//! The tanh norms in one pass: DyT and BHyT (the BHyT paper), `y = γ ⊙ tanh(λ x / D) + β`, with
//! one denominator `D` per row:
//!
//! | [`Denominator`] | `D` | used by |
//! |---|---|---|
//! | `One` | 1 (`λ` is DyT's α) | DyT |
//! | `Std` | `κ √(s² + ε) + |μ|` | BHyT* (eq. 1) |
//! | `Rms` | `κ √(mean(x²) + ε)` | BHyT* (authors' code), BHyT's exact statistic |
//! | `Given` | `κ √(v + ε)`, `v` an input per row | BHyT's approximated `ŝ²` (Theorem 3.5) |
//!
//! Backward, with `w = 1/D`, `u = λ x w`, `t = tanh u`, `g = ∂y ⊙ γ (1 − t²)`:
//!
//! ```text
//! ∂γ = Σ_rows ∂y ⊙ t    ∂β = Σ_rows ∂y    ∂λ = Σ g ⊙ x w    ∂D = −w² λ Σ_j g_j x_j
//! ∂x = λ w g + ∂D · ∂D/∂x      (∂D/∂x_j = κ (x_j − μ)/(d √(s² + ε)) + sign(μ)/d for Std,
//!                                        κ x_j /(d √(mean(x²) + ε)) for Rms)
//! ∂v = ∂D · κ / (2 √(v + ε))   (Given)
//! ```
//!
//! # Shapes
//! rows × `d` for `x`, `y`; `gain`, `shift`: `d`; `v`: one per row (`Given` only); `λ`: scalar.

use super::simd::{Real, dot, sum, sum_map, with_simd};
use rayon::prelude::*;

/// Rows per task and per partial sum (a fixed reduction order).
const ROWS_PER_TASK: usize = 32;

/// Which `D` divides `λ x` (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denominator {
    One,
    Std,
    Rms,
    Given,
}

/// The constants of one tanh norm.
#[derive(Clone, Copy, Debug)]
pub struct TanhNorm {
    pub denominator: Denominator,
    pub kappa: f64,
    pub eps: f64,
}

/// `(D, μ, √(σ² + ε))` of one row: μ and the root only for the statistics that have them.
#[inline(always)]
fn denominator<T: Real>(x: &[T], v: Option<T>, n: TanhNorm) -> (T, T, T) {
    let inv_d = T::of(1.0 / x.len() as f64);
    let (kappa, eps) = (T::of(n.kappa), T::of(n.eps));
    match n.denominator {
        Denominator::One => (T::one(), T::zero(), T::one()),
        Denominator::Std => {
            let mu = sum(x) * inv_d;
            let root = (sum_map(x, |a| (a - mu) * (a - mu)) * inv_d + eps).sqrt();
            (kappa * root + mu.abs(), mu, root)
        }
        Denominator::Rms => {
            let root = (dot(x, x) * inv_d + eps).sqrt();
            (kappa * root, T::zero(), root)
        }
        Denominator::Given => {
            let root = (v.expect("a given variance per row") + eps).sqrt();
            (kappa * root, T::zero(), root)
        }
    }
}

/// `y = γ ⊙ tanh(λ x / D) + β`.
pub fn forward<T: Real>(x: &[T], d: usize, lambda: T, gain: &[T], shift: &[T], v: &[T], n: TanhNorm) -> Vec<T> {
    let mut y = vec![T::zero(); x.len()];
    y.par_chunks_mut(d * ROWS_PER_TASK).zip(x.par_chunks(d * ROWS_PER_TASK)).enumerate().for_each(|(c, (y, x))| {
        with_simd(
            #[inline(always)]
            || {
                for (i, (yr, xr)) in y.chunks_exact_mut(d).zip(x.chunks_exact(d)).enumerate() {
                    let (den, _, _) = denominator(xr, v.get(c * ROWS_PER_TASK + i).copied(), n);
                    let s = lambda / den;
                    for j in 0..d {
                        yr[j] = gain[j] * (s * xr[j]).tanh_sech2().0 + shift[j];
                    }
                }
            },
        )
    });
    y
}

/// Per-task partial sums of the parameter gradients: `(∂γ, ∂β, ∂λ)`.
type Partial<T> = (Vec<T>, Vec<T>, T);

/// Gradients of [`forward`]: `(∂x, ∂γ, ∂β, ∂λ, ∂v)` (`∂v` empty unless `Given`).
pub fn backward<T: Real>(
    dy: &[T],
    x: &[T],
    d: usize,
    lambda: T,
    gain: &[T],
    v: &[T],
    n: TanhNorm,
) -> (Vec<T>, Vec<T>, Vec<T>, T, Vec<T>) {
    let (mut dx, mut dv) = (vec![T::zero(); x.len()], vec![T::zero(); v.len()]);
    let rows = ROWS_PER_TASK;
    let dv_chunks: Vec<&mut [T]> = if v.is_empty() {
        (0..x.len().div_ceil(d * rows)).map(|_| <&mut [T]>::default()).collect()
    } else {
        dv.chunks_mut(rows).collect()
    };
    let partials: Vec<Partial<T>> = dx
        .par_chunks_mut(d * rows)
        .zip(dy.par_chunks(d * rows).zip(x.par_chunks(d * rows)))
        .zip(dv_chunks.into_par_iter())
        .enumerate()
        .map(|(c, ((dx, (dy, x)), dv))| {
            with_simd(
                #[inline(always)]
                || backward_rows(dx, dy, x, dv, &v[(c * rows).min(v.len())..], d, lambda, gain, n),
            )
        })
        .collect();
    let mut dg = vec![T::zero(); d];
    let mut db = vec![T::zero(); d];
    let mut dl = T::zero();
    for (pg, pb, pl) in partials {
        for j in 0..d {
            dg[j] = dg[j] + pg[j];
            db[j] = db[j] + pb[j];
        }
        dl = dl + pl;
    }
    (dx, dg, db, dl, dv)
}

/// One task's rows of [`backward`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn backward_rows<T: Real>(
    dx: &mut [T],
    dy: &[T],
    x: &[T],
    dv: &mut [T],
    v: &[T],
    d: usize,
    lambda: T,
    gain: &[T],
    n: TanhNorm,
) -> Partial<T> {
    let mut dg = vec![T::zero(); d];
    let mut db = vec![T::zero(); d];
    let mut dl = T::zero();
    let mut g = vec![T::zero(); d];
    let inv_d = T::of(1.0 / d as f64);
    for (i, ((dxr, dyr), xr)) in dx.chunks_exact_mut(d).zip(dy.chunks_exact(d)).zip(x.chunks_exact(d)).enumerate() {
        let (den, mu, root) = denominator(xr, v.get(i).copied(), n);
        let w = T::one() / den;
        let s = lambda * w;
        for j in 0..d {
            let (t, sech2) = (s * xr[j]).tanh_sech2();
            dg[j] = dg[j] + dyr[j] * t;
            db[j] = db[j] + dyr[j];
            g[j] = dyr[j] * gain[j] * sech2;
        }
        let gx = dot(&g, xr);
        dl = dl + gx * w;
        let d_den = -(w * w) * lambda * gx;
        let kappa = T::of(n.kappa);
        let (a, b) = match n.denominator {
            // ∂D/∂x_j = a·x_j + b
            Denominator::Std => {
                let a = kappa * inv_d / root;
                (a, -a * mu + mu.signum_or_zero() * inv_d)
            }
            Denominator::Rms => (kappa * inv_d / root, T::zero()),
            Denominator::One | Denominator::Given => (T::zero(), T::zero()),
        };
        for j in 0..d {
            dxr[j] = s * g[j] + d_den * (a * xr[j] + b);
        }
        if n.denominator == Denominator::Given {
            dv[i] = d_den * kappa / (T::of(2.0) * root);
        }
    }
    (dg, db, dl)
}

/// `sign(μ)` with `sign(0) = 0`, the subgradient burn's `abs` uses.
trait SignumOrZero {
    fn signum_or_zero(self) -> Self;
}

impl<T: Real> SignumOrZero for T {
    #[inline(always)]
    fn signum_or_zero(self) -> Self {
        if self == T::zero() { T::zero() } else { self.signum() }
    }
}
