//! One Transformer layer: an attention sublayer, then a feed-forward sublayer, each the
//! sublayer equation of [`super::sublayer`].

use super::attention::{Attention, AttnContext, KvSlot};
use super::bhyt;
use super::ffn::FeedForward;
use super::sublayer::{Sublayer, SublayerOut};
use burn::module::Module;
use burn::tensor::Tensor;

#[derive(Module, Debug)]
pub struct Layer {
    pub attn: Sublayer<Attention>,
    pub ffn: Sublayer<FeedForward>,
}

/// Both sublayers' outputs, and BHyT's approximated FFN-input statistic when there is one.
pub struct LayerOut {
    pub attn: SublayerOut,
    pub ffn: SublayerOut,
    pub ffn_variance: Option<Tensor<3>>,
}

impl Layer {
    /// `kv`: this layer's KV cache when decoding incrementally; `value_output`: its
    /// `‖W_V W_O‖²_F` when computed once for a decode; `keep_sums`: return each sublayer's
    /// `z_l` (see [`Sublayer::forward`]).
    pub fn forward(
        &self,
        x: Tensor<3>,
        ctx: &AttnContext,
        kv: Option<&mut KvSlot>,
        value_output: Option<Tensor<1>>,
        keep_sums: bool,
    ) -> LayerOut {
        let (d, c) = (x.dims()[2], &ctx.compute);
        let exact = bhyt::block_statistic(&self.attn, &x);
        let (e, k) = (exact.clone(), c.kernels);
        let attn_in = |n: &_, h| bhyt::input_norm(n, h, e, k);
        let attn = self.attn.forward(x, k, attn_in, |f, h| f.forward(h, ctx, kv), keep_sums);
        let ffn_variance = bhyt::ffn_variance(&self.attn, &self.ffn, exact, value_output, [ctx.bhyt_len, d]);
        let v = ffn_variance.clone();
        let ffn_in = |n: &_, h| bhyt::input_norm(n, h, v, k);
        let ffn = self.ffn.forward(attn.next.clone(), k, ffn_in, |f, h| f.forward(h, c), keep_sums);
        LayerOut { attn, ffn, ffn_variance }
    }
}
