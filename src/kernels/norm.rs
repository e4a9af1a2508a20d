//! Affine row norms in one pass: LayerNorm, RMSNorm and their scalarised forms.
//!
//! ```text
//! μ = mean(x) (centred) or 0 (RMS),   r = 1/√(mean((x − μ)²) + ε),   x̂ = (x − μ) r
//! y = γ ⊙ x̂ + β
//! ```
//!
//! Backward, with `g = γ ⊙ ∂y` per row:
//!
//! ```text
//! ∂x = r (g − mean(g)·[centred] − x̂ · mean(g ⊙ x̂))     ∂γ = Σ_rows ∂y ⊙ x̂     ∂β = Σ_rows ∂y
//! ```
//!
//! The forward saves only μ and r per row; x̂ is recomputed from x in the backward pass.
//!
//! # Shapes
//! - `x`, `y`, `∂y`, `∂x`: rows × `d`, row-major
//! - `gain`, `shift`: `d` (a scalar parameter is broadcast by the caller)
//! - `mean`, `rstd`: one per row

use super::simd::{Real, dot, sum, sum_map, with_simd};
use rayon::prelude::*;

/// Rows per parallel task, and per partial sum of `∂γ`, `∂β`: fixed, so the reduction order
/// (and every bit of the result) does not depend on the number of threads.
const ROWS_PER_TASK: usize = 32;

/// Per-row statistics saved for the backward pass.
pub struct RowStats<T> {
    pub mean: Vec<T>,
    pub rstd: Vec<T>,
}

/// The affine norm's constants.
#[derive(Clone, Copy)]
pub struct Affine<'a, T> {
    pub gain: &'a [T],
    pub shift: &'a [T],
    pub eps: f64,
    pub centred: bool,
}

impl<T: Real> Affine<'_, T> {
    /// Normalises one row into `yr`, returning its `(μ, r)`.
    #[inline(always)]
    fn row(&self, xr: &[T], yr: &mut [T]) -> (T, T) {
        let d = xr.len();
        let inv_d = T::of(1.0 / d as f64);
        let mu = if self.centred { sum(xr) * inv_d } else { T::zero() };
        let var = sum_map(xr, |v| (v - mu) * (v - mu)) * inv_d;
        let rs = T::one() / (var + T::of(self.eps)).sqrt();
        for j in 0..d {
            yr[j] = (xr[j] - mu) * rs * self.gain[j] + self.shift[j];
        }
        (mu, rs)
    }
}

/// `y = γ ⊙ (x − μ) r + β` over rows of width `d`.
pub fn forward<T: Real>(x: &[T], d: usize, gain: &[T], shift: &[T], eps: f64, centred: bool) -> (Vec<T>, RowStats<T>) {
    let rows = x.len() / d;
    let mut y = vec![T::zero(); x.len()];
    let (mut mean, mut rstd) = (vec![T::zero(); rows], vec![T::zero(); rows]);
    let p = Affine { gain, shift, eps, centred };
    y.par_chunks_mut(d * ROWS_PER_TASK)
        .zip(x.par_chunks(d * ROWS_PER_TASK))
        .zip(mean.par_chunks_mut(ROWS_PER_TASK).zip(rstd.par_chunks_mut(ROWS_PER_TASK)))
        .for_each(|((y, x), (m, r))| {
            with_simd(
                #[inline(always)]
                || {
                    for (i, (yr, xr)) in y.chunks_exact_mut(d).zip(x.chunks_exact(d)).enumerate() {
                        (m[i], r[i]) = p.row(xr, yr);
                    }
                },
            )
        });
    (y, RowStats { mean, rstd })
}

/// The residual sum `z = a·x + c·b` and `y = γ ⊙ (z − μ) r + β` of it, each row normalised
/// while its sum is in cache (a sublayer's outer norm on its residual addition). Returns
/// `(z, y, stats)`; the gradients are [`backward`] on `z`, times `a` for `x` and `c` for `b`.
pub fn forward_sum<T: Real>(x: &[T], b: &[T], [a, c]: [T; 2], p: Affine<'_, T>) -> (Vec<T>, Vec<T>, RowStats<T>) {
    assert_eq!(x.len(), b.len(), "the residual sum's terms have the same shape");
    let d = p.gain.len();
    let rows = x.len() / d;
    let (mut z, mut y) = (vec![T::zero(); x.len()], vec![T::zero(); x.len()]);
    let (mut mean, mut rstd) = (vec![T::zero(); rows], vec![T::zero(); rows]);
    let n = d * ROWS_PER_TASK;
    (z.par_chunks_mut(n).zip(y.par_chunks_mut(n)))
        .zip(x.par_chunks(n).zip(b.par_chunks(n)))
        .zip(mean.par_chunks_mut(ROWS_PER_TASK).zip(rstd.par_chunks_mut(ROWS_PER_TASK)))
        .for_each(|(((z, y), (x, b)), (m, r))| {
            with_simd(
                #[inline(always)]
                || {
                    let rows =
                        z.chunks_exact_mut(d).zip(y.chunks_exact_mut(d)).zip(x.chunks_exact(d).zip(b.chunks_exact(d)));
                    for (i, ((zr, yr), (xr, br))) in rows.enumerate() {
                        for j in 0..d {
                            zr[j] = xr[j] * a + br[j] * c;
                        }
                        (m[i], r[i]) = p.row(zr, yr);
                    }
                },
            )
        });
    (z, y, RowStats { mean, rstd })
}

/// Gradients of [`forward`]: `(∂x, ∂γ, ∂β)`, the last two of length `d`, or of length 1 when
/// `scalar` (KiteNorm's γ′, β′). Scalar parameter gradients are summed row by row: a row's
/// `Σ_j ∂y` is often nearly 0 (a mean-centring norm follows), and summing it first keeps
/// the rounding noise of such near-dead parameters at the f32 floor.
pub fn backward<T: Real>(
    dy: &[T],
    x: &[T],
    d: usize,
    gain: &[T],
    stats: &RowStats<T>,
    centred: bool,
    scalar: bool,
) -> [Vec<T>; 3] {
    let mut dx = vec![T::zero(); x.len()];
    let width = if scalar { 1 } else { d };
    let rows = ROWS_PER_TASK;
    let partials: Vec<(Vec<T>, Vec<T>)> = dx
        .par_chunks_mut(d * rows)
        .zip(dy.par_chunks(d * rows).zip(x.par_chunks(d * rows)))
        .zip(stats.mean.par_chunks(rows).zip(stats.rstd.par_chunks(rows)))
        .map(|((dx, (dy, x)), (m, r))| {
            let task = RowsTask { d, gain, centred, width };
            with_simd(
                #[inline(always)]
                || task.backward(dx, dy, x, m, r),
            )
        })
        .collect();
    let (mut dg, mut db) = (vec![T::zero(); width], vec![T::zero(); width]);
    for (pg, pb) in partials {
        for j in 0..width {
            dg[j] = dg[j] + pg[j];
            db[j] = db[j] + pb[j];
        }
    }
    [dx, dg, db]
}

/// The constants of one parallel task of [`backward`].
struct RowsTask<'a, T> {
    d: usize,
    gain: &'a [T],
    centred: bool,
    /// 1 for scalar parameters, `d` otherwise.
    width: usize,
}

impl<T: Real> RowsTask<'_, T> {
    /// `∂x` of this task's rows, and their partial `(∂γ, ∂β)`.
    #[inline(always)]
    fn backward(&self, dx: &mut [T], dy: &[T], x: &[T], mean: &[T], rstd: &[T]) -> (Vec<T>, Vec<T>) {
        let d = self.d;
        let inv_d = T::of(1.0 / d as f64);
        let (mut dg, mut db) = (vec![T::zero(); self.width], vec![T::zero(); self.width]);
        let (mut g, mut xh) = (vec![T::zero(); d], vec![T::zero(); d]);
        for (i, ((dxr, dyr), xr)) in dx.chunks_exact_mut(d).zip(dy.chunks_exact(d)).zip(x.chunks_exact(d)).enumerate() {
            for j in 0..d {
                xh[j] = (xr[j] - mean[i]) * rstd[i];
                g[j] = dyr[j] * self.gain[j];
            }
            if self.width == 1 {
                dg[0] = dg[0] + dot(dyr, &xh);
                db[0] = db[0] + sum(dyr);
            } else {
                for j in 0..d {
                    dg[j] = dg[j] + dyr[j] * xh[j];
                    db[j] = db[j] + dyr[j];
                }
            }
            let mean_g = if self.centred { sum(&g) * inv_d } else { T::zero() };
            let mean_gx = dot(&g, &xh) * inv_d;
            for j in 0..d {
                dxr[j] = rstd[i] * (g[j] - mean_g - xh[j] * mean_gx);
            }
        }
        (dg, db)
    }
}
