//! Soft-capping (Gemma 2): `c·tanh(x/c)`, close to `x` for `|x| ≪ c` and never beyond `±c`,
//! applied to attention logits before the mask and to output logits.

use burn::tensor::Tensor;

/// `c·tanh(x/c)`, elementwise.
pub fn softcap<const D: usize>(x: Tensor<D>, c: f64) -> Tensor<D> {
    (x / c).tanh() * c
}
