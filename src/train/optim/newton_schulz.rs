//! Orthogonalisation by quintic Newton–Schulz iterations, in two forms:
//!
//! ```text
//! Keller Jordan's (torch.optim.Muon):   X ← G / max(‖G‖_F, 1e-7);          every step (a, b, c) = (3.4445, −4.775, 2.0315)
//! Polar Express (Amsel et al. 2025, as nanochat and modded-nanogpt run it):
//!                                       X ← G / (1.02·‖G‖_F + 1e-6);      step k its own (a_k, b_k, c_k), k ≤ 5
//! each step:  A = X Xᵀ;  X ← a·X + (b·A + c·A²)·X
//! ```
//!
//! The iteration is an odd polynomial in `X`, so orthogonalising `Gᵀ` gives the transpose of
//! orthogonalising `G`: the wide orientation is chosen only for the smaller Gram matrix, and
//! burn's `[in, out]` weights need no transpose to match PyTorch's `[out, in]`. It does not
//! converge to `UVᵀ` but to `U S′ Vᵀ` with `S′ ≈ Uniform(0.5, 1.5)` (the coefficients trade
//! accuracy for slope at zero), which is what Muon uses.
//!
//! Computed in f32 on every backend (`torch.optim.Muon` casts to bf16 on every device): the
//! updates equal an f64 reference to f32 precision.
//!
//! # Shapes
//! - `g`: `[m, n]` → `[m, n]`

use crate::run::optim::Orthogonalizer;
use burn::tensor::Tensor;

/// Keller Jordan's coefficients.
pub const COEFFICIENTS: (f64, f64, f64) = (3.4445, -4.775, 2.0315);
/// `torch.optim.Muon`'s floor on the norm.
pub const EPS: f64 = 1e-7;
/// Polar Express's coefficients for 5 steps (safety factor 2e-2, cushion 2), as nanochat's and
/// modded-nanogpt's `polar_express_coeffs`.
pub const POLAR_EXPRESS: [(f64, f64, f64); 5] = [
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
];

/// `steps` iterations of `kind` on `g` (rank 2); Polar Express has at most 5.
pub fn orthogonalize<const D: usize>(g: Tensor<D>, steps: usize, kind: Orthogonalizer) -> Tensor<D> {
    let dims = g.dims();
    let (m, n) = (dims[D - 2], dims[D - 1]);
    let tall = m > n;
    let mut x = if tall { g.swap_dims(D - 2, D - 1) } else { g };
    let norm = x.clone().square().sum().sqrt();
    let norm = match kind {
        Orthogonalizer::NewtonSchulz => norm.clamp_min(EPS),
        Orthogonalizer::PolarExpress => norm * 1.02 + 1e-6,
    };
    x = x / norm.unsqueeze();
    let coefficients = match kind {
        Orthogonalizer::NewtonSchulz => vec![COEFFICIENTS; steps],
        Orthogonalizer::PolarExpress => POLAR_EXPRESS[..steps.min(POLAR_EXPRESS.len())].to_vec(),
    };
    for (a, b, c) in coefficients {
        let gram = x.clone().matmul(x.clone().swap_dims(D - 2, D - 1));
        let poly = gram.clone() * b + gram.clone().matmul(gram) * c;
        x = x.clone() * a + poly.matmul(x);
    }
    if tall { x.swap_dims(D - 2, D - 1) } else { x }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    /// The iteration by hand in f64 on the host, written from the formulas above: the norm's
    /// divisor from `‖G‖_F`, then each step's coefficients.
    fn by_hand(g: &[Vec<f64>], divisor: fn(f64) -> f64, coefficients: &[(f64, f64, f64)]) -> Vec<Vec<f64>> {
        let mul = |p: &[Vec<f64>], q: &[Vec<f64>]| -> Vec<Vec<f64>> {
            (0..p.len())
                .map(|i| (0..q[0].len()).map(|j| (0..q.len()).map(|k| p[i][k] * q[k][j]).sum()).collect())
                .collect()
        };
        let t =
            |p: &[Vec<f64>]| -> Vec<Vec<f64>> { (0..p[0].len()).map(|j| p.iter().map(|r| r[j]).collect()).collect() };
        let norm = divisor(g.iter().flatten().map(|v| v * v).sum::<f64>().sqrt());
        let mut x: Vec<Vec<f64>> = g.iter().map(|r| r.iter().map(|v| v / norm).collect()).collect();
        for &(a, b, c) in coefficients {
            let gram = mul(&x, &t(&x));
            let g2 = mul(&gram, &gram);
            let poly: Vec<Vec<f64>> =
                gram.iter().zip(&g2).map(|(r, s)| r.iter().zip(s).map(|(u, v)| b * u + c * v).collect()).collect();
            let px = mul(&poly, &x);
            x = x.iter().zip(&px).map(|(r, s)| r.iter().zip(s).map(|(u, v)| a * u + v).collect()).collect();
        }
        x
    }

    #[test]
    fn matches_the_iteration_by_hand_and_commutes_with_transpose() {
        let rows: Vec<Vec<f64>> =
            (0..3).map(|i| (0..5).map(|j| ((i * 5 + j) as f64 * 0.37).sin() + 0.1 * i as f64).collect()).collect();
        let flat: Vec<f32> = rows.iter().flatten().map(|&v| v as f32).collect();
        let g = Tensor::<2>::from_data(TensorData::new(flat, [3, 5]), &Device::default());
        let want = by_hand(&rows, |n| n, &[(3.4445, -4.775, 2.0315); 5]);
        let got: Vec<f32> = orthogonalize(g.clone(), 5, Orthogonalizer::NewtonSchulz).into_data().try_to_vec().unwrap();
        let tall: Vec<f32> = orthogonalize(g.clone().transpose(), 5, Orthogonalizer::NewtonSchulz)
            .transpose()
            .into_data()
            .try_to_vec()
            .unwrap();
        for (k, w) in want.iter().flatten().enumerate() {
            assert!((got[k] as f64 - w).abs() < 1e-5, "entry {k}: {} vs {w}", got[k]);
            assert!((tall[k] as f64 - w).abs() < 1e-5, "transposed entry {k}: {} vs {w}", tall[k]);
        }
        // Polar Express: nanochat's divisor and five steps of their own coefficients, written out.
        let polar = [
            (8.156554524902461, -22.48329292557795, 15.878769915207462),
            (4.042929935166739, -2.808917465908714, 0.5000178451051316),
            (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
            (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
            (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
        ];
        let want = by_hand(&rows, |n| 1.02 * n + 1e-6, &polar);
        let got: Vec<f32> = orthogonalize(g, 5, Orthogonalizer::PolarExpress).into_data().try_to_vec().unwrap();
        for (k, w) in want.iter().flatten().enumerate() {
            assert!((got[k] as f64 - w).abs() < 1e-4, "Polar Express entry {k}: {} vs {w}", got[k]);
        }
        // The quintic leaves singular values in roughly (0.5, 1.5), not at 1.
        let sv2: Vec<f64> = {
            let x = &want;
            (0..3).map(|i| x[i].iter().map(|v| v * v).sum::<f64>()).collect()
        };
        assert!(sv2.iter().all(|&s| s > 0.2 && s < 2.5), "row norms² {sv2:?}");
    }
}
