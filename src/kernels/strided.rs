//! `C = A B` over the last two axes of strided operands, written straight into a fresh,
//! uninitialised output: in f32 on an AVX2 CPU by [`sgemm`](super::sgemm), else (f64, other
//! CPUs) by the gemm crate's packed kernel.
//!
//! burn-flex's matmul calls the gemm crate too, but its output is `FlexTensor::empty`: a zeroed
//! `Vec<u8>` that `Bytes` then copies once more into an aligned allocation, two passes over
//! fresh pages before the product writes a third; the measured cost on the reference model's
//! `2048 × 256 × 256` product was 4.0–5.6 ms against 2.1 ms for the kernel alone. Here the
//! output is one `Vec<T>` the kernel fills, and transposed or narrowed operands (`Kᵀ` in
//! attention, `Xᵀ` in a weight gradient) are read in place through their strides: both kernels
//! pack their panels from any strides, so no contiguous copy is made first.
//!
//! # Shapes
//! - `a`: `[…, m, k]`, `b`: `[…, k, n]` with equal batch axes (no broadcasting) → `[…, m, n]`,
//!   contiguous.

use super::simd::Real;
use rayon::prelude::*;

/// Products with fewer multiply-adds than this are not split (burn-flex's threshold: the
/// packing and the thread handoff cost more than the split saves below it).
const PARALLEL_MACS: usize = 192 * 192 * 192;

/// One operand: its storage and where each matrix element lives in it.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a, T> {
    pub data: &'a [T],
    /// Index of element `[0, …, 0]`.
    pub offset: usize,
    /// Stride of each batch axis (outermost first).
    pub batch: &'a [isize],
    /// Strides of the row and the column axis of each matrix.
    pub rows: isize,
    pub cols: isize,
}

impl<'a, T: 'static> Strided<'a, T> {
    /// The same view with elements read as `U`, the same type (checked).
    #[cfg(target_arch = "x86_64")]
    fn cast<U: 'static>(self) -> Strided<'a, U> {
        assert_eq!(std::any::TypeId::of::<T>(), std::any::TypeId::of::<U>(), "a cast to the same type only");
        // SAFETY: `T` and `U` are the same type.
        let data = unsafe { std::slice::from_raw_parts(self.data.as_ptr().cast::<U>(), self.data.len()) };
        Strided { data, offset: self.offset, batch: self.batch, rows: self.rows, cols: self.cols }
    }
}

impl<T> Strided<'_, T> {
    /// Index of element `[.., 0, 0]` of matrix `i` (row-major over `shape`).
    pub(crate) fn start(&self, i: usize, shape: &[usize]) -> isize {
        let (mut rest, mut at) = (i, self.offset as isize);
        for (&len, &stride) in shape.iter().zip(self.batch).rev() {
            at += (rest % len) as isize * stride;
            rest /= len;
        }
        at
    }

    /// Panics unless every element of every `r × c` matrix lies inside `data`: the bound
    /// that makes the unchecked reads of [`matmul`] sound (called only when there are elements
    /// to read).
    pub(crate) fn check(&self, shape: &[usize], r: usize, c: usize) {
        assert_eq!(self.batch.len(), shape.len(), "one stride per batch axis");
        let mut lo = self.offset as isize;
        let mut hi = lo;
        let extents = shape.iter().zip(self.batch).map(|(&n, &s)| (n, s)).chain([(r, self.rows), (c, self.cols)]);
        for (n, s) in extents {
            let span = (n.max(1) - 1) as isize * s;
            (lo, hi) = (lo + span.min(0), hi + span.max(0));
        }
        assert!(lo >= 0 && (hi as usize) < self.data.len(), "strided operand outside its storage");
    }
}

/// `a · b`: `[batch…, m, k] × [batch…, k, n]` → a contiguous `[batch…, m, n]`, as a flat
/// `Vec`. The work is cut into tasks, each one gemm call on one thread: a matrix per task in a
/// batch of small products, and a large product split into one band of rows (or columns, when
/// wider than tall) per thread. Measured on the reference shapes (2 cores, alone), bands beat
/// gemm's own threading by 2–10 % (in a whole train step the difference is below the noise).
pub fn matmul<T: Real>(a: Strided<T>, b: Strided<T>, batch: &[usize], [m, k, n]: [usize; 3]) -> Vec<T> {
    let count: usize = batch.iter().product();
    let len = count * m * n;
    if k == 0 || len == 0 {
        return vec![T::zero(); len];
    }
    a.check(batch, m, k);
    b.check(batch, k, n);
    let threads = rayon::current_num_threads();
    let split = m * n * k >= PARALLEL_MACS && count < 2 * threads;
    #[cfg(target_arch = "x86_64")]
    if let Some(out) = f32_matmul(&a, &b, batch, [m, k, n], split) {
        return out;
    }
    let mut out: Vec<T> = Vec::with_capacity(len);
    let dst = SendPtr(out.as_mut_ptr());
    let bands = if split { threads } else { 1 };
    let by_rows = m >= n;
    let (span, unit) = if by_rows { (m, ROWS) } else { (n, COLS) };
    let width = span.div_ceil(bands).div_ceil(unit) * unit;
    let task = |t: usize| {
        let (i, lo) = (t / bands, (t % bands) * width);
        let hi = span.min(lo + width);
        if lo >= hi {
            return;
        }
        let (r0, c0, rows, cols) = if by_rows { (lo, 0, hi - lo, n) } else { (0, lo, m, hi - lo) };
        let at = |x: &Strided<T>, band: isize| Mat {
            ptr: x.data.as_ptr().wrapping_offset(x.start(i, batch) + band),
            rs: x.rows,
            cs: x.cols,
        };
        // SAFETY: `check` bounds every operand element inside its slice; band (r0.., c0..) of
        // matrix `i` of the output lies inside the `len` allocated elements and is written by
        // this task alone.
        unsafe {
            product(
                at(&a, r0 as isize * a.rows),
                at(&b, c0 as isize * b.cols),
                dst.at(i * m * n + r0 * n + c0),
                n,
                [rows, k, cols],
            )
        }
    };
    (0..count * bands).into_par_iter().for_each(task);
    // SAFETY: the tasks above wrote every element of all `count` matrices.
    unsafe { out.set_len(len) };
    out
}

/// [`matmul`] by [`sgemm_all`] when `T` is f32 and the CPU has the kernel; `None` otherwise.
#[cfg(target_arch = "x86_64")]
fn f32_matmul<T: Real>(
    a: &Strided<T>,
    b: &Strided<T>,
    batch: &[usize],
    mkn: [usize; 3],
    split: bool,
) -> Option<Vec<T>> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() || !super::sgemm::available() {
        return None;
    }
    let len = batch.iter().product::<usize>() * mkn[0] * mkn[2];
    let mut out: Vec<T> = Vec::with_capacity(len);
    let dst = SendPtr(out.as_mut_ptr());
    // SAFETY: `check` bounded every operand element (in `matmul`); `T` is `f32`, so the casts
    // are identities, and the output holds the `len` elements `sgemm_all` writes.
    unsafe { sgemm_all(a.cast(), b.cast(), batch, mkn, SendPtr(dst.0.cast()), split) };
    // SAFETY: `sgemm_all` wrote every element of all the matrices.
    unsafe { out.set_len(len) };
    Some(out)
}

/// The f32 path: each matrix by [`sgemm`](super::sgemm::sgemm), one after another and split
/// over the threads when `split`, else a matrix per thread.
///
/// # Safety
/// `a` and `b` are bounds-checked for `batch`, and `dst` has room for every product.
#[cfg(target_arch = "x86_64")]
unsafe fn sgemm_all(
    a: Strided<f32>,
    b: Strided<f32>,
    batch: &[usize],
    [m, k, n]: [usize; 3],
    dst: SendPtr<f32>,
    split: bool,
) {
    use super::sgemm::{View, sgemm};
    let view = |s: Strided<f32>, i: usize| View {
        ptr: s.data.as_ptr().wrapping_offset(s.start(i, batch)),
        rs: s.rows,
        cs: s.cols,
    };
    // SAFETY: the caller's bounds; matrix `i` of the output is written by this call alone.
    let one = |i: usize| unsafe { sgemm(view(a, i), view(b, i), dst.at(i * m * n), n, [m, k, n], split) };
    let count: usize = batch.iter().product();
    if split { (0..count).for_each(one) } else { (0..count).into_par_iter().for_each(one) }
}

/// One matrix in memory: element `(i, j)` at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy, Debug)]
pub struct Mat<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

// SAFETY: a `Mat` is only read, through `product` and `at`, whose callers vouch for the memory.
unsafe impl<T> Send for Mat<T> {}
unsafe impl<T> Sync for Mat<T> {}

impl<T: Copy> Mat<T> {
    /// A row-major matrix with row stride `ld`.
    pub fn dense(ptr: *const T, ld: usize) -> Self {
        Mat { ptr, rs: ld as isize, cs: 1 }
    }

    /// The transpose (a view).
    pub fn t(self) -> Self {
        Mat { ptr: self.ptr, rs: self.cs, cs: self.rs }
    }

    /// The rows from `r` on.
    pub fn rows_from(self, r: usize) -> Self {
        Mat { ptr: self.ptr.wrapping_offset(r as isize * self.rs), ..self }
    }

    /// Element `(i, j)`.
    ///
    /// # Safety
    /// It must be readable.
    pub unsafe fn at(&self, i: usize, j: usize) -> T {
        unsafe { *self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

/// `C = A B` (`m × k` by `k × n`) on the calling thread, into `c` with row stride `ldc`: by
/// [`sgemm`](super::sgemm) for f32 on an AVX2 CPU, else by the gemm crate. For callers that
/// spread whole products over the threads themselves (attention's pairs).
///
/// # Safety
/// Every element of `a` and `b` readable; the `m × n` elements of `c` writable and not accessed
/// by anyone else meanwhile.
pub unsafe fn product<T: Real>(a: Mat<T>, b: Mat<T>, c: *mut T, ldc: usize, [m, k, n]: [usize; 3]) {
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && super::sgemm::available() {
        use super::sgemm::{View, sgemm};
        let view = |x: Mat<T>| View { ptr: x.ptr.cast(), rs: x.rs, cs: x.cs };
        // SAFETY: `T` is `f32`; the caller's contract is `sgemm`'s.
        return unsafe { sgemm(view(a), view(b), c.cast(), ldc, [m, k, n], false) };
    }
    if k == 0 {
        for i in 0..m {
            // SAFETY: row `i` of `c` is writable (the caller's contract).
            unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), n).fill(T::zero()) };
        }
        return;
    }
    // SAFETY: the caller's contract; `read_dst` is false, so `c` is only written.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            ldc as isize,
            false,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            T::zero(),
            T::one(),
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// Band widths, multiples of the f32 AVX2 kernel's 16 × 6 register tile.
const ROWS: usize = 16;
const COLS: usize = 6;

/// The output pointer, shared by the threads that each write their own matrices of it.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub *mut T);
// SAFETY: the threads write disjoint ranges (see `matmul`).
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    pub(crate) fn at(self, i: usize) -> *mut T {
        // SAFETY: `i` is within the allocation (callers pass a matrix's first index).
        unsafe { self.0.add(i) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `C_ij = Σ_l A_il B_lj` by the definition, from index functions.
    fn naive(
        a: impl Fn(usize, usize) -> f64,
        b: impl Fn(usize, usize) -> f64,
        m: usize,
        k: usize,
        n: usize,
    ) -> Vec<f64> {
        (0..m * n).map(|ij| (0..k).map(|l| a(ij / n, l) * b(l, ij % n)).sum()).collect()
    }

    fn dense(d: &[f32]) -> Strided<'_, f32> {
        Strided { data: d, offset: 0, batch: &[], rows: 2, cols: 1 }
    }

    #[test]
    fn hand_computed_product() {
        // [[1, 2], [3, 4]] · [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
        let (a, b) = ([1.0f32, 2.0, 3.0, 4.0], [5.0f32, 6.0, 7.0, 8.0]);
        assert_eq!(matmul(dense(&a), dense(&b), &[], [2, 2, 2]), vec![19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn transposed_and_offset_batches_match_the_definition() {
        // A batch of 3: A read transposed from [3, k, m] storage, B a narrowed view (offset 5,
        // row stride n + 2) of a padded buffer; a thread per matrix, and matrices split into
        // bands of columns and of rows, against the sum by definition in f64.
        for (m, k, n) in [(5, 7, 3), (200, 190, 210), (210, 190, 200)] {
            let av: Vec<f64> = (0..3 * k * m).map(|i| ((i * 37 % 101) as f64) / 50.0 - 1.0).collect();
            let bv: Vec<f64> = (0..5 + 3 * k * (n + 2)).map(|i| ((i * 53 % 97) as f64) / 40.0 - 1.2).collect();
            let ab = [(k * m) as isize];
            let bb = [(k * (n + 2)) as isize];
            let a = Strided { data: &av, offset: 0, batch: &ab, rows: 1, cols: m as isize };
            let b = Strided { data: &bv, offset: 5, batch: &bb, rows: (n + 2) as isize, cols: 1 };
            let c = matmul(a, b, &[3], [m, k, n]);
            for i in 0..3 {
                let want =
                    naive(|r, l| av[i * k * m + l * m + r], |l, j| bv[5 + i * k * (n + 2) + l * (n + 2) + j], m, k, n);
                let got = &c[i * m * n..(i + 1) * m * n];
                let err = want.iter().zip(got).map(|(w, g)| (w - g).abs()).fold(0.0, f64::max);
                assert!(err < 1e-10, "batch {i} ({m}×{k}×{n}): max error {err}");
            }
        }
    }

    #[test]
    fn f32_batches_match_the_definition_exactly() {
        // The f32 path (the AVX2 kernel where the CPU has it): small integers, so every sum is
        // exact; batches of 4 small products (a matrix per thread) and of 3 large ones (each
        // split over the threads), `A` transposed in storage, `B` narrowed with an offset.
        for (count, [m, k, n]) in [(4, [5, 7, 3]), (3, [200, 190, 210])] {
            let av: Vec<f32> = (0..count * k * m).map(|i| (i * 37 % 11) as f32 - 5.0).collect();
            let bv: Vec<f32> = (0..5 + count * k * (n + 2)).map(|i| (i * 53 % 9) as f32 - 4.0).collect();
            let (ab, bb) = ([(k * m) as isize], [(k * (n + 2)) as isize]);
            let a = Strided { data: &av, offset: 0, batch: &ab, rows: 1, cols: m as isize };
            let b = Strided { data: &bv, offset: 5, batch: &bb, rows: (n + 2) as isize, cols: 1 };
            let c = matmul(a, b, &[count], [m, k, n]);
            for i in 0..count {
                let want = naive(
                    |r, l| av[i * k * m + l * m + r] as f64,
                    |l, j| bv[5 + i * k * (n + 2) + l * (n + 2) + j] as f64,
                    m,
                    k,
                    n,
                );
                let got: Vec<f64> = c[i * m * n..(i + 1) * m * n].iter().map(|&v| v as f64).collect();
                assert_eq!(got, want, "batch {i} ({m}×{k}×{n})");
            }
        }
    }

    #[test]
    #[should_panic(expected = "outside its storage")]
    fn an_operand_past_its_storage_is_refused() {
        let v = vec![0f32; 5];
        let a = Strided { data: &v, offset: 0, batch: &[], rows: 3, cols: 1 };
        matmul(a, a, &[], [2, 3, 3]);
    }
}
