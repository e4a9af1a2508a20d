//! [`GpuNorms`]: the norms as a burn backend extension, run by the kernels of
//! [`super::row_norm`] on `CubeBackend`, recorded lazily on `Fusion`, differentiated on
//! `Autodiff<Cube>` ([`super::autodiff`]).

use super::row_norm::{self, Out};
use super::spec::RowNorm;
use burn::backend::backend_extension;
use burn::backend::tensor::FloatTensor;
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
