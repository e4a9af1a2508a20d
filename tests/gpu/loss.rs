//! The chunked loss's fused GPU cross-entropy (`kernels::gpu::cross_entropy`) against the
//! composite chunk on the same GPU device in f32: the objective, the cross-entropy, the mean
//! log²Z and the gradients of the hidden states and the projection, with targets that are not
//! counted (−1), a vocabulary wider than a cube's 256 units (each unit strides), chunks that do
//! not divide the rows, and both a plain head and a soft-capped one with a z-loss. The
//! composite chunk is itself checked against burn's autodiff of the unchunked loss
//! (`model::tests`).

use super::norms::{around, gap};
use burn::tensor::{Device, Int, Tensor, TensorData};
use normlab::kernels::{Kernels, Precision};
use normlab::model::Compute;
use normlab::model::chunked_loss::chunked_cross_entropy;

const ROWS: usize = 37;
const WIDTH: usize = 24;
const VOCAB: usize = 300;

/// The objective, CE and z values and the gradients of `h` and `W`, flattened.
fn outputs(device: &Device, kernels: Kernels, softcap: Option<f64>, z_loss: f64) -> Vec<Vec<f32>> {
    let leaf = |len: usize, shape: [usize; 2], seed: u64, spread: f32| {
        Tensor::<2>::from_data(TensorData::new(around(len, seed, 0.0, spread), shape), device).require_grad()
    };
    let h = leaf(ROWS * WIDTH, [ROWS, WIDTH], 41, 1.0);
    let w = leaf(WIDTH * VOCAB, [WIDTH, VOCAB], 42, 1.5);
    let ids: Vec<i64> = (0..ROWS as i64).map(|i| if i % 5 == 2 { -1 } else { (i * 37 + 11) % VOCAB as i64 }).collect();
    let targets = Tensor::<1, Int>::from_data(TensorData::new(ids, [ROWS]), device);
    let compute = Compute { kernels, precision: Precision::F32, logits_limit: 16 * VOCAB, scores_limit: 1 << 24 };
    if kernels != Kernels::Composite {
        let probe = Tensor::<2>::zeros([1, VOCAB], device);
        assert!(kernels.fuse_loss(&probe), "the fused cross-entropy must run on this GPU device");
    }
    let out = chunked_cross_entropy(h.clone(), w.clone(), targets, 16, compute, softcap, z_loss);
    let grads = out.objective.clone().backward();
    let flat = |t: Tensor<2>| t.reshape([-1]).into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
    let scalar = |t: Tensor<1>| t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
    let mut all = vec![scalar(out.objective), scalar(out.ce)];
    all.extend(out.z.map(scalar));
    all.push(flat(h.grad(&grads).expect("h receives a gradient")));
    all.push(flat(w.grad(&grads).expect("W receives a gradient")));
    all
}

/// Runs the comparison for a plain head and a soft-capped one with a z-loss on `device` (an
/// autodiff GPU device).
pub fn check(device: &Device) {
    for (softcap, z_loss) in [(None, 0.0), (Some(3.0), 1e-2)] {
        let got = outputs(device, Kernels::Fused, softcap, z_loss);
        let want = outputs(device, Kernels::Composite, softcap, z_loss);
        assert_eq!(got.len(), want.len());
        let gaps: Vec<f32> = got.iter().zip(&want).map(|(g, w)| gap(g, w)).collect();
        for e in &gaps {
            // f32 summed in another order (online log-sum-exp, per-row sums): ≈1e-7 expected.
            assert!(
                *e < 1e-5,
                "cross-entropy (cap {softcap:?}, z {z_loss}): fused leaves the composite by {e:.1e} ({gaps:?})"
            );
        }
        let gaps: Vec<String> = gaps.iter().map(|e| format!("{e:.1e}")).collect();
        eprintln!(
            "cross-entropy (cap {softcap:?}, z {z_loss}): fused = composite; values and ∂h, ∂W within {}",
            gaps.join(", ")
        );
    }
}
