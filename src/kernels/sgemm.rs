//! `C = A B` in f32 by a packed AVX2 + FMA kernel in the BLIS scheme, for the fused path's
//! matmuls on x86-64 (the gemm crate stays the path for f64 and for CPUs without AVX2).
//!
//! - The register tile is 6 × 16: 12 ymm accumulators, 2 aligned loads of `B` and 6 broadcasts
//!   of `A` per step of `k`. It reaches 95 GFLOP/s on one core of the 2-core AMD EPYC (Zen 3)
//!   VM from L1, the core's FMA limit at its ~3 GHz.
//! - `B` is packed into 64-byte aligned panels of [`KC`] × [`NR`] (one panel row is one cache
//!   line, a panel stays in L1), at most 4096 columns at a time; a column-major `B` (`Kᵀ`,
//!   `Wᵀ`) is turned by 8 × 8 register transposes.
//! - A row-major `A` is not packed: the tile reads its six rows in place, six sequential
//!   streams. Any other `A` (a weight gradient's `Xᵀ`) is packed in blocks of [`MC`] × [`KC`],
//!   which stay in L2 while every `B` panel passes.
//! - Threads: with `A` in place each thread packs and multiplies its own columns of `C`, one
//!   parallel region and nothing packed twice; with `A` packed the threads first pack `B`
//!   together, then take bands of rows.
//! - The first `k` block stores its tile and later ones add to it, so `C` is never cleared.
//!
//! Sums run in a fixed order (by `k` blocks, each a sequential FMA chain per output) that does
//! not depend on the thread count: the result is bit-identical run to run and across threads.
//!
//! Measured in the reference model's train step: the products reach 120–155 GFLOP/s on the
//! 2 cores, where the gemm crate's reached 85–130; PyTorch's MKL reaches 125–175.
//!
//! # Shapes
//! - `a`: `m × k`, `b`: `k × n`, each read through a row and a column stride;
//! - `c`: `m × n`, row-major with row stride `ldc`, written (never read before written).

// Every function here is unsafe with one contract, stated on `sgemm`: the operands' bounds are
// the caller's. Marking each pointer step again inside would add noise, not safety.
#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;
use std::mem::MaybeUninit;
use std::ops::Range;

/// Rows of `C` per register tile.
pub const MR: usize = 6;
/// Columns of `C` per register tile (two ymm registers).
pub const NR: usize = 16;
/// Depth of a packed block: a `B` panel (`KC × NR`, 16 KiB) stays in L1.
const KC: usize = 256;
/// Rows of a packed `A` block (`MC × KC`, 72 KiB), reused from L2 by every `B` panel.
const MC: usize = 72;

/// A read-only matrix: element `(i, j)` is at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy, Debug)]
pub struct View {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

// SAFETY: a view is only read, and the caller of `sgemm` guarantees its storage outlives the call.
unsafe impl Send for View {}
unsafe impl Sync for View {}

/// One cache line of floats: the unit of the packed buffers, so they are 64-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// An aligned buffer of at least `floats` floats, uninitialised: packing writes every float
/// the kernel reads, padding included (zeroing it first would be one more pass).
fn aligned(floats: usize) -> Vec<MaybeUninit<Line>> {
    let mut v = Vec::with_capacity(floats.div_ceil(16));
    // SAFETY: `MaybeUninit` needs no initialisation.
    unsafe { v.set_len(floats.div_ceil(16)) };
    v
}

/// Whether this CPU runs the kernel (AVX2 and FMA).
pub fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// `C = A B` (`m × k` by `k × n`) into `c` (row stride `ldc`), split over the rayon pool when
/// `parallel`.
///
/// # Safety
/// Every element of `a` (`m × k`) and `b` (`k × n`) must be readable, the `m` rows of `n`
/// floats at `c` (stride `ldc ≥ n`) writable and not read or written by anyone else meanwhile,
/// and the CPU must have AVX2 and FMA ([`available`]).
pub unsafe fn sgemm(a: View, b: View, c: *mut f32, ldc: usize, [m, k, n]: [usize; 3], parallel: bool) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            std::ptr::write_bytes(c.add(i * ldc), 0, n);
        }
        return;
    }
    let panels = n.div_ceil(NR);
    let threads = if parallel { rayon::current_num_threads().min(panels.max(m.div_ceil(MR))) } else { 1 };
    let out = Out(c);
    if threads > 1 && a.cs == 1 && panels >= threads {
        // `A` read in place: each thread packs the panels of its own columns and uses them, one
        // parallel region (no hand-off between packing and product).
        let per = panels.div_ceil(threads);
        for_each_thread(threads, |t| {
            for cols in chunks(t * per..panels.min((t + 1) * per)) {
                let (_buf, packed) = PackedB::new(k, n, cols.clone());
                pack_panels(packed, b, cols.clone());
                product(a, packed, out, ldc, 0..m, cols);
            }
        });
        return;
    }
    // `A` packed per thread: bands of rows, after all threads have packed `B` together.
    let band = m.div_ceil(threads).div_ceil(MR) * MR;
    for cols in chunks(0..panels) {
        let (_buf, packed) = PackedB::new(k, n, cols.clone());
        let per = cols.len().div_ceil(threads);
        let share = |t: usize| cols.start + t * per..cols.end.min(cols.start + (t + 1) * per);
        for_each_thread(threads, |t| pack_panels(packed, b, share(t)));
        for_each_thread(threads, |t| product(a, packed, out, ldc, t * band..m.min((t + 1) * band), cols.clone()));
    }
}

/// `f(0)`, …, `f(threads − 1)`: on the rayon pool, or inline for one.
fn for_each_thread(threads: usize, f: impl Fn(usize) + Sync + Send) {
    use rayon::prelude::*;
    if threads == 1 { f(0) } else { (0..threads).into_par_iter().for_each(f) }
}

/// Panels of `B` packed at once (4096 columns): the packed block is at most `k × 4096` floats
/// (8 MiB at `k` = 512) whatever `n`; a 50 257-word output layer would otherwise have a copy of
/// its whole weight matrix packed on every call.
const NC_PANELS: usize = 256;

/// `panels` cut into runs of at most [`NC_PANELS`].
fn chunks(panels: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    let end = panels.end;
    panels.step_by(NC_PANELS).map(move |p| p..end.min(p + NC_PANELS))
}

/// Panels `first..first + count` of `B` (`k × n`) packed: for each block of [`KC`] rows, the
/// panels' `kc × NR` floats one after another, each panel row one aligned cache line, columns
/// past `n` zero.
#[derive(Clone, Copy)]
struct PackedB {
    ptr: *mut f32,
    k: usize,
    n: usize,
    first: usize,
    count: usize,
}

// SAFETY: threads write disjoint panels while packing, and only read afterwards.
unsafe impl Send for PackedB {}
unsafe impl Sync for PackedB {}

impl PackedB {
    /// Room for `panels` of a `k × n` `B`, and the buffer that owns it (keep it alive).
    fn new(k: usize, n: usize, panels: Range<usize>) -> (Vec<MaybeUninit<Line>>, PackedB) {
        let mut buf = aligned(k * panels.len() * NR);
        let packed = PackedB { ptr: buf.as_mut_ptr().cast(), k, n, first: panels.start, count: panels.len() };
        (buf, packed)
    }

    /// Panel `p` (of the whole `B`; one of this pack's) of the block starting at row `k0`.
    fn panel(self, k0: usize, p: usize) -> *mut f32 {
        let kc = KC.min(self.k - k0);
        // SAFETY: inside the `k · count · NR` floats allocated, for `p` in `first..first + count`.
        unsafe { self.ptr.add(k0 * self.count * NR + (p - self.first) * kc * NR) }
    }
}

/// The output pointer, shared by threads writing disjoint bands of rows.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: see `sgemm`: each band of rows is written by one thread.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// Every block of `B`'s panels `panels` (of [`NR`] columns each).
unsafe fn pack_panels(packed: PackedB, b: View, panels: Range<usize>) {
    for k0 in (0..packed.k).step_by(KC) {
        for p in panels.clone() {
            pack_b(packed.panel(k0, p), b, k0, KC.min(packed.k - k0), p * NR, NR.min(packed.n - p * NR));
        }
    }
}

/// One `kc × NR` panel of `B` from rows `k0..` and columns `j0..j0 + cols`, zero past `cols`,
/// read along whichever axis is contiguous.
#[inline(always)]
unsafe fn pack_b(dst: *mut f32, b: View, k0: usize, kc: usize, j0: usize, cols: usize) {
    let src = b.ptr.offset(k0 as isize * b.rs + j0 as isize * b.cs);
    if b.cs == 1 && cols == NR {
        for l in 0..kc {
            std::ptr::copy_nonoverlapping(src.offset(l as isize * b.rs), dst.add(l * NR), NR);
        }
    } else if b.rs == 1 && cols == NR {
        pack_b_transposed(dst, src, b.cs, kc);
    } else if b.rs.abs() < b.cs.abs() {
        for j in 0..NR {
            let col = src.offset(j as isize * b.cs);
            for l in 0..kc {
                *dst.add(l * NR + j) = if j < cols { *col.offset(l as isize * b.rs) } else { 0.0 };
            }
        }
    } else {
        for l in 0..kc {
            let row = src.offset(l as isize * b.rs);
            for j in 0..NR {
                *dst.add(l * NR + j) = if j < cols { *row.offset(j as isize * b.cs) } else { 0.0 };
            }
        }
    }
}

/// A full panel of a column-major `B` (`B[l, j]` at `src + l + j·cs`): 8 × 8 blocks turned by
/// register transposes, so each column is read in ymm loads rather than one float at a time
/// (`Kᵀ` in attention's scores and every `∂Y Wᵀ` have this layout).
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_b_transposed(dst: *mut f32, src: *const f32, cs: isize, kc: usize) {
    let full = kc / 8 * 8;
    for l in (0..full).step_by(8) {
        for half in 0..2 {
            let col = |j: usize| _mm256_loadu_ps(src.offset((half * 8 + j) as isize * cs + l as isize));
            let rows = transpose8([col(0), col(1), col(2), col(3), col(4), col(5), col(6), col(7)]);
            for (i, row) in rows.into_iter().enumerate() {
                _mm256_store_ps(dst.add((l + i) * NR + half * 8), row);
            }
        }
    }
    for l in full..kc {
        for j in 0..NR {
            *dst.add(l * NR + j) = *src.offset(j as isize * cs + l as isize);
        }
    }
}

/// The transpose of an 8 × 8 block held as eight rows.
#[inline(always)]
unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// `A`'s rows `i0..i0 + mc`, columns `k0..k0 + kc`, as micro-panels of `MR` rows (`kc × MR`
/// floats each, rows past `mc` zero).
#[inline(always)]
unsafe fn pack_a(dst: *mut f32, a: View, i0: usize, mc: usize, k0: usize, kc: usize) {
    for (q, r0) in (0..mc).step_by(MR).enumerate() {
        let panel = dst.add(q * MR * kc);
        let src = a.ptr.offset((i0 + r0) as isize * a.rs + k0 as isize * a.cs);
        let rows = MR.min(mc - r0);
        if rows == MR && a.rs == 1 {
            // A transposed (a weight gradient's `Xᵀ`): each step of `k` is six adjacent floats.
            for l in 0..kc {
                std::ptr::copy_nonoverlapping(src.offset(l as isize * a.cs), panel.add(l * MR), MR);
            }
        } else if rows == MR {
            let row: [*const f32; MR] = std::array::from_fn(|r| src.offset(r as isize * a.rs));
            for l in 0..kc {
                for (r, p) in row.iter().enumerate() {
                    *panel.add(l * MR + r) = *p.offset(l as isize * a.cs);
                }
            }
        } else {
            for l in 0..kc {
                for r in 0..MR {
                    let v = if r < rows { *src.offset(r as isize * a.rs + l as isize * a.cs) } else { 0.0 };
                    *panel.add(l * MR + r) = v;
                }
            }
        }
    }
}

/// `C[rows, panels]`, block of `k` by block. A row-major `A` is read in place (its rows are six
/// sequential streams the prefetcher follows); any other layout is packed first.
unsafe fn product(a: View, b: PackedB, c: Out, ldc: usize, rows: Range<usize>, panels: Range<usize>) {
    let (lo, hi) = (rows.start, rows.end);
    let mut apack = aligned(if a.cs == 1 { 0 } else { MC * KC });
    let ap: *const f32 = apack.as_mut_ptr().cast();
    for k0 in (0..b.k).step_by(KC) {
        let kc = KC.min(b.k - k0);
        for i0 in (lo..hi).step_by(MC) {
            let mc = MC.min(hi - i0);
            let at = [i0, mc, k0];
            if a.cs == 1 {
                let base = a.ptr.add(k0);
                // Rows past the last (`rows < MR`) repeat it: read, computed, never stored.
                let rows = |r0: usize, rows: usize| -> [*const f32; MR] {
                    std::array::from_fn(|r| base.offset((i0 + r0 + r.min(rows - 1)) as isize * a.rs))
                };
                block::<1>(rows, b, panels.clone(), c, ldc, at);
            } else {
                pack_a(ap.cast_mut(), a, i0, mc, k0, kc);
                let rows = |r0: usize, _| -> [*const f32; MR] { std::array::from_fn(|r| ap.add(r0 * kc + r)) };
                block::<MR>(rows, b, panels.clone(), c, ldc, at);
            }
        }
    }
}

/// Every 6 × 16 tile of rows `i0..i0 + mc` against every panel of `B`'s block at `k0`, the
/// tile's `A` rows given by `rows(r0, valid rows)` and stepping by `STEP` floats per `k`.
#[inline(always)]
unsafe fn block<const STEP: usize>(
    rows: impl Fn(usize, usize) -> [*const f32; MR],
    b: PackedB,
    panels: Range<usize>,
    c: Out,
    ldc: usize,
    [i0, mc, k0]: [usize; 3],
) {
    let (kc, add) = (KC.min(b.k - k0), k0 > 0);
    for p in panels {
        let (bp, cols) = (b.panel(k0, p), NR.min(b.n - p * NR));
        for r0 in (0..mc).step_by(MR) {
            let valid = MR.min(mc - r0);
            let (ta, ct) = (rows(r0, valid), c.0.add((i0 + r0) * ldc + p * NR));
            if valid == MR && cols == NR {
                tile::<STEP>(kc, ta, bp, ct, ldc, add);
            } else {
                let mut buf = [Line([0.0; 16]); MR];
                tile::<STEP>(kc, ta, bp, buf.as_mut_ptr().cast(), NR, false);
                for (r, line) in buf.iter().enumerate().take(valid) {
                    for j in 0..cols {
                        let d = ct.add(r * ldc + j);
                        *d = if add { *d + line.0[j] } else { line.0[j] };
                    }
                }
            }
        }
    }
}

/// The 6 × 16 register tile: `C[0..6, 0..16] (+)= Σ_l A[·, l] B[l, ·]` over `kc` steps, row `r`
/// of `A` read at `a[r] + l·STEP` (a packed micro-panel, or rows in place) and `B` from an
/// aligned panel (`kc × 16`).
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const STEP: usize>(kc: usize, a: [*const f32; MR], b: *const f32, c: *mut f32, ldc: usize, add: bool) {
    for r in 0..MR {
        _mm_prefetch::<_MM_HINT_T0>(c.add(r * ldc).cast());
        _mm_prefetch::<_MM_HINT_T0>(c.add(r * ldc + NR - 1).cast());
    }
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    for l in 0..kc {
        let b0 = _mm256_load_ps(b.add(l * NR));
        let b1 = _mm256_load_ps(b.add(l * NR + 8));
        for (row, ar) in acc.iter_mut().zip(a) {
            let x = _mm256_broadcast_ss(&*ar.add(l * STEP));
            row[0] = _mm256_fmadd_ps(x, b0, row[0]);
            row[1] = _mm256_fmadd_ps(x, b1, row[1]);
        }
    }
    for (r, row) in acc.iter().enumerate() {
        let d = c.add(r * ldc);
        if add {
            _mm256_storeu_ps(d, _mm256_add_ps(_mm256_loadu_ps(d), row[0]));
            _mm256_storeu_ps(d.add(8), _mm256_add_ps(_mm256_loadu_ps(d.add(8)), row[1]));
        } else {
            _mm256_storeu_ps(d, row[0]);
            _mm256_storeu_ps(d.add(8), row[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix stored with any strides inside a padded buffer of small integers, so that every
    /// product and partial sum below is exact in f32 whatever the order of additions.
    struct Stored {
        data: Vec<f32>,
        offset: usize,
        rs: isize,
        cs: isize,
    }

    impl Stored {
        /// `rows × cols`, laid out row-major, column-major, or with both strides padded.
        fn new(rows: usize, cols: usize, layout: &str, seed: usize) -> Stored {
            let (rs, cs) = match layout {
                "row" => (cols as isize, 1),
                "col" => (1, rows as isize),
                _ => (2 * cols as isize + 3, 2),
            };
            let offset = 5;
            let len = offset + (rows.max(1) - 1) * rs as usize + (cols.max(1) - 1) * cs as usize + 1;
            let data = (0..len).map(|i| ((i * 7 + seed * 13) % 9) as f32 - 4.0).collect();
            Stored { data, offset, rs, cs }
        }

        fn at(&self, i: usize, j: usize) -> f32 {
            self.data[self.offset + i * self.rs as usize + j * self.cs as usize]
        }

        fn view(&self) -> View {
            View { ptr: self.data[self.offset..].as_ptr(), rs: self.rs, cs: self.cs }
        }
    }

    fn product(a: &Stored, b: &Stored, [m, k, n]: [usize; 3], parallel: bool) -> Vec<f32> {
        let mut c = vec![f32::NAN; m * n];
        // SAFETY: `Stored::new` sized each buffer for its view; `c` holds `m × n`.
        unsafe { sgemm(a.view(), b.view(), c.as_mut_ptr(), n, [m, k, n], parallel) };
        c
    }

    #[test]
    fn every_layout_and_edge_matches_the_definition_exactly() {
        if !available() {
            return;
        }
        // m off the 6-row tile, n off the 16-column panel, k over two blocks of 256 and off
        // the 8-row transpose; a 1-row, 1-column and depth-1 product; n over one packed run of
        // 4096 columns; alone and on 2 threads.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for [m, k, n] in [[37, 531, 45], [64, 64, 256], [1, 300, 1], [13, 1, 33], [7, 9, 4129]] {
            for (la, lb) in [("row", "row"), ("row", "col"), ("col", "row"), ("pad", "col"), ("col", "pad")] {
                let (a, b) = (Stored::new(m, k, la, 1), Stored::new(k, n, lb, 2));
                for parallel in [false, true] {
                    let c = pool.install(|| product(&a, &b, [m, k, n], parallel));
                    for (ij, &got) in c.iter().enumerate() {
                        let (i, j) = (ij / n, ij % n);
                        let want: f32 = (0..k).map(|l| a.at(i, l) * b.at(l, j)).sum();
                        assert_eq!(got, want, "{m}×{k}×{n}, A {la}, B {lb}, parallel {parallel}: C[{i}, {j}]");
                    }
                }
            }
        }
    }

    #[test]
    fn the_result_does_not_depend_on_the_thread_count() {
        if !available() {
            return;
        }
        // Fractional values, so that the order of additions shows in the last bits: alone, on
        // 2 and on 3 threads, with `A` read in place (column split) and packed (row split).
        let frac =
            |len: usize, s: usize| -> Vec<f32> { (0..len).map(|i| ((i * 37 + s) % 101) as f32 / 37.0 - 1.3).collect() };
        let [m, k, n] = [50, 700, 70];
        let (a, b) = (frac(m * k, 1), frac(k * n, 2));
        for (rs, cs) in [(k as isize, 1), (1, m as isize)] {
            let run = |threads: usize, parallel: bool| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut c = vec![0f32; m * n];
                let (av, bv) = (View { ptr: a.as_ptr(), rs, cs }, View { ptr: b.as_ptr(), rs: n as isize, cs: 1 });
                // SAFETY: `a` and `b` hold `m × k` and `k × n` in these layouts, `c` holds `m × n`.
                pool.install(|| unsafe { sgemm(av, bv, c.as_mut_ptr(), n, [m, k, n], parallel) });
                c
            };
            let alone = run(1, false);
            assert_eq!(run(2, true), alone);
            assert_eq!(run(3, true), alone);
        }
    }

    #[test]
    fn an_empty_depth_gives_zeros_and_leaves_the_row_padding() {
        if !available() {
            return;
        }
        // `ldc` 4 > n 3: the padding column is not C's and must keep its value.
        let mut c = vec![7f32; 8];
        let zero = [0f32; 1];
        let v = View { ptr: zero.as_ptr(), rs: 1, cs: 1 };
        // SAFETY: k = 0 reads nothing; `c` holds 2 rows of stride 4.
        unsafe { sgemm(v, v, c.as_mut_ptr(), 4, [2, 0, 3], false) };
        assert_eq!(c, [0.0, 0.0, 0.0, 7.0, 0.0, 0.0, 0.0, 7.0]);
    }
}
