//! SwiGLU's gate in one pass: `y = SiLU(a) ⊙ b = a σ(a) ⊙ b`.
//!
//! Backward, with `σ = 1/(1 + e^{−a})`:
//!
//! ```text
//! ∂a = ∂y ⊙ b ⊙ σ (1 + a (1 − σ))       ∂b = ∂y ⊙ a σ
//! ```
//!
//! # Shapes
//! `a`, `b`, `y` and the gradients: any shape, the same for all, as flat slices.

use super::simd::{Real, with_simd};
use rayon::prelude::*;

const CHUNK: usize = 1 << 14;

#[inline(always)]
fn sigmoid<T: Real>(a: T) -> T {
    T::one() / (T::one() + (-a).exp_v())
}

/// `SiLU(a) ⊙ b`.
pub fn forward<T: Real>(a: &[T], b: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len());
    let y = &mut out.spare_capacity_mut()[..a.len()];
    y.par_chunks_mut(CHUNK).zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK))).for_each(|(y, (a, b))| {
        with_simd(
            #[inline(always)]
            || {
                for i in 0..y.len() {
                    y[i].write(a[i] * sigmoid(a[i]) * b[i]);
                }
            },
        )
    });
    // SAFETY: the loop above wrote every element.
    unsafe { out.set_len(a.len()) };
    out
}

/// `(∂a, ∂b)` of [`forward`].
pub fn backward<T: Real>(dy: &[T], a: &[T], b: &[T]) -> (Vec<T>, Vec<T>) {
    let (mut da_out, mut db_out) = (Vec::with_capacity(a.len()), Vec::with_capacity(a.len()));
    let (da, db) = (&mut da_out.spare_capacity_mut()[..a.len()], &mut db_out.spare_capacity_mut()[..a.len()]);
    da.par_chunks_mut(CHUNK)
        .zip(db.par_chunks_mut(CHUNK))
        .zip(dy.par_chunks(CHUNK).zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK))))
        .for_each(|((da, db), (dy, (a, b)))| {
            with_simd(
                #[inline(always)]
                || {
                    for i in 0..da.len() {
                        let s = sigmoid(a[i]);
                        da[i].write(dy[i] * b[i] * s * (T::one() + a[i] * (T::one() - s)));
                        db[i].write(dy[i] * a[i] * s);
                    }
                },
            )
        });
    // SAFETY: the loop above wrote every element of both.
    unsafe { (da_out.set_len(a.len()), db_out.set_len(a.len())) };
    (da_out, db_out)
}
