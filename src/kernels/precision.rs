//! Mixed precision (`train.precision`): which float type the matmuls and the activations
//! between them compute in. Parameters, their gradients and AdamW's state always stay in the
//! master type (f32); a half-precision forward casts each matmul's operands down and keeps its
//! output in the half type, and every place that needs range or accumulation — norm statistics
//! (mean, variance, RMS, BHyT's ŝ²), the softmax, the loss, the variance regulariser and the
//! residual stream — casts back up first ([`widen`]). This is PyTorch autocast's split.
//! The casts are differentiable (burn's cast backward casts the gradient back), so gradients
//! reach the f32 parameters in f32.

use burn::tensor::{DType, FloatDType, Tensor};
use serde::{Deserialize, Serialize};

/// The compute type of the matmuls and the activations between them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in the master type (f32; f64 in the tests).
    #[default]
    F32,
    /// bfloat16: f32's range with an 8-bit mantissa; needs no loss scaling.
    Bf16,
    /// IEEE half: a 10-bit mantissa but a range up to 65504 (gradients below 6e-8 flush to
    /// zero), hence dynamic loss scaling in training.
    F16,
}

impl Precision {
    /// The half type, or `None` for full precision.
    pub fn half(self) -> Option<FloatDType> {
        match self {
            Precision::F32 => None,
            Precision::Bf16 => Some(FloatDType::BF16),
            Precision::F16 => Some(FloatDType::F16),
        }
    }

    /// Bytes of one activation value in the compute type.
    pub fn bytes(self) -> usize {
        if self == Precision::F32 { 4 } else { 2 }
    }

    /// `x` in the compute type: cast down to the half type when there is one (once: a tensor
    /// already in it passes through).
    pub fn compute<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self.half() {
            Some(h) if x.dtype() != DType::from(h) => x.cast(h),
            _ => x,
        }
    }

    /// `a · b` in the compute type (its output stays there).
    pub fn matmul<const D: usize>(self, a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
        self.compute(a).matmul(self.compute(b))
    }
}

/// `x` back in f32 when it is in a half type; any other tensor passes through unchanged (f32,
/// and the f64 of the tests).
pub fn widen<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if matches!(x.dtype(), DType::F16 | DType::BF16) { x.cast(FloatDType::F32) } else { x }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    fn t(v: Vec<f32>) -> Tensor<2> {
        Tensor::from_data(TensorData::new(v, [2, 2]), &Device::flex())
    }

    #[test]
    fn half_matmul_rounds_operands_and_widens_back() {
        // 1 + 2⁻⁹ is not a bf16 number (8-bit mantissa): it rounds to 1 (ties to even), while
        // f16 (10 bits) keeps it. [[a, 0], [0, 1]]·[[1, 0], [0, 1]] returns a as rounded.
        let a = 1.0 + 2f32.powi(-9);
        let m = || t(vec![a, 0.0, 0.0, 1.0]);
        let id = || t(vec![1.0, 0.0, 0.0, 1.0]);
        let first = |x: Tensor<2>| widen(x).into_data().as_slice::<f32>().unwrap()[0];
        assert_eq!(first(Precision::Bf16.matmul(m(), id())), 1.0);
        assert_eq!(first(Precision::F16.matmul(m(), id())), a);
        assert_eq!(first(Precision::F32.matmul(m(), id())), a);
        assert_eq!(widen(Precision::Bf16.matmul(m(), id())).dtype(), DType::F32);
    }

    #[test]
    fn gradients_flow_back_to_f32_through_the_casts() {
        let ad = Device::flex().autodiff();
        let w = Tensor::<2>::from_data(TensorData::new(vec![0.5f32, -1.0, 2.0, 0.25], [2, 2]), &ad).require_grad();
        let x = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]), &ad);
        // L = Σ x·w: ∂L/∂w_{kj} = Σ_i x_{ik} = column sums of x (4, 6), exact in any precision.
        let loss = widen(Precision::F16.matmul(x, w.clone())).sum();
        let g = w.grad(&loss.backward()).unwrap();
        assert_eq!(g.dtype(), DType::F32);
        assert_eq!(g.into_data().as_slice::<f32>().unwrap(), &[4.0, 4.0, 6.0, 6.0]);
    }
}
