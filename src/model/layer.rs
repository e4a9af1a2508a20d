//! One Transformer layer: an attention sublayer, then a feed-forward sublayer, each the
//! sublayer equation of [`super::sublayer`].

use super::attention::{Attention, AttnContext};
use super::bhyt;
use super::ffn::FeedForward;
use super::sublayer::{Sublayer, SublayerOut, maybe_norm};
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
    pub fn forward(&self, x: Tensor<3>, ctx: &AttnContext) -> LayerOut {
        let ffn_variance = bhyt::ffn_variance(&self.attn, &self.ffn, &x);
        let attn = self.attn.forward(x, maybe_norm, |f, h| f.forward(h, ctx));
        let v = ffn_variance.clone();
        let ffn = self.ffn.forward(attn.next.clone(), |n, h| bhyt::ffn_input(n, h, v), |f, h| f.forward(h));
        LayerOut { attn, ffn, ffn_variance }
    }
}
