//! Causal attention in one operation, flash-style on the CPU: blocked over [`BLOCK`] query
//! rows, each block against only the keys it may see (the fully masked blocks above the
//! diagonal are never computed), saving one log-sum-exp per query instead of the `T × S`
//! probabilities. For one (batch, head) pair, scale `s`, query block `i` and its keys `< e_i`:
//!
//! ```text
//! S_i = Q_i K_{<e_i}ᵀ     P_i = causal softmax(s·S_i)     O_i = P_i V_{<e_i}
//! ℓ_r = m_r + ln Σ_{j ≤ r+o} exp(s·S_rj − m_r)          (m_r the row maximum)
//! ```
//!
//! Backward recomputes `P_i = exp(s·S_i − ℓ)` (zero above the diagonal) block by block:
//!
//! ```text
//! D_r = ∂O_r · O_r     ∂P_i = ∂O_i V_{<e_i}ᵀ     ∂S = s · P ⊙ (∂P − D)
//! ∂Q_i = ∂S_i K_{<e_i}     ∂K_j = ∂S_{≥j, j}ᵀ Q_{≥j}     ∂V_j = P_{≥j, j}ᵀ ∂O_{≥j}
//! ```
//!
//! where key block `j` holds the keys first seen by query block `j` (block 0 also the `o`
//! cached ones), so only query blocks `≥ j` touch it. Each pair runs on one thread, its
//! products by [`strided::product`]; the pairs are spread over the pool.
//!
//! # Shapes
//! - `q`: `[B, H, T, h]`, `k`, `v`: `[B, H, S, h]` with `S ≥ T` (the `o = S − T` first keys are
//!   cached keys every query sees), any strides.
//! - `o`, `∂q`: written as `[B, T, H, h]` storage, `∂k`, `∂v` as `[B, S, H, h]` (the layout of
//!   the projections they come from and go to); `ℓ`: `[B, H, T]`.
// The pair functions are `unsafe fn`s made of raw-pointer products; their contracts cover the
// whole body.
#![allow(unsafe_op_in_unsafe_fn)]

use super::simd::{Real, max, sum, with_simd};
use super::strided::{Mat, SendPtr, Strided, product};
use rayon::prelude::*;

/// Query rows per block (64 measured best on the reference model against 32 and 128).
pub const BLOCK: usize = 64;

/// The sizes of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub batch: usize,
    pub heads: usize,
    /// Queries `T` and keys `S ≥ T`.
    pub t: usize,
    pub s: usize,
    /// Head width.
    pub h: usize,
}

impl Shape {
    fn pairs(&self) -> usize {
        self.batch * self.heads
    }

    /// The row stride of the `[B, ·, H, h]` outputs, and the offset of pair `p`'s first row
    /// in an output of `rows` rows per batch element.
    fn out_at(&self, p: usize, rows: usize) -> (usize, usize) {
        let ld = self.heads * self.h;
        (ld, (p / self.heads) * rows * ld + (p % self.heads) * self.h)
    }

    /// Query block `i`: its first row, its rows, and the keys it sees (`e_i`).
    fn block(&self, i: usize) -> (usize, usize, usize) {
        let (r0, len) = (i * BLOCK, BLOCK.min(self.t - i * BLOCK));
        (r0, len, self.s - self.t + r0 + len)
    }
}

/// Pair `p`'s `rows × h` matrix of a `[B, H, rows, h]` operand.
fn pair<T>(x: &Strided<T>, sh: &Shape, p: usize) -> Mat<T> {
    Mat { ptr: x.data.as_ptr().wrapping_offset(x.start(p, &[sh.batch, sh.heads])), rs: x.rows, cs: x.cols }
}

/// The forward pass: `(o, ℓ)` (see the module doc for layouts).
pub fn forward<T: Real>(q: Strided<T>, k: Strided<T>, v: Strided<T>, sh: Shape, scale: f64) -> (Vec<T>, Vec<T>) {
    let batches = [sh.batch, sh.heads];
    q.check(&batches, sh.t, sh.h);
    k.check(&batches, sh.s, sh.h);
    v.check(&batches, sh.s, sh.h);
    let mut o: Vec<T> = Vec::with_capacity(sh.batch * sh.t * sh.heads * sh.h);
    let mut lse = vec![T::zero(); sh.pairs() * sh.t];
    let dst = SendPtr(o.as_mut_ptr());
    lse.par_chunks_mut(sh.t.max(1)).enumerate().for_each_init(Vec::new, |scores, (p, lse)| {
        let (ld, at) = sh.out_at(p, sh.t);
        // SAFETY: `check` bounds the operands; pair `p`'s rows of `o` are written by this task
        // alone.
        unsafe {
            forward_pair(pair(&q, &sh, p), pair(&k, &sh, p), pair(&v, &sh, p), (dst.at(at), ld), lse, sh, scale, scores)
        };
    });
    // SAFETY: every pair wrote its `T` rows of `h` values.
    unsafe { o.set_len(o.capacity()) };
    (o, lse)
}

/// One pair's forward, block by block; `scores` is reused scratch.
///
/// # Safety
/// `q`, `k`, `v` readable as `T × h`, `S × h`, `S × h`; `o` (`T` rows at stride `ld`) writable.
#[allow(clippy::too_many_arguments)]
unsafe fn forward_pair<T: Real>(
    q: Mat<T>,
    k: Mat<T>,
    v: Mat<T>,
    (o, ld): (*mut T, usize),
    lse: &mut [T],
    sh: Shape,
    scale: f64,
    scores: &mut Vec<T>,
) {
    for i in 0..sh.t.div_ceil(BLOCK) {
        let (r0, len, e) = sh.block(i);
        scores.resize(len * e, T::zero());
        product(q.rows_from(r0), k.t(), scores.as_mut_ptr(), e, [len, sh.h, e]);
        with_simd(
            #[inline(always)]
            || {
                for (r, row) in scores.chunks_exact_mut(e).enumerate() {
                    lse[r0 + r] = softmax_row(row, e - len + r + 1, T::of(scale));
                }
            },
        );
        product(Mat::dense(scores.as_ptr(), e), v, o.add(r0 * ld), ld, [len, e, sh.h]);
    }
}

/// `row[..n] ← softmax(s·row[..n])`, `row[n..] ← 0`; returns the log-sum-exp `ℓ` of `s·row[..n]`.
#[inline(always)]
fn softmax_row<T: Real>(row: &mut [T], n: usize, s: T) -> T {
    // Separate loops, so that the exponentials vectorise.
    let m = max(&row[..n]) * s;
    for x in &mut row[..n] {
        *x = (*x * s - m).exp_v();
    }
    let total = sum(&row[..n]);
    let inv = T::one() / total;
    for x in &mut row[..n] {
        *x = *x * inv;
    }
    row[n..].fill(T::zero());
    m + T::of(total.as_f64().ln())
}

/// The saved forward of one call, for [`backward`].
pub struct Saved<'a, T> {
    pub q: Strided<'a, T>,
    pub k: Strided<'a, T>,
    pub v: Strided<'a, T>,
    pub o: Strided<'a, T>,
    pub lse: &'a [T],
}

/// The backward pass: `[∂q, ∂k, ∂v]` from `∂o` (see the module doc for layouts).
pub fn backward<T: Real>(f: &Saved<T>, d_o: Strided<T>, sh: Shape, scale: f64) -> [Vec<T>; 3] {
    let batches = [sh.batch, sh.heads];
    f.o.check(&batches, sh.t, sh.h);
    d_o.check(&batches, sh.t, sh.h);
    assert_eq!(f.lse.len(), sh.pairs() * sh.t, "one log-sum-exp per query");
    let sizes = [sh.t, sh.s, sh.s].map(|rows| sh.batch * rows * sh.heads * sh.h);
    if sh.t == 0 {
        return sizes.map(|n| vec![T::zero(); n]);
    }
    let mut out: [Vec<T>; 3] = sizes.map(Vec::with_capacity);
    let dst = out.each_mut().map(|o| SendPtr(o.as_mut_ptr()));
    (0..sh.pairs()).into_par_iter().for_each_init(Scratch::default, |scratch, p| {
        let (ld, [aq, ak]) = (sh.heads * sh.h, [sh.t, sh.s].map(|rows| sh.out_at(p, rows).1));
        let grads = [(dst[0].at(aq), ld), (dst[1].at(ak), ld), (dst[2].at(ak), ld)];
        let m = [f.q, f.k, f.v, f.o, d_o].map(|x| pair(&x, &sh, p));
        // SAFETY: operands bounds-checked; pair `p`'s rows of the outputs are its own.
        unsafe { backward_pair(m, &f.lse[p * sh.t..(p + 1) * sh.t], grads, sh, scale, scratch) };
    });
    for (o, n) in out.iter_mut().zip(sizes) {
        // SAFETY: every pair wrote all its rows (key block 0 starts at key 0, the last ends at S).
        unsafe { o.set_len(n) };
    }
    out
}

/// One pair's probabilities and score gradients, `T × S` each (row stride `S`).
#[derive(Default)]
struct Scratch<T> {
    p: Vec<T>,
    ds: Vec<T>,
    d: Vec<T>,
}

/// One pair's backward: `m` = `[q, k, v, o, ∂o]`, `out` = `[∂q, ∂k, ∂v]` (pointer, row stride).
///
/// # Safety
/// As [`forward_pair`], for every operand and output.
unsafe fn backward_pair<T: Real>(
    [q, k, v, o, d_o]: [Mat<T>; 5],
    lse: &[T],
    [dq, dk, dv]: [(*mut T, usize); 3],
    sh: Shape,
    scale: f64,
    sc: &mut Scratch<T>,
) {
    let (s, scale) = (sh.s, T::of(scale));
    sc.p.resize(sh.t * s, T::zero());
    sc.ds.resize(sh.t * s, T::zero());
    sc.d.clear();
    sc.d.extend((0..sh.t).map(|r| (0..sh.h).fold(T::zero(), |a, c| a + d_o.at(r, c) * o.at(r, c))));
    for i in 0..sh.t.div_ceil(BLOCK) {
        let (r0, len, e) = sh.block(i);
        let (p, ds) = (sc.p.as_mut_ptr().add(r0 * s), sc.ds.as_mut_ptr().add(r0 * s));
        product(q.rows_from(r0), k.t(), p, s, [len, sh.h, e]);
        product(d_o.rows_from(r0), v.t(), ds, s, [len, sh.h, e]);
        with_simd(
            #[inline(always)]
            || {
                for r in 0..len {
                    let (pr, dr) = (&mut sc.p[(r0 + r) * s..][..e], &mut sc.ds[(r0 + r) * s..][..e]);
                    score_grads(pr, dr, e - len + r + 1, lse[r0 + r], sc.d[r0 + r], scale);
                }
            },
        );
        product(Mat::dense(ds, s), k, dq.0.add(r0 * dq.1), dq.1, [len, e, sh.h]);
    }
    for j in 0..sh.t.div_ceil(BLOCK) {
        let (r0, len, e) = sh.block(j);
        let k0 = if j == 0 { 0 } else { e - len };
        let (rows, keys) = (sh.t - r0, e - k0);
        let at = r0 * s + k0;
        // ∂V_j = P_{≥j, j}ᵀ ∂O_{≥j} and ∂K_j = ∂S_{≥j, j}ᵀ Q_{≥j}.
        for (left, right, (out, ld)) in [(&sc.p, d_o, dv), (&sc.ds, q, dk)] {
            product(
                Mat::dense(left.as_ptr().add(at), s).t(),
                right.rows_from(r0),
                out.add(k0 * ld),
                ld,
                [keys, rows, sh.h],
            );
        }
    }
}

/// One query row: `p ← exp(s·p − ℓ)` on the `n` visible keys and 0 after them, then
/// `∂s ← s · p ⊙ (∂p − D)` in place of `∂p`.
#[inline(always)]
fn score_grads<T: Real>(p: &mut [T], dp: &mut [T], n: usize, lse: T, d: T, s: T) {
    for x in &mut p[..n] {
        *x = (*x * s - lse).exp_v();
    }
    p[n..].fill(T::zero());
    for (g, &pv) in dp.iter_mut().zip(p.iter()) {
        *g = s * pv * (*g - d);
    }
}
