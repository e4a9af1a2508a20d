//! Fused GPU kernels on burn's CubeCL backend (wgpu, vulkan, cuda), each a burn backend
//! extension whose backward is hand-written on `Autodiff<Cube>`: every norm kind as one
//! forward and one backward kernel ([`row_norm`]), and causal attention whose backward
//! recomputes the probabilities from the saved log-sum-exp instead of keeping the T × S
//! matrix ([`causal_attention`]). The composite formulas stay the reference
//! (`model.kernels = "composite"`), as for the CPU kernels.
//!
//! Every norm is one row map `y = γ ⊙ φ(λ (x − m) / D) + β` ([`RowNorm`]):
//!
//! | kind | `m` | `D` | `φ` | `λ` |
//! |---|---|---|---|---|
//! | LayerNorm (vector, scalar) | μ | `√(σ² + ε)` | id | 1 |
//! | RMSNorm (vector, scalar) | 0 | `√(mean(x²) + ε)` | id | 1 |
//! | RMSNorm with a given `v` | 0 | `√(v + ε)` | id | 1 |
//! | DyT | 0 | 1 | tanh | α |
//! | BHyT* (eq. 1) | 0 | `κ √(σ² + ε) + |μ|` | tanh | λ |
//! | BHyT, exact RMS | 0 | `κ √(mean(x²) + ε)` | tanh | λ |
//! | BHyT, given `ŝ²` (Theorem 3.5) | 0 | `κ √(v + ε)` | tanh | λ |
//!
//! Backward, with `c = x − m`, `w = 1/D`, `s = λ w`, `g = ∂y ⊙ γ ⊙ φ′(s c)` and
//! `∂D/∂x_j = a x_j + b` (the row's own statistic; 0 for `D = 1` and a given `v`):
//!
//! ```text
//! ∂D = −w² λ Σ_j g_j c_j        ∂x_j = s (g_j − [m = μ] mean(g)) + ∂D (a x_j + b)
//! ∂γ = Σ_rows ∂y ⊙ φ(s c)      ∂β = Σ_rows ∂y     ∂λ = Σ g c w     ∂v = ∂D κ / (2 √(v + ε))
//! ```
//!
//! The kernels run on f32 (the norms' inputs are widened to f32 in every precision,
//! [`super::widen`]); a norm of another type takes the composite path.

//!
//! - [`spec`]: [`RowNorm`], which norm of the table
//! - [`row_norm`]: the norms' forward and backward CubeCL kernels and their launches
//! - [`attention`]: attention's forward and backward CubeCL kernels and their launches
//! - [`gemm`]: `op(A) · op(B)` as a backend extension ([`GpuGemm`]), by cuBLAS on `cuda`
//!   ([`cublas`], feature `cuda`) and by burn's matmul elsewhere; its backward in [`gemm_grad`]
//! - [`transposes`]: [`Transposes`], which operands of a product enter transposed
//! - [`cross_entropy`]: a chunk's cross-entropy terms and its logits' gradient in one launch
//!   ([`GpuCrossEntropy`]), for the chunked loss
//! - [`reduce`]: sums and maxima over a cube's units
//! - [`rows`]: the one-cube-per-row launch the row kernels share
//! - [`extension`]: the backend extensions [`GpuNorms`], [`GpuAttention`] on `CubeBackend`
//! - [`autodiff`], [`attention_grad`]: their backward on `Autodiff<Cube>`

mod attention;
mod attention_grad;
mod autodiff;
pub mod cross_entropy;
#[cfg(feature = "cuda")]
pub mod cublas;
pub mod extension;
pub mod gemm;
mod gemm_grad;
mod reduce;
mod row_norm;
mod rows;
pub mod spec;
mod transposes;

use burn::backend::{Dispatch, DispatchDevice};
use burn::tensor::{DType, Tensor};
pub use cross_entropy::{GpuCrossEntropy, LossSpec};
pub use extension::{GpuAttention, GpuNorms};
pub use gemm::GpuGemm;
pub use spec::{Root, RowNorm};
pub use transposes::Transposes;

/// Whether `x` is on a CubeCL device (with or without autodiff).
pub fn on_gpu<const D: usize>(x: &Tensor<D>) -> bool {
    matches!(x.device().inner().as_dispatch(), DispatchDevice::Cube(_))
}

/// Whether the GPU norm kernels compute on `x`: an f32 tensor on a CubeCL device.
pub fn runs_on<const D: usize>(x: &Tensor<D>) -> bool {
    x.dtype() == DType::F32 && on_gpu(x)
}

/// Whether the GPU attention kernels compute on queries `q` `[B, H, T, h]`: on a CubeCL
/// device, with a head width a cube's units cover.
pub fn attention_runs_on(q: &Tensor<4>) -> bool {
    on_gpu(q) && q.dims()[3] <= attention::MAX_HEAD
}

/// Causal `softmax(scale · q kᵀ + M) v` by the GPU kernels, in f32 (half-precision inputs are
/// widened, as the composite path widens the scores): `q` `[B, H, T, h]`, `k`, `v`
/// `[B, H, S, h]` with `S ≥ T`, the `S − T` first keys cached.
pub fn causal_attention(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, scale: f64) -> Tensor<4> {
    let [q, k, v] = [q, k, v].map(super::widen);
    Tensor::from_dispatch(<Dispatch as GpuAttention>::attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        scale,
    ))
}

/// The norm `n` of `x` by the GPU kernels; `gain`, `shift`: `[d]` or `[1]`; `lambda`: `[1]`;
/// `v`: `[…, 1]`, required for a given statistic.
pub fn row_norm<const D: usize>(
    x: Tensor<D>,
    [gain, shift, lambda]: [Tensor<1>; 3],
    v: Option<Tensor<D>>,
    n: RowNorm,
) -> Tensor<D> {
    assert_eq!(v.is_some(), n.root == Root::Given, "a given statistic goes with a v per row");
    // An unread `[1]` stand-in where no statistic is given: a constant, never a parameter.
    let v = v
        .map(Tensor::into_dispatch)
        .unwrap_or_else(|| Tensor::<1>::zeros([1], (&x.device(), x.dtype())).into_dispatch());
    Tensor::from_dispatch(<Dispatch as GpuNorms>::row_norm(
        x.into_dispatch(),
        gain.into_dispatch(),
        shift.into_dispatch(),
        lambda.into_dispatch(),
        v,
        n,
    ))
}

/// A chunk's cross-entropy terms by the fused kernel ([`cross_entropy`]): each row's
/// `(log Z − ℓ_t, log²Z)` `[n, 2]` from the raw `logits` `[n, V]` (f32 on a CubeCL device) and
/// the `targets` `[n]` as f32 ids (−1: not counted), and with `grads` the logits' gradient
/// scaled by `inv_count` `[1]`.
pub fn cross_entropy(
    logits: Tensor<2>,
    targets: Tensor<1>,
    inv_count: Tensor<1>,
    spec: LossSpec,
    grads: bool,
) -> (Tensor<2>, Option<Tensor<2>>) {
    let [l, t, c] = [logits.into_dispatch(), targets.into_dispatch(), inv_count.into_dispatch()];
    if grads {
        let (terms, grad) = <Dispatch as GpuCrossEntropy>::cross_entropy_grad(l, t, c, spec);
        (Tensor::from_dispatch(terms), Some(Tensor::from_dispatch(grad)))
    } else {
        (Tensor::from_dispatch(<Dispatch as GpuCrossEntropy>::cross_entropy_rows(l, t, c, spec)), None)
    }
}

/// `op(a) · op(b)` of matrices on a CubeCL device by [`GpuGemm`] (cuBLAS on `cuda`), in their
/// type: `a` `[m, k]`, `b` `[k, n]` (each stored transposed where `t` says).
pub fn gemm(a: Tensor<2>, b: Tensor<2>, t: Transposes) -> Tensor<2> {
    Tensor::from_dispatch(<Dispatch as GpuGemm>::gemm(a.into_dispatch(), b.into_dispatch(), t))
}

/// Whether the layers' products can be handed to cuBLAS on `device`: a CUDA device, in a build
/// with `cuda`, with `libcublas` loading. The text names what is missing and the fix.
pub fn cublas_on(device: &burn::tensor::Device) -> Result<(), String> {
    let cuda = matches!(device.clone().inner().as_dispatch(), DispatchDevice::Cube(d) if d.runtime() == cubecl::RuntimeId::Cuda);
    if !cuda {
        return Err(
            "model.kernels = \"cublas\" runs on run.device = \"cuda\" only; use \"fused\" on other devices".into()
        );
    }
    #[cfg(feature = "cuda")]
    return cublas::available();
    #[cfg(not(feature = "cuda"))]
    unreachable!("a CUDA device exists only in a build with the cuda feature")
}
