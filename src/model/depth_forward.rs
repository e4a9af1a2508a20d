//! The forward through the layers when sublayers read over depth (Attention Residuals,
//! [`crate::model::residual::depth_attention`]): from `X_1`, each sublayer reads its sources, runs its branch and
//! adds the output to the open block; the output reads every source with its own query.

use crate::model::attention::self_attention::KvSlot;
use crate::model::base::context::ForwardContext;
use crate::model::residual::depth_attention::Sources;
use crate::model::transformer::{SublayerTrace, Transformer};
use burn::tensor::Tensor;

impl Transformer {
    /// The 2L sublayers reading over depth from `X_1`, then the output's read. A sublayer's trace
    /// records what it read as `X_l`, its block's running sum as `z_l`, and its weights.
    pub(super) fn run_attn_res(
        &self,
        x: Tensor<3>,
        block: usize,
        ctx: &ForwardContext,
        mut cache: Option<&mut [KvSlot]>,
    ) -> Tensor<3> {
        let k = self.meta.compute.kernels;
        let head = self.attn_res_head.as_ref().expect("an Attention Residuals model has its output query");
        let mut state = Sources::new(x, block, head.eps());
        let record = |input, sum: Tensor<3>, branch, weights| {
            let (approx_variance, streams, depth_weights) = (None, None, Some(weights));
            SublayerTrace { input, sum, branch, approx_variance, streams, depth_weights }.record(&ctx.records);
        };
        for (i, layer) in self.layers.iter().enumerate() {
            let (input, weights) = state.read(layer.attn.attn_res.as_ref());
            let kv = cache.as_deref_mut().map(|c| &mut c[i]);
            let branch = layer.attn.branch(input.clone(), None, |f, x| f.forward(x, ctx, kv), k);
            record(input, state.write(branch.clone()), branch, weights);
            let (input, weights) = state.read(layer.ffn.attn_res.as_ref());
            let branch = layer.ffn.branch(input.clone(), None, |f, x| f.forward(x, ctx), k);
            record(input, state.write(branch.clone()), branch, weights);
        }
        let (hidden, _) = state.read(Some(head));
        hidden
    }
}
