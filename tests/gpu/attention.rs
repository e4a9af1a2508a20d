//! The fused GPU attention (`kernels::gpu`) against the composite formula
//! `softmax(s q kᵀ + M) v` on the same GPU device in f32: the output and the gradients of
//! `q`, `k` and `v` of `Σ w ⊙ O` for fixed positive pseudo-random `w`, the composite's by burn's
//! autodiff of the formula. The shapes cover several chunks of a cube's units (70 rows against
//! 32 units, 75 keys against 64), a head width below the units (40 of 64), and cached keys
//! (40 queries after 35 cached keys).

use super::norms::{around, gap};
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor, TensorData};
use normlab::kernels::{self, Kernels};

/// `[1, 1, T, S]`: 0 where query `i` sees key `j` (`j ≤ i + S − T`), −∞ elsewhere.
fn causal_mask(t: usize, s: usize, device: &Device) -> Tensor<4> {
    let m: Vec<f32> = (0..t * s).map(|n| if n % s <= n / s + s - t { 0.0 } else { f32::NEG_INFINITY }).collect();
    Tensor::from_data(TensorData::new(m, [1, 1, t, s]), device)
}

/// The output and the gradients of `q`, `k`, `v` of `Σ w ⊙ attention(q, k, v)`, flattened.
fn outputs(device: &Device, dims: [usize; 4], s: usize, fused: bool) -> Vec<Vec<f32>> {
    let [b, n, t, h] = dims;
    let make = |rows: usize, seed: u64| {
        let len = b * n * rows * h;
        Tensor::<4>::from_data(TensorData::new(around(len, seed, 0.1, 1.5), [b, n, rows, h]), device).require_grad()
    };
    let (q, k, v) = (make(t, 31), make(s, 32), make(s, 33));
    let scale = 1.0 / (h as f64).sqrt();
    let out = if fused {
        assert!(Kernels::Fused.fuse_attention(&q), "the fused attention must run on this GPU device");
        kernels::causal_attention(q.clone(), k.clone(), v.clone(), scale)
    } else {
        let scores = q.clone().matmul(k.clone().swap_dims(2, 3)) * scale + causal_mask(t, s, device);
        softmax(scores, 3).matmul(v.clone())
    };
    let len = out.shape().num_elements();
    let w = Tensor::<1>::from_data(TensorData::new(around(len, 34, 1.0, 0.5), [len]), device);
    let grads = (out.clone().reshape([len]) * w).sum().backward();
    let flat = |t: Tensor<4>| {
        let n = t.shape().num_elements();
        t.reshape([n]).into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
    };
    let mut all = vec![flat(out)];
    for x in [q, k, v] {
        all.push(flat(x.grad(&grads).expect("q, k and v receive gradients")));
    }
    all
}

/// Runs the comparison for each shape on `device` (an autodiff GPU device).
pub fn check(device: &Device) {
    // (Each shape compiles the composite reference's kernels anew: ≈ 40 s on lavapipe.)
    for (dims, s) in [([2, 2, 70, 16], 70), ([1, 2, 40, 40], 75)] {
        let (got, want) = (outputs(device, dims, s, true), outputs(device, dims, s, false));
        let names = ["output", "∂q", "∂k", "∂v"];
        let gaps: Vec<f32> = got.iter().zip(&want).map(|(g, w)| gap(g, w)).collect();
        for (name, e) in names.iter().zip(&gaps) {
            // f32 summed in another order (online softmax, per-row sums): ≈1e-7 measured.
            assert!(*e < 1e-5, "attention {dims:?} with {s} keys: fused {name} leaves the composite by {e:.1e}");
        }
        let gaps: Vec<String> = gaps.iter().map(|e| format!("{e:.1e}")).collect();
        eprintln!("attention {dims:?}, {s} keys: fused = composite; output, ∂q, ∂k, ∂v within {}", gaps.join(", "));
    }
}
