//! Fused kernels, on the CPU and (features `wgpu`, `cuda`) on the GPU: one pass forward, one
//! pass backward, for the operations a training step spends its elementwise time in. On the CPU
//! each is a burn backend extension ([`extension::FusedOps`]) computed on the `Flex` backend by
//! plain slice loops ([`norm`], [`swiglu`], [`softmax`], [`rope`]) and differentiated on
//! `Autodiff<Flex>` by a hand-written backward pass; on the GPU the norms, causal attention and
//! the loss's cross-entropy are CubeCL kernels with their own backward (`gpu`, below).
//!
//! The composite formulas (in `norm` and `model`) stay the reference: `model.kernels =
//! "composite"` uses them everywhere, and on backends other than `Flex` (wgpu, cuda) and for
//! element types other than f32/f64 they are used whatever the setting ([`fusable`]), except
//! for the norms, causal attention and the chunked loss's cross-entropy, which have GPU kernels
//! too (`gpu`, [`Kernels::fuse_norm`], [`Kernels::fuse_attention`], [`Kernels::fuse_loss`]);
//! `model.kernels = "cublas"` adds the layers' products by cuBLAS on `cuda` (`gpu::cublas`).
//! The tests check every fused op against the composite one and against finite differences in
//! f64.
//!
//! - [`extension`]: the backend extension: the ops on `Flex` and their backward on `Autodiff<Flex>`
//! - [`norm`]: LayerNorm, RMSNorm and their scalarised forms in one pass
//! - [`given_rms`]: RMSNorm with a given second moment (RMSNorm-Approx)
//! - [`tanh_norm`]: DyT and BHyT in one pass
//! - [`swiglu`]: SwiGLU's gate
//! - [`softmax`]: scaled causal softmax without a mask tensor
//! - [`attention`]: causal attention blocked over query rows (flash-style)
//! - [`rope`]: rotary embeddings in one pass
//! - [`sgemm`], [`strided`]: f32 matmuls (packed AVX2 + FMA; strided operands)
//! - [`simd`]: the element type and the loops the kernels share
//! - [`precision`]: mixed precision (`train.precision`)
//! - `gpu` (features `wgpu`, `cuda`): every norm, causal attention with its backward, and the
//!   chunked loss's cross-entropy as fused CubeCL kernels on burn's GPU backend; the layers' products by cuBLAS on `cuda`

pub mod attention;
mod extension;
pub mod given_rms;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu;
pub mod norm;
pub mod precision;
pub mod rope;
#[cfg(target_arch = "x86_64")]
pub mod sgemm;
pub mod simd;
pub mod softmax;
pub mod strided;
pub mod swiglu;
pub mod tanh_norm;

#[cfg(test)]
mod tests;

use burn::backend::{Dispatch, DispatchDevice};
use burn::tensor::{DType, Tensor};
use extension::FusedOps;
pub use precision::{Precision, widen};
use serde::{Deserialize, Serialize};
pub use tanh_norm::{Denominator, TanhNorm};

/// Which implementation of the fusable operations a model uses (`model.kernels`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// The fused kernels where [`fusable`], the composite formulas elsewhere.
    #[default]
    Fused,
    /// The composite formulas everywhere (the reference).
    Composite,
    /// As `Fused`, and the layers' products (every projection and the head) by cuBLAS on a
    /// `cuda` device ([`gpu::cublas`]); a run on another device is refused when checked.
    Cublas,
}

impl Kernels {
    /// `a · b` in `p`: the strided gemm of [`matmul`] where the fused path applies (an f32 or
    /// f64 compute type on `Flex`), a matrix product by the GPU product op under `cublas` on a
    /// GPU device (cuBLAS on `cuda`), else [`Precision::matmul`].
    pub fn matmul<const D: usize>(self, p: Precision, a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
        if p == Precision::F32 && self.fuse(&a) {
            return matmul(a, b);
        }
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        if self == Kernels::Cublas && D == 2 && gpu::on_gpu(&a) {
            return gpu_matrix_product(p.compute(a), p.compute(b));
        }
        p.matmul(a, b)
    }

    /// Refuses kernels `device` cannot run: `cublas` away from a `cuda` device, or where
    /// `libcublas` does not load (the message names the fix).
    pub fn check_on(self, device: &burn::tensor::Device) -> anyhow::Result<()> {
        if self != Kernels::Cublas {
            return Ok(());
        }
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        return gpu::cublas_on(device).map_err(anyhow::Error::msg);
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        anyhow::bail!(
            "model.kernels = \"cublas\" runs on run.device = \"cuda\" only (a build with --features cuda), not on \
             {device:?}; use \"fused\""
        )
    }

    /// Whether an operation on `x` takes the fused path.
    pub fn fuse<const D: usize>(self, x: &Tensor<D>) -> bool {
        self != Kernels::Composite && fusable(x)
    }

    /// Whether a norm of `x` takes a fused kernel: the CPU's, or the GPU's ([`gpu_norm`]).
    pub fn fuse_norm<const D: usize>(self, x: &Tensor<D>) -> bool {
        self != Kernels::Composite && (fusable(x) || gpu_norm(x))
    }

    /// Whether a chunk's cross-entropy over the logits `l` takes the fused GPU kernel
    /// ([`chunk_cross_entropy`]): f32 logits on a GPU device.
    pub fn fuse_loss(self, l: &Tensor<2>) -> bool {
        self != Kernels::Composite && gpu_norm(l)
    }

    /// Whether causal attention of queries `q` takes a fused kernel ([`causal_attention`]):
    /// the CPU's, or the GPU's ([`gpu_attention`]).
    pub fn fuse_attention(self, q: &Tensor<4>) -> bool {
        self != Kernels::Composite && (fusable(q) || gpu_attention(q))
    }
}

/// The matrix product `a · b` (`D = 2`) by [`gpu::gemm`], in the operands' type.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn gpu_matrix_product<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    let mut dims = a.dims();
    let (m, k, n) = (dims[0], dims[D - 1], b.dims()[D - 1]);
    dims[D - 1] = n;
    gpu::gemm(a.reshape([m, k]), b.reshape([k, n]), gpu::Transposes::NONE).reshape(dims)
}

/// A chunk's cross-entropy terms `[n, 2]` (`log Z − ℓ_t` and `log²Z` per row, 0 where the
/// target is −1) and with `grads` the gradient of `Σ terms · (1, c_z) / N` with respect to the
/// raw logits (`inv_count` = `1/N`), by the fused GPU kernel ([`gpu::cross_entropy`]); only
/// where [`Kernels::fuse_loss`] holds. `targets`: `[n]` token ids as f32.
pub fn chunk_cross_entropy(
    logits: Tensor<2>,
    targets: Tensor<1>,
    inv_count: Tensor<1>,
    softcap: Option<f64>,
    z_loss: f64,
    grads: bool,
) -> (Tensor<2>, Option<Tensor<2>>) {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    return gpu::cross_entropy(logits, targets, inv_count, gpu::LossSpec { softcap, z_loss }, grads);
    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    {
        let _ = (logits, targets, inv_count, softcap, z_loss, grads);
        unreachable!("Kernels::fuse_loss holds on GPU devices only, which need the wgpu or cuda feature")
    }
}

/// Whether the GPU attention kernels compute on queries `q`.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn gpu_attention(q: &Tensor<4>) -> bool {
    gpu::attention_runs_on(q)
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn gpu_attention(_: &Tensor<4>) -> bool {
    false
}

/// Whether the GPU norm kernels compute on `x` (an f32 tensor on a CubeCL device).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn gpu_norm<const D: usize>(x: &Tensor<D>) -> bool {
    gpu::runs_on(x)
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn gpu_norm<const D: usize>(_: &Tensor<D>) -> bool {
    false
}

/// Whether the fused kernels can compute on `x`: a `Flex` tensor (with or without autodiff)
/// of f32 or f64.
pub fn fusable<const D: usize>(x: &Tensor<D>) -> bool {
    matches!(x.dtype(), DType::F32 | DType::F64) && matches!(x.device().inner().as_dispatch(), DispatchDevice::Flex(_))
}

/// A norm's gain and shift for the kernels, an absent one as the identity's `[1]` (1 or 0)
/// on `x`'s device and in its type.
fn affine<const D: usize>(x: &Tensor<D>, gain: Option<Tensor<1>>, shift: Option<Tensor<1>>) -> [Tensor<1>; 2] {
    let (device, dtype) = (x.device(), x.dtype());
    let gain = gain.unwrap_or_else(|| Tensor::ones([1], (&device, dtype)));
    [gain, shift.unwrap_or_else(|| Tensor::zeros([1], (&device, dtype)))]
}

/// `γ ⊙ (x − μ)/√(σ² + ε) + β` over the last axis, `μ = 0` unless `centred` (then σ² is the
/// centred variance, else the mean square). `gain`, `shift`: `[d]`, `[1]` or absent.
pub fn norm_affine<const D: usize>(
    x: Tensor<D>,
    gain: Option<Tensor<1>>,
    shift: Option<Tensor<1>>,
    eps: f64,
    centred: bool,
) -> Tensor<D> {
    let [gain, shift] = affine(&x, gain, shift);
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if gpu_norm(&x) {
        let lambda = Tensor::ones([1], (&x.device(), x.dtype()));
        return gpu::row_norm(x, [gain, shift, lambda], None, gpu::RowNorm::affine(eps, centred));
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::norm_affine(
        x.into_dispatch(),
        gain.into_dispatch(),
        shift.into_dispatch(),
        eps,
        centred,
    ))
}

/// [`norm_affine`] of the residual sum `a·x + c·b`, the sum formed row by row in the same pass
/// (a sublayer's outer norm on its residual addition). `[a, c]` = `scales`.
pub fn add_norm<const D: usize>(
    x: Tensor<D>,
    b: Tensor<D>,
    scales: [f64; 2],
    gain: Option<Tensor<1>>,
    shift: Option<Tensor<1>>,
    eps: f64,
    centred: bool,
) -> Tensor<D> {
    let [gain, shift] = affine(&x, gain, shift);
    Tensor::from_dispatch(<Dispatch as FusedOps>::add_norm(
        x.into_dispatch(),
        b.into_dispatch(),
        gain.into_dispatch(),
        shift.into_dispatch(),
        scales,
        eps,
        centred,
    ))
}

/// `γ ⊙ tanh(λ x / D) + β` over the last axis (DyT, BHyT; see [`tanh_norm`]). `lambda`: `[1]`;
/// `gain`, `shift`: `[d]`, `[1]` or absent; `variance`: `[…, 1]`, required for
/// [`Denominator::Given`] and ignored otherwise.
pub fn tanh_norm<const D: usize>(
    x: Tensor<D>,
    lambda: Tensor<1>,
    gain: Option<Tensor<1>>,
    shift: Option<Tensor<1>>,
    variance: Option<Tensor<D>>,
    n: TanhNorm,
) -> Tensor<D> {
    let [gain, shift] = affine(&x, gain, shift);
    let (device, dtype) = (x.device(), x.dtype());
    assert_eq!(variance.is_some(), n.denominator == Denominator::Given, "a variance goes with Denominator::Given");
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if gpu_norm(&x) {
        return gpu::row_norm(x, [gain, shift, lambda], variance, gpu::RowNorm::tanh(n));
    }
    let variance = variance
        .map(Tensor::into_dispatch)
        .unwrap_or_else(|| Tensor::<1>::zeros([1], (&device, dtype)).into_dispatch());
    Tensor::from_dispatch(<Dispatch as FusedOps>::tanh_norm(
        x.into_dispatch(),
        lambda.into_dispatch(),
        gain.into_dispatch(),
        shift.into_dispatch(),
        variance,
        n,
    ))
}

/// `γ ⊙ x / √(v + ε)` over the last axis with a given per-row `v` (`[…, 1]`): RMSNorm-Approx's
/// FFN-input norm (see [`given_rms`]). `gain`: `[d]` or absent.
pub fn rms_given<const D: usize>(x: Tensor<D>, gain: Option<Tensor<1>>, v: Tensor<D>, eps: f64) -> Tensor<D> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if gpu_norm(&x) {
        let [gain, shift] = affine(&x, gain, None);
        let lambda = Tensor::ones([1], (&x.device(), x.dtype()));
        return gpu::row_norm(x, [gain, shift, lambda], Some(v), gpu::RowNorm::given_rms(eps));
    }
    let [gain, _] = affine(&x, gain, None);
    Tensor::from_dispatch(<Dispatch as FusedOps>::rms_given(
        x.into_dispatch(),
        gain.into_dispatch(),
        v.into_dispatch(),
        eps,
    ))
}

/// `SiLU(a) ⊙ b`.
pub fn swiglu<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::swiglu(a.into_dispatch(), b.into_dispatch()))
}

/// `softmax(scale · x + causal mask)` over the last axis of `[…, T, S]` scores, `S − T` keys
/// cached before the queries; no mask tensor is read.
pub fn causal_softmax<const D: usize>(x: Tensor<D>, scale: f64) -> Tensor<D> {
    assert!(scale > 0.0, "the softmax scale must be positive");
    Tensor::from_dispatch(<Dispatch as FusedOps>::causal_softmax(x.into_dispatch(), scale))
}

/// RoPE (rotate-half) of `x`: `[B, T, n, h]` with `cos`, `sin`: `[T, h/2]` (constants).
pub fn rope(x: Tensor<4>, cos: Tensor<2>, sin: Tensor<2>) -> Tensor<4> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::rope(x.into_dispatch(), cos.into_dispatch(), sin.into_dispatch()))
}

/// Causal attention `softmax(scale · q kᵀ + M) v` in one op (see [`attention`]; on a GPU the
/// kernels of `gpu`, in f32): `q`:
/// `[B, H, T, h]`, `k`, `v`: `[B, H, S, h]` (the `S − T` first keys cached, seen by every
/// query) → `[B, H, T, h]`; no mask tensor, no `T × S` probabilities kept for backward.
pub fn causal_attention(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, scale: f64) -> Tensor<4> {
    assert!(scale > 0.0, "the attention scale must be positive");
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if gpu_attention(&q) {
        return gpu::causal_attention(q, k, v, scale);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::causal_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        scale,
    ))
}

/// `a · b` over the last two axes, `[…, m, k] × […, k, n]` with equal batch axes, written into
/// a fresh output with transposed or narrowed operands read in place (see [`strided`]).
pub fn matmul<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::matmul(a.into_dispatch(), b.into_dispatch()))
}
