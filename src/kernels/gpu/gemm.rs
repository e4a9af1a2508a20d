//! `op(A) · op(B)` of two row-major matrices as a burn backend extension ([`GpuGemm`]), `op`
//! the identity or the transpose ([`Transposes`]), so the backward's products (`∂A = ∂C Bᵀ`,
//! `∂B = Aᵀ ∂C`) read the saved operands in place. On a `cuda` device it is one cuBLAS call
//! ([`super::cublas`], feature `cuda`); on any other CubeCL device, and for element types
//! cuBLAS is not asked for here, burn's own matmul computes it, which is what the tests on
//! lavapipe check the op's backward with.
//!
//! # Shapes
//! - `a`: `[m, k]` (`[k, m]` when transposed), `b`: `[k, n]` (`[n, k]` when transposed)
//! - output: `[m, n]`

use super::transposes::Transposes;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;
use burn_cubecl::CubeBackend;
use burn_cubecl::tensor::CubeTensor;

#[burn::backend::backend_extension(Autodiff, Cube, Fusion)]
pub trait GpuGemm: burn::backend::Backend {
    /// `op(a) · op(b)`, `op` as `t` says.
    #[fusion(meta = product)]
    fn gemm(a: FloatTensor<Self>, b: FloatTensor<Self>, t: Transposes) -> FloatTensor<Self>;
}

/// The output's spec: `[m, n]` in `a`'s type.
fn product(a: &TensorSpec, b: &TensorSpec, t: &Transposes) -> TensorSpec {
    let (m, _, n) = t.sizes(a.shape.dims::<2>(), b.shape.dims::<2>());
    TensorSpec::new(Shape::new([m, n]), a.dtype)
}

impl GpuGemm for CubeBackend {
    fn gemm(a: FloatTensor<Self>, b: FloatTensor<Self>, t: Transposes) -> FloatTensor<Self> {
        #[cfg(feature = "cuda")]
        if super::cublas::computes(&a, &b) {
            return super::cublas::gemm(a, b, t);
        }
        burn_matmul(a, b, t)
    }
}

/// `op(a) · op(b)` by burn's CubeCL matmul.
fn burn_matmul(a: CubeTensor, b: CubeTensor, t: Transposes) -> CubeTensor {
    let op = |x: CubeTensor, transposed: bool| if transposed { CubeBackend::float_swap_dims(x, 0, 1) } else { x };
    CubeBackend::float_matmul(op(a, t.a), op(b, t.b))
}
