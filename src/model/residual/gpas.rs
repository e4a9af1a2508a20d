//! GPAS, gradient-preserving activation scaling (Chen et al., "GPAS: Accelerating Convergence of
//! LLM Pretraining via Gradient-Preserving Activation Scaling", 2025; the authors' `GPASBlock`
//! in `dandingsky/GPAS`, `peft_pretraining/modeling_llama.py`):
//!
//! ```text
//! X ← X − SiLU(α_k) · sg(X)        after each residual addition of Transformer layer k
//! ```
//!
//! The forward value is `(1 − SiLU(α_k))·X`: the stream is scaled down, so Pre-LN's hidden
//! states cannot grow layer after layer. `sg` (stop-gradient) leaves the gradient to `X`
//! unchanged, so the scaling does not shrink the gradients reaching earlier layers. `α_k` is one
//! learnable scalar per layer, shared by its attention and FFN additions, starting at 0
//! (`SiLU(0) = 0`: the identity at initialisation). Its gradient is
//! `∂L/∂α = −SiLU′(α)·Σ X ⊙ ∂L/∂X_out`.
//!
//! # Shapes
//! - `x`: `[B, T, d]`; `alpha`: `[1]`; output: `[B, T, d]`

use burn::tensor::Tensor;
use burn::tensor::activation::silu;

/// `x − SiLU(α)·sg(x)`.
pub fn gpas(x: Tensor<3>, alpha: Tensor<1>) -> Tensor<3> {
    let scale = silu(alpha).unsqueeze::<3>();
    x.clone() - x.detach() * scale
}

#[cfg(test)]
mod tests {
    use crate::model::residual::gpas::gpas;
    use crate::testutil::cpu;
    use burn::tensor::{Tensor, TensorData};

    /// The forward value by hand: α = 0.5, SiLU(0.5) = 0.5·σ(0.5) = 0.5/(1 + e^{-0.5}) = 0.311230.
    #[test]
    fn forward_scales_by_one_minus_silu() {
        let d = cpu();
        let x = Tensor::<3>::from_data(TensorData::new(vec![2.0f32, -4.0, 1.0], [1, 1, 3]), &d);
        let alpha = Tensor::<1>::from_data(TensorData::new(vec![0.5f32], [1]), &d);
        let y: Vec<f32> = gpas(x, alpha).into_data().try_to_vec::<f32>().unwrap();
        let s = 1.0 - 0.5 / (1.0 + (-0.5f64).exp());
        for (got, want) in y.iter().zip([2.0 * s, -4.0 * s, s]) {
            assert!((*got as f64 - want).abs() < 1e-6, "{got} vs {want}");
        }
    }

    /// The gradient to `x` is the incoming one, unscaled; the gradient to α is
    /// `−SiLU′(α)·Σ x·g` with `SiLU′(α) = σ(α)(1 + α(1 − σ(α)))`: at α = −1 and
    /// `L = Σ w ⊙ y`, `Σ x·w = 2·1 + (−4)·3 + 1·(−2) = −12`.
    #[test]
    fn gradient_passes_through_and_reaches_alpha() {
        let d = cpu().autodiff();
        let x = Tensor::<3>::from_data(TensorData::new(vec![2.0f32, -4.0, 1.0], [1, 1, 3]), &d).require_grad();
        let alpha = Tensor::<1>::from_data(TensorData::new(vec![-1.0f32], [1]), &d).require_grad();
        let w = Tensor::<3>::from_data(TensorData::new(vec![1.0f32, 3.0, -2.0], [1, 1, 3]), &d);
        let grads = (gpas(x.clone(), alpha.clone()) * w).sum().backward();
        let gx: Vec<f32> = x.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(gx, vec![1.0, 3.0, -2.0], "sg keeps the gradient to x unchanged");
        let ga: f32 = alpha.grad(&grads).unwrap().into_scalar();
        let a = -1.0f64;
        let sig = 1.0 / (1.0 + (-a).exp());
        let dsilu = sig * (1.0 + a * (1.0 - sig));
        assert!((ga as f64 - 12.0 * dsilu).abs() < 1e-5, "{ga} vs {}", 12.0 * dsilu);
    }
}
