//! Rotary position embeddings (Su et al.), rotate-half convention (as in Llama / GPT-NeoX and
//! the PyTorch reference in `tools/torch_reference.py`).
//!
//! For head size `h` and position `t`: `θ_i = base^{−2i/h}`, and with `x = [x₁, x₂]` split in
//! halves, `RoPE(x) = [x₁ cos(tθ) − x₂ sin(tθ), x₂ cos(tθ) + x₁ sin(tθ)]`.
//!
//! Implemented with narrow/cat/mul rather than a fused RoPE op so that its gradient is plain
//! autodiff (checked against PyTorch).

use burn::tensor::{Device, Tensor, TensorData};

/// `θ_i = base^{−2i/h}` for `i < h/2`, in f64.
fn inverse_frequencies(head_dim: usize, base: f64) -> Vec<f64> {
    (0..head_dim / 2).map(|i| 1.0 / base.powf((2 * i) as f64 / head_dim as f64)).collect()
}

/// cos and sin of `pos · θ_i` for each position, `[rows, 1, positions/rows, h/2]`, rounded
/// from f64 to f32 once.
fn tables_of(
    positions: impl Iterator<Item = f64>,
    rows: usize,
    head_dim: usize,
    base: f64,
    device: &Device,
) -> (Tensor<4>, Tensor<4>) {
    let inv = inverse_frequencies(head_dim, base);
    let (mut cos, mut sin) = (Vec::new(), Vec::new());
    for pos in positions {
        for &inv in &inv {
            let angle = pos * inv;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    let t = cos.len() / (rows * inv.len()).max(1);
    let shape = vec![rows, 1, t, inv.len()];
    (
        Tensor::from_data(TensorData::new(cos, shape.clone()), device),
        Tensor::from_data(TensorData::new(sin, shape), device),
    )
}

/// cos and sin tables, each `[1, 1, T, h/2]`, for positions `0 … T − 1`.
pub fn tables(seq_len: usize, head_dim: usize, base: f64, device: &Device) -> (Tensor<4>, Tensor<4>) {
    tables_of((0..seq_len).map(|t| t as f64), 1, head_dim, base, device)
}

/// cos and sin tables `[B, 1, t, h/2]`, row `b` at positions `starts[b] … starts[b] + t − 1`
/// (a negative position, a padding slot that no real query attends to, is taken as 0). The
/// same values as [`tables`] at the same positions.
pub fn tables_at(starts: &[i64], t: usize, head_dim: usize, base: f64, device: &Device) -> (Tensor<4>, Tensor<4>) {
    let positions = starts.iter().flat_map(|&s| (0..t as i64).map(move |i| (s + i).max(0) as f64));
    tables_of(positions, starts.len(), head_dim, base, device)
}

/// `x`: `[B, H, T, h]` → rotated `[B, H, T, h]` (tables `[1 or B, 1, T, h/2]`).
pub fn apply(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let half = x.dims()[3] / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.narrow(3, half, half);
    let r1 = x1.clone() * cos.clone() - x2.clone() * sin.clone();
    let r2 = x2 * cos.clone() + x1 * sin.clone();
    Tensor::cat(vec![r1, r2], 3)
}

/// The rotary embedding's head size and base (`model.rope_base`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    pub head_dim: usize,
    pub base: f64,
}
