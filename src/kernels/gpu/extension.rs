//! The GPU kernels as burn backend extensions, run on `CubeBackend`, recorded lazily on
//! `Fusion`, differentiated by hand on `Autodiff<Cube>`: [`GpuNorms`] (the kernels of
//! [`super::row_norm`], backward in [`super::autodiff`]) and [`GpuAttention`] (those of
//! [`super::attention`], backward in [`super::attention_grad`]).

use super::attention;
use super::row_norm::{self, Out};
use super::spec::RowNorm;
use burn::backend::backend_extension;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;
use burn_cubecl::CubeBackend;

#[backend_extension(Autodiff, Cube, Fusion)]
pub trait GpuNorms: burn::backend::Backend {
    /// The norm's output (see the module table); `gain`, `shift`: `[d]` or `[1]`; `lambda`:
    /// `[1]`; `v`: `[…, 1]` for a given statistic, else any (unread).
    #[fusion(dtype = x, shape = x)]
    fn row_norm(
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self>;
    /// `∂x` for the upstream gradient `dy`.
    #[fusion(dtype = x, shape = x)]
    fn row_norm_dx(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self>;
    /// `g c w` per element: the terms of `∂λ`.
    #[fusion(dtype = x, shape = x)]
    fn row_norm_lambda_terms(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self>;
    /// `∂v`, one per row (a given statistic only).
    #[fusion(dtype = v, shape = v)]
    fn row_norm_dv(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self>;
}

impl GpuNorms for CubeBackend {
    fn row_norm(
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        row_norm::forward(x, gain, shift, lambda, v, n)
    }

    fn row_norm_dx(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        row_norm::backward(dy, x, gain, lambda, v, n, Out::Dx)
    }

    fn row_norm_lambda_terms(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        row_norm::backward(dy, x, gain, lambda, v, n, Out::LambdaTerms)
    }

    fn row_norm_dv(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        row_norm::backward(dy, x, gain, lambda, v, n, Out::Dv)
    }
}

/// Causal attention as a burn backend extension, computed by the kernels of
/// [`super::attention`] on `CubeBackend`, differentiated on `Autodiff<Cube>`
/// ([`super::attention_grad`]) without the T × S probabilities.
#[backend_extension(Autodiff, Cube, Fusion)]
pub trait GpuAttention: burn::backend::Backend {
    /// `softmax(scale · q kᵀ + M) v`, `M` causal: `q` `[B, H, T, h]`, `k`, `v` `[B, H, S, h]`.
    #[fusion(dtype = q, shape = q)]
    fn attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, scale: f64) -> FloatTensor<Self>;
    /// The output and each query row's log-sum-exp `[B, H, T, 1]`.
    #[fusion(meta = with_lse)]
    fn attention_with_lse(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
    /// `∂q` from the upstream `d_o`, the log-sum-exp and `Δ = Σ_f ∂O ⊙ O` `[B, H, T, 1]`.
    #[allow(clippy::too_many_arguments)]
    #[fusion(dtype = q, shape = q)]
    fn attention_dq(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        d_o: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self>;
    /// `(∂k, ∂v)`, from what [`GpuAttention::attention_dq`] takes.
    #[allow(clippy::too_many_arguments)]
    #[fusion(meta = key_gradients)]
    fn attention_dkv(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        d_o: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

/// The shapes of `(O, L)`: `q`'s, and one value per query row.
fn with_lse(q: &TensorSpec, _: &TensorSpec, _: &TensorSpec, _: &f64) -> (TensorSpec, TensorSpec) {
    let [b, n, t, _] = q.shape.dims::<4>();
    (q.clone(), TensorSpec::new(Shape::new([b, n, t, 1]), q.dtype))
}

/// The shapes of `(∂k, ∂v)`: `k`'s and `v`'s.
#[allow(clippy::too_many_arguments)]
fn key_gradients(
    _: &TensorSpec,
    k: &TensorSpec,
    v: &TensorSpec,
    _: &TensorSpec,
    _: &TensorSpec,
    _: &TensorSpec,
    _: &f64,
) -> (TensorSpec, TensorSpec) {
    (k.clone(), v.clone())
}

impl GpuAttention for CubeBackend {
    fn attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, scale: f64) -> FloatTensor<Self> {
        attention::forward(q, k, v, scale).0
    }

    fn attention_with_lse(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        attention::forward(q, k, v, scale)
    }

    fn attention_dq(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        d_o: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        attention::dq([q, k, v, d_o, lse, delta], scale)
    }

    fn attention_dkv(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        d_o: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        attention::dkv([q, k, v, d_o, lse, delta], scale)
    }
}
