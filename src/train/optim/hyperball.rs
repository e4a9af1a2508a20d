//! The hyperball step (Wen, Dang, Lyu, Ma and Liang 2025, "Fantastic Pretraining Optimizers and
//! Where to Find Them 2.1: Hyperball Optimization"): a matrix is kept at its initial Frobenius
//! norm `R = ‖W₀‖_F` and moves by a step whose size relative to it is the learning rate,
//! whatever the base optimizer's update `u`:
//!
//! ```text
//! W ← Norm(W − η·R·Norm(u))·R,     Norm(x) = x / ‖x‖_F
//! ```
//!
//! No weight decay: fixing the norm replaces it. (The authors' PyTorch code, which this follows
//! in the blog's Frobenius form, also divides AdamH's step by Adam's `1 − β₁ᵗ`; the blog's
//! formula and normlab do not.)

use burn::tensor::Tensor;

/// The floor on a norm before dividing by it.
const EPS: f32 = 1e-12;

/// `‖x‖_F` as a one-element tensor (no read back to the host).
pub fn frobenius<const D: usize>(x: &Tensor<D>) -> Tensor<1> {
    x.clone().square().sum().sqrt()
}

/// One hyperball step of `w` along `u` at rate `lr`, on the sphere of radius `radius` (`[1]`).
pub fn step<const D: usize>(w: Tensor<D>, u: Tensor<D>, lr: f64, radius: Tensor<1>) -> Tensor<D> {
    let scale = radius.clone() * lr / frobenius(&u).clamp_min(EPS);
    let moved = w - u * scale.unsqueeze();
    let back = radius / frobenius(&moved).clamp_min(EPS);
    moved * back.unsqueeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    #[test]
    fn stays_on_the_sphere_and_moves_by_the_rate() {
        let dev = Device::default();
        let w = Tensor::<2>::from_data(TensorData::new(vec![3.0f32, 0.0, 0.0, 4.0], [2, 2]), &dev);
        let u = Tensor::<2>::from_data(TensorData::new(vec![0.0f32, 2.0, 0.0, 0.0], [2, 2]), &dev);
        let r = Tensor::<1>::from_data(TensorData::new(vec![5.0f32], [1]), &dev);
        let got: Vec<f32> = step(w, u, 0.1, r).into_data().try_to_vec().unwrap();
        // By hand: Norm(u) = e₁₂, W − 0.1·5·e₁₂ = [[3, −0.5], [0, 4]], norm √25.25, times 5.
        let n = 25.25f64.sqrt();
        let want = [3.0 / n * 5.0, -0.5 / n * 5.0, 0.0, 4.0 / n * 5.0];
        for (g, w) in got.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }
}
