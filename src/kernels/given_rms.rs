//! RMSNorm with a given per-row second moment in one pass: RMSNorm-Approx's FFN-input norm
//! (the BHyT paper's Table 5), whose statistic is the block's approximated `ŝ²` (Theorem 3.5)
//! instead of its own input's `mean(x²)`.
//!
//! ```text
//! w = 1/√(v + ε),   y = γ ⊙ x w
//! ```
//!
//! Backward (no term through a statistic of `x`: `v` is an input):
//!
//! ```text
//! ∂x = w γ ⊙ ∂y     ∂γ = Σ_rows ∂y ⊙ x w     ∂v = −½ w³ Σ_j ∂y_j γ_j x_j
//! ```
//!
//! # Shapes
//! rows × `d` for `x`, `y`, `∂y`, `∂x`; `gain`: `d`; `v`, `∂v`: one per row.

use super::simd::{Real, with_simd};
use rayon::prelude::*;

/// Rows per task and per partial sum of `∂γ` (a fixed reduction order, as in [`super::norm`]).
const ROWS_PER_TASK: usize = 32;

/// `w = 1/√(v + ε)`.
#[inline(always)]
fn inverse_root<T: Real>(v: T, eps: f64) -> T {
    T::one() / (v + T::of(eps)).sqrt()
}

/// `y = γ ⊙ x / √(v + ε)` over rows of width `d`.
pub fn forward<T: Real>(x: &[T], d: usize, gain: &[T], v: &[T], eps: f64) -> Vec<T> {
    assert_eq!(x.len(), v.len() * d, "one given variance per row");
    let mut y = vec![T::zero(); x.len()];
    y.par_chunks_mut(d * ROWS_PER_TASK).zip(x.par_chunks(d * ROWS_PER_TASK)).zip(v.par_chunks(ROWS_PER_TASK)).for_each(
        |((y, x), v)| {
            with_simd(
                #[inline(always)]
                || {
                    for ((yr, xr), &vi) in y.chunks_exact_mut(d).zip(x.chunks_exact(d)).zip(v) {
                        let w = inverse_root(vi, eps);
                        for j in 0..d {
                            yr[j] = gain[j] * xr[j] * w;
                        }
                    }
                },
            )
        },
    );
    y
}

/// Gradients of [`forward`]: `(∂x, ∂γ, ∂v)`.
pub fn backward<T: Real>(dy: &[T], x: &[T], d: usize, gain: &[T], v: &[T], eps: f64) -> [Vec<T>; 3] {
    let (mut dx, mut dv) = (vec![T::zero(); x.len()], vec![T::zero(); v.len()]);
    let rows = ROWS_PER_TASK;
    let partials: Vec<Vec<T>> = dx
        .par_chunks_mut(d * rows)
        .zip(dv.par_chunks_mut(rows))
        .zip(dy.par_chunks(d * rows).zip(x.par_chunks(d * rows)).zip(v.par_chunks(rows)))
        .map(|((dx, dv), ((dy, x), v))| {
            with_simd(
                #[inline(always)]
                || backward_rows(dx, dv, dy, x, v, d, gain, eps),
            )
        })
        .collect();
    let mut dg = vec![T::zero(); d];
    for p in partials {
        for j in 0..d {
            dg[j] = dg[j] + p[j];
        }
    }
    [dx, dg, dv]
}

/// One task's rows of [`backward`]; returns their partial `∂γ`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn backward_rows<T: Real>(
    dx: &mut [T],
    dv: &mut [T],
    dy: &[T],
    x: &[T],
    v: &[T],
    d: usize,
    gain: &[T],
    eps: f64,
) -> Vec<T> {
    let mut dg = vec![T::zero(); d];
    for (i, ((dxr, dyr), xr)) in dx.chunks_exact_mut(d).zip(dy.chunks_exact(d)).zip(x.chunks_exact(d)).enumerate() {
        let w = inverse_root(v[i], eps);
        let mut gx = T::zero();
        for j in 0..d {
            let g = dyr[j] * gain[j];
            dxr[j] = g * w;
            dg[j] = dg[j] + dyr[j] * xr[j] * w;
            gx = gx + g * xr[j];
        }
        dv[i] = T::of(-0.5) * w * w * w * gx;
    }
    dg
}
