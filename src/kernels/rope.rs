//! Rotary position embeddings in one pass instead of the narrow/cat copies of the composite
//! `model::base::rope::apply` (rotate-half convention, the same tables):
//!
//! ```text
//! y₁ = x₁ cos − x₂ sin,   y₂ = x₂ cos + x₁ sin        (x = [x₁, x₂] split in halves)
//! ∂x₁ = ∂y₁ cos + ∂y₂ sin,   ∂x₂ = ∂y₂ cos − ∂y₁ sin  (the inverse rotation)
//! ```
//!
//! # Shapes
//! - `x`, `y`: `[B, T, n, h]` flat (positions before heads, as the projections produce them)
//! - `cos`, `sin`: `[T, h/2]`

use super::simd::{Real, with_simd};
use rayon::prelude::*;

/// Rotates `x`; `inverse` applies the transpose rotation (the backward pass).
pub fn rotate<T: Real>(x: &[T], t: usize, heads: usize, h: usize, cos: &[T], sin: &[T], inverse: bool) -> Vec<T> {
    assert!(
        h.is_multiple_of(2) && x.len().is_multiple_of((heads * h).max(1)),
        "RoPE rotates whole rows of even-width heads"
    );
    let half = h / 2;
    let mut out = Vec::with_capacity(x.len());
    let y = &mut out.spare_capacity_mut()[..x.len()];
    let row = heads * h;
    y.par_chunks_mut(row * 16).zip(x.par_chunks(row * 16)).enumerate().for_each(|(c, (y, x))| {
        with_simd(
            #[inline(always)]
            || {
                for (i, (yr, xr)) in y.chunks_exact_mut(row).zip(x.chunks_exact(row)).enumerate() {
                    let pos = (c * 16 + i) % t;
                    let (cs, sn) = (&cos[pos * half..(pos + 1) * half], &sin[pos * half..(pos + 1) * half]);
                    for (yh, xh) in yr.chunks_exact_mut(h).zip(xr.chunks_exact(h)) {
                        let (x1, x2) = xh.split_at(half);
                        let (y1, y2) = yh.split_at_mut(half);
                        for k in 0..half {
                            let s = if inverse { -sn[k] } else { sn[k] };
                            y1[k].write(x1[k] * cs[k] - x2[k] * s);
                            y2[k].write(x2[k] * cs[k] + x1[k] * s);
                        }
                    }
                }
            },
        )
    });
    // SAFETY: every row of `heads · h` values, both halves of every head, was written above
    // (asserted: whole rows, even `h`).
    unsafe { out.set_len(x.len()) };
    out
}
