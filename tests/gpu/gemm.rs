//! The GPU product op (`kernels::gpu::gemm`, cuBLAS's route on `cuda`) against burn's matmul
//! of the explicitly transposed operands, `op(A) · op(B)`, on the same GPU device in f32: the
//! output and the gradients of `A` and `B` of `Σ w ⊙ C`, for `A · B` and `Aᵀ · Bᵀ`, whose
//! backward products take the other two transposes (`∂C Bᵀ`, `Aᵀ ∂C`; `B ∂Cᵀ`, `∂Cᵀ A`). On
//! lavapipe the op computes by burn's matmul, so this checks its hand-written backward (which
//! transposes each backward product reads) and the fusion and autodiff plumbing; the cuBLAS
//! call itself runs only on a CUDA device (`tools/gpu-table.sh`, step `cuda-cublas-pre`).

use super::norms::{around, gap};
use burn::tensor::{Device, Tensor, TensorData};
use normlab::kernels::gpu::{self, Transposes};
use normlab::kernels::{Kernels, Precision};

/// The output and the gradients of `a`, `b` of `Σ w ⊙ op(a) op(b)`, flattened.
fn outputs(device: &Device, [m, k, n]: [usize; 3], t: Transposes, by_op: bool) -> Vec<Vec<f32>> {
    let make = |rows: usize, cols: usize, seed: u64| {
        Tensor::<2>::from_data(TensorData::new(around(rows * cols, seed, 0.1, 1.0), [rows, cols]), device)
            .require_grad()
    };
    let a = if t.a { make(k, m, 41) } else { make(m, k, 41) };
    let b = if t.b { make(n, k, 42) } else { make(k, n, 42) };
    let c = if by_op {
        gpu::gemm(a.clone(), b.clone(), t)
    } else {
        let op = |x: Tensor<2>, transposed: bool| if transposed { x.transpose() } else { x };
        op(a.clone(), t.a).matmul(op(b.clone(), t.b))
    };
    assert_eq!(c.dims(), [m, n], "op(A) · op(B) is [m, n]");
    let w = Tensor::<2>::from_data(TensorData::new(around(m * n, 43, 1.0, 0.5), [m, n]), device);
    let grads = (c.clone() * w).sum().backward();
    let flat = |x: Tensor<2>| x.reshape([-1]).into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
    vec![flat(c), flat(a.grad(&grads).expect("A receives a gradient")), flat(b.grad(&grads).expect("B too"))]
}

/// Runs the comparison for each transpose on `device` (an autodiff GPU device).
pub fn check(device: &Device) {
    let sizes = [37, 29, 45];
    // (Each transpose autotunes burn's matmul for new layouts: ≈ 40 s on lavapipe.)
    let mut worst = 0f32;
    for t in [Transposes::NONE, Transposes { a: true, b: true }] {
        let (got, want) = (outputs(device, sizes, t, true), outputs(device, sizes, t, false));
        for (name, (g, w)) in ["C", "∂A", "∂B"].iter().zip(got.iter().zip(&want)) {
            let e = gap(g, w);
            // The same products summed in another order where the layouts differ.
            assert!(e < 1e-5, "gemm {t:?}: {name} leaves burn's matmul of the transposed operands by {e:.1e}");
            worst = worst.max(e);
        }
    }
    // A projection through `Kernels::matmul` takes the op under `cublas` on a GPU device.
    let x = Tensor::<2>::from_data(TensorData::new(around(6 * 5, 44, 0.0, 1.0), [6, 5]), device);
    let w = Tensor::<2>::from_data(TensorData::new(around(5 * 3, 45, 0.0, 1.0), [5, 3]), device);
    let (routed, plain) = (Kernels::Cublas.matmul(Precision::F32, x.clone(), w.clone()), x.matmul(w));
    let flat = |x: Tensor<2>| x.reshape([-1]).into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
    assert!(gap(&flat(routed), &flat(plain)) < 1e-6, "Kernels::Cublas.matmul computes x · w");
    println!("gemm: C, ∂A, ∂B of A·B and Aᵀ·Bᵀ within {worst:.1e} of burn's matmul (relative to the largest)");
}
