//! Scaled causal softmax over attention scores in one pass, with no mask tensor:
//!
//! ```text
//! p_ij = exp(s·x_ij − m_i) / Σ_{k ≤ i+o} exp(s·x_ik − m_i)   for j ≤ i + o,   0 above
//! ```
//!
//! with `s` the scale (`1/√h`), `m_i` the row maximum and `o = S − T` the number of cached
//! keys before the `T` queries. Backward from the saved probabilities:
//!
//! ```text
//! ∂x_ij = s · p_ij (∂p_ij − Σ_k p_ik ∂p_ik)
//! ```
//!
//! # Shapes
//! `x`, `p`: `[…, T, S]` flat, rows of `S` keys; the query index of a row is its index modulo `T`.

use super::simd::{Real, dot, max, sum, with_simd};
use rayon::prelude::*;

/// Rows per parallel task.
const ROWS: usize = 64;

/// Probabilities `p` of the scaled, causally masked rows of `x`.
pub fn forward<T: Real>(x: &[T], t: usize, s: usize, scale: f64) -> Vec<T> {
    let mut p = vec![T::zero(); x.len()];
    let scale = T::of(scale);
    p.par_chunks_mut(s * ROWS).zip(x.par_chunks(s * ROWS)).enumerate().for_each(|(c, (p, x))| {
        with_simd(
            #[inline(always)]
            || {
                for (i, (pr, xr)) in p.chunks_exact_mut(s).zip(x.chunks_exact(s)).enumerate() {
                    let q = (c * ROWS + i) % t;
                    let n = q + 1 + (s - t);
                    // Three separate loops, so that the exponentials vectorise (a running sum in
                    // the same loop would serialise them).
                    let m = max(&xr[..n]) * scale;
                    for j in 0..n {
                        pr[j] = (xr[j] * scale - m).exp_v();
                    }
                    let inv = T::one() / sum(&pr[..n]);
                    for v in &mut pr[..n] {
                        *v = *v * inv;
                    }
                }
            },
        )
    });
    p
}

/// `∂x` of [`forward`] from the probabilities it returned.
pub fn backward<T: Real>(dp: &[T], p: &[T], t: usize, s: usize, scale: f64) -> Vec<T> {
    let mut dx = vec![T::zero(); p.len()];
    let scale = T::of(scale);
    dx.par_chunks_mut(s * ROWS).zip(dp.par_chunks(s * ROWS).zip(p.par_chunks(s * ROWS))).enumerate().for_each(
        |(c, (dx, (dp, p)))| {
            with_simd(
                #[inline(always)]
                || {
                    for (i, (dxr, (dpr, pr))) in
                        dx.chunks_exact_mut(s).zip(dp.chunks_exact(s).zip(p.chunks_exact(s))).enumerate()
                    {
                        let q = (c * ROWS + i) % t;
                        let n = q + 1 + (s - t);
                        let inner = dot(&pr[..n], &dpr[..n]);
                        for j in 0..n {
                            dxr[j] = scale * pr[j] * (dpr[j] - inner);
                        }
                    }
                },
            )
        },
    );
    dx
}
