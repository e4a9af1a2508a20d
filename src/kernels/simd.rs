//! The element type of the fused kernels and the loops they share.
//!
//! Rust never reassociates floating-point sums, so a plain `for` loop summing a row runs one
//! lane at a time. [`sum`] and [`dot`] keep [`LANES`] independent accumulators, which the
//! compiler turns into vector registers; the order of additions is fixed by the code, so
//! results do not depend on the machine or the thread count. [`with_simd`] runs a kernel body
//! compiled for AVX2 + FMA when the CPU has them (the crate's baseline is SSE2).

use burn::tensor::Element;

/// Independent partial sums per reduction (two AVX2 registers of f32).
pub const LANES: usize = 16;

/// f32 or f64, with the few operations the kernels need.
pub trait Real:
    num_traits::Float + bytemuck::Pod + Element + Send + Sync + Default + std::fmt::Debug + 'static
{
    fn of(v: f64) -> Self;
    fn as_f64(self) -> f64;
    /// `eˣ`: a branch-free polynomial for f32 (relative error < 2e-7, vectorisable), the
    /// library function for f64 (the finite-difference tests' type).
    fn exp_v(self) -> Self;
    /// `(tanh z, 1 − tanh² z)`: [`tanh_sech2_f32`] for f32, from the library `tanh` for f64.
    fn tanh_sech2(self) -> (Self, Self);
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn as_f64(self) -> f64 {
        self
    }
    fn exp_v(self) -> Self {
        self.exp()
    }
    fn tanh_sech2(self) -> (Self, Self) {
        let t = self.tanh();
        (t, 1.0 - t * t)
    }
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn as_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn exp_v(self) -> Self {
        exp_f32(self)
    }
    #[inline(always)]
    fn tanh_sech2(self) -> (Self, Self) {
        tanh_sech2_f32(self)
    }
}

/// `eˣ` in f32 by Cody–Waite range reduction `x = n ln2 + r`, |r| ≤ ln2/2, and a degree-6
/// Taylor polynomial of `eʳ` (truncation error < 1.2e-7 relative), scaled by `2ⁿ` through the
/// exponent bits (as `2ⁿ⁻¹ · 2`, so that `n = 128` stays finite). Results below `e^−86.5`
/// (≈ 2.6e-38, next to f32's smallest normal) are 0, above `ln(f32::MAX)` +∞; NaN stays NaN.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let xc = x.clamp(-86.5, 88.72);
    // Round to nearest by the 1.5·2²³ trick: a plain add and subtract that vectorises (`round`
    // is a library call on SSE2/AVX2); exact for |n| < 2²², and here |n| ≤ 128.
    const MAGIC: f32 = 12_582_912.0;
    let n = (xc * std::f32::consts::LOG2_E + MAGIC) - MAGIC;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 126) << 23) as u32);
    let y = p * scale * 2.0;
    let y = if x < -86.5 { 0.0 } else { y };
    let y = if x > 88.72 { f32::INFINITY } else { y };
    if x.is_nan() { x } else { y }
}

/// `(tanh z, 1 − tanh² z)` in f32, vectorisable. For |z| ≥ 1/16 through
/// `q = 1 − tanh|z| = 2/(e^{2|z|} + 1)`, which keeps its relative accuracy as `tanh` saturates,
/// so the derivative `1 − tanh² = q (2 − q)` does too (computing `1 − t²` from a rounded `t`
/// would lose it); below 1/16 the odd Taylor series `z − z³/3 + 2z⁵/15`, where the first form
/// cancels. `tanh` is within 2e-7 absolute (1e-6 relative near 0), `1 − tanh²` within 1e-6
/// relative.
#[inline(always)]
pub fn tanh_sech2_f32(z: f32) -> (f32, f32) {
    let a = z.abs();
    let q = 2.0 / (exp_f32(2.0 * a) + 1.0);
    let (big_t, big_s) = ((1.0f32 - q).copysign(z), q * (2.0 - q));
    let z2 = z * z;
    let small_t = z * (1.0 + z2 * (-1.0 / 3.0 + z2 * (2.0 / 15.0)));
    let small_s = 1.0 - small_t * small_t;
    if a < 0.0625 { (small_t, small_s) } else { (big_t, big_s) }
}

/// `Σ xᵢ` with [`LANES`] partial sums.
#[inline(always)]
pub fn sum<T: Real>(x: &[T]) -> T {
    sum_map(x, |v| v)
}

/// `Σ f(xᵢ)` with [`LANES`] partial sums.
#[inline(always)]
pub fn sum_map<T: Real>(x: &[T], f: impl Fn(T) -> T) -> T {
    let mut acc = [T::zero(); LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] = acc[l] + f(c[l]);
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        acc[l] = acc[l] + f(v);
    }
    fold(acc)
}

/// `max xᵢ` with [`LANES`] partial maxima (−∞ for an empty slice; NaN is not propagated).
#[inline(always)]
pub fn max<T: Real>(x: &[T]) -> T {
    let mut acc = [T::neg_infinity(); LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] = if c[l] > acc[l] { c[l] } else { acc[l] };
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        acc[l] = if v > acc[l] { v } else { acc[l] };
    }
    acc.iter().fold(T::neg_infinity(), |m, &v| if v > m { v } else { m })
}

/// `Σ aᵢ bᵢ` with [`LANES`] partial sums.
#[inline(always)]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [T::zero(); LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] = acc[l] + x[l] * y[l];
        }
    }
    for (l, (&x, &y)) in ra.iter().zip(rb).enumerate() {
        acc[l] = acc[l] + x * y;
    }
    fold(acc)
}

/// Pairwise sum of the lanes, in a fixed order.
#[inline(always)]
fn fold<T: Real>(mut acc: [T; LANES]) -> T {
    let mut w = LANES / 2;
    while w > 0 {
        for l in 0..w {
            acc[l] = acc[l] + acc[l + w];
        }
        w /= 2;
    }
    acc[0]
}

/// Runs `f` compiled with AVX2 and FMA enabled when this CPU has them, plainly otherwise.
/// `f` only gets those features where it is inlined into the AVX2 wrapper, so callers mark
/// their closures `#[inline(always)]`: without it LLVM kept the larger kernel bodies out of
/// line, compiled for the SSE2 baseline (a `perf annotate` of SwiGLU's backward showed scalar
/// `xmm` code).
/// Both builds perform the same operations in the same order (Rust does not contract `a·b + c`
/// into an FMA on its own), so the result is the same either way.
#[inline(always)]
pub fn with_simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports both features, checked just above.
            return unsafe { avx2(f) };
        }
    }
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_f32_is_within_two_ulps_of_the_library_exp() {
        let mut worst = 0f64;
        for i in -86_400..88_700 {
            let x = i as f32 * 1e-3 + 3.7e-4;
            let want = (x as f64).exp();
            worst = worst.max(((exp_f32(x) as f64) - want).abs() / want);
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(exp_f32(-100.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(0.0), 1.0);
    }

    #[test]
    fn lane_sums_equal_the_exact_sum() {
        // Integers are summed exactly in any order.
        for n in [0, 1, 15, 16, 17, 100] {
            let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
            assert_eq!(sum(&x), (n * (n.max(1) - 1) / 2) as f64);
            assert_eq!(dot(&x, &x), (0..n).map(|i| (i * i) as f64).sum::<f64>());
        }
    }
}
