//! Rotary position embeddings (Su et al.), rotate-half convention (as in Llama / GPT-NeoX and
//! the PyTorch reference in `tools/torch_reference.py`).
//!
//! For head size `h` and position `t`: `θ_i = base^{−2i/h}`, and with `x = [x₁, x₂]` split in
//! halves, `RoPE(x) = [x₁ cos(tθ) − x₂ sin(tθ), x₂ cos(tθ) + x₁ sin(tθ)]`.
//!
//! Implemented with narrow/cat/mul rather than a fused RoPE op so that its gradient is plain
//! autodiff (checked against PyTorch).

use burn::tensor::{Device, Tensor, TensorData};

/// cos and sin tables, each `[1, 1, T, h/2]`, computed in f64.
pub fn tables(seq_len: usize, head_dim: usize, base: f64, device: &Device) -> (Tensor<4>, Tensor<4>) {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(seq_len * half);
    let mut sin = Vec::with_capacity(seq_len * half);
    let inv: Vec<f64> = (0..half).map(|i| 1.0 / base.powf((2 * i) as f64 / head_dim as f64)).collect();
    for t in 0..seq_len {
        for &inv in &inv {
            let angle = t as f64 * inv;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    let shape = vec![1, 1, seq_len, half];
    (
        Tensor::from_data(TensorData::new(cos, shape.clone()), device),
        Tensor::from_data(TensorData::new(sin, shape), device),
    )
}

/// `x`: `[B, H, T, h]` → rotated `[B, H, T, h]`.
pub fn apply(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let half = x.dims()[3] / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.narrow(3, half, half);
    let r1 = x1.clone() * cos.clone() - x2.clone() * sin.clone();
    let r2 = x2 * cos.clone() + x1 * sin.clone();
    Tensor::cat(vec![r1, r2], 3)
}
