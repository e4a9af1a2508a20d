//! The context of one forward, shared by every sublayer: the positions it runs at (RoPE tables,
//! the causal and padding mask, BHyT's length), the run's compute settings, what it carries from
//! layer to layer (value residual's first values, a decode's `‖W_V W_O‖²_F`) and the
//! [`Records`] it collects beside its output.

use crate::model::base::compute::Compute;
use crate::model::base::records::Records;
use crate::model::base::rope::{self, Rope};
use burn::tensor::{Tensor, TensorData};
/// One forward's context (see the module's doc).
pub struct ForwardContext {
    /// RoPE tables for the positions of this forward: `[1, 1, t, h/2]` when every row stands at
    /// the same positions, else `[B, 1, t, h/2]`.
    pub cos: Tensor<4>,
    pub sin: Tensor<4>,
    /// Additive mask `[1 or B, 1, t, T]` over the `T` keys (cached and new): 0 where a query
    /// may look, −∞ above the causal diagonal, and a large negative value on padding keys.
    pub mask: Tensor<4>,
    /// What the sublayers record beside the output: the kinds the caller switched on.
    pub records: Records,
    /// The `T` of BHyT's variance approximation `‖W_V W_O‖²/(T d)`: the sequence length in
    /// training, a fixed length (the training one) when decoding, so that a position's output
    /// does not depend on how many tokens follow it.
    pub bhyt_len: usize,
    /// Whether `mask` is purely causal (no padding keys): the fused softmax then applies it
    /// without reading the mask tensor.
    pub causal: bool,
    /// Each layer's `‖W_V W_O‖²_F` computed once for a decode (the weights do not change
    /// between its steps), or `None`: each layer computes its own in the forward.
    pub value_output: Option<Vec<Tensor<1>>>,
    /// The model's kernels, precision and memory limits.
    pub compute: Compute,
    /// Value residual: the first attention sublayer's values `[B, n_kv, t, h]` of this
    /// forward's positions, left here for the later layers.
    pub first_values: std::cell::RefCell<Option<Tensor<4>>>,
}

/// The additive value hiding a padding key: finite, so that a padding query (which sees only
/// padding) still has a defined softmax, and far enough below any score that its weight for a
/// real query is exactly 0 in f32.
pub const PAD_MASK: f32 = -1e9;

impl ForwardContext {
    /// A full causal forward over `seq_len` positions (training, evaluation, probes).
    pub fn new(seq_len: usize, rope: Rope, compute: Compute, device: &burn::tensor::Device) -> Self {
        let d = Decoding { new: seq_len, offset: 0, key_mask: None, row_starts: None, bhyt_len: seq_len };
        Self::decoding(d, rope, compute, device)
    }

    /// `d.new` positions after `d.offset` cached ones, with an optional padding mask; each row
    /// rotated at its own positions when `d.row_starts` says so.
    pub fn decoding(d: Decoding, r: Rope, compute: Compute, device: &burn::tensor::Device) -> Self {
        let (cos, sin) = match &d.row_starts {
            Some(starts) => rope::tables_at(starts, d.new, r.head_dim, r.base, device),
            None => {
                let (cos, sin) = rope::tables(d.offset + d.new, r.head_dim, r.base, device);
                let rows = |t: Tensor<4>| if d.offset == 0 { t } else { t.narrow(2, d.offset, d.new) };
                (rows(cos), rows(sin))
            }
        };
        let causal = causal_mask(d.new, d.offset, device);
        let only_causal = d.key_mask.is_none();
        let mask = match d.key_mask {
            Some(k) => causal + k,
            None => causal,
        };
        Self {
            cos,
            sin,
            mask,
            records: Records::default(),
            bhyt_len: d.bhyt_len,
            causal: only_causal,
            compute,
            value_output: None,
            first_values: Default::default(),
        }
    }

    /// Whether every row shares one RoPE table (`[1, 1, t, h/2]`), as the fused RoPE needs.
    pub fn shared_positions(&self) -> bool {
        self.cos.dims()[0] == 1
    }
}

/// `[1, 1, new, offset + new]`: 0 where the query at cache position `offset + i` may look
/// (keys at or before it), −∞ above the diagonal.
fn causal_mask(new: usize, offset: usize, device: &burn::tensor::Device) -> Tensor<4> {
    let total = offset + new;
    let mut m = vec![0f32; new * total];
    for i in 0..new {
        m[i * total + offset + i + 1..(i + 1) * total].fill(f32::NEG_INFINITY);
    }
    Tensor::from_data(TensorData::new(m, vec![1, 1, new, total]), device)
}

/// Where a forward sits in a decoded sequence.
pub struct Decoding {
    /// Positions fed now.
    pub new: usize,
    /// Positions already in the KV cache (the cache's frame, padding included).
    pub offset: usize,
    /// `[B, 1, 1, offset + new]`: [`PAD_MASK`] on padding keys, 0 elsewhere.
    pub key_mask: Option<Tensor<4>>,
    /// Each row's own position of its first new token (its tokens so far, padding excluded;
    /// negative inside a padded prefill, where the padding queries see only padding), when the
    /// rows of the batch stand at different positions; `None`: every row at `offset`.
    pub row_starts: Option<Vec<i64>>,
    /// See [`ForwardContext::bhyt_len`].
    pub bhyt_len: usize,
}
