//! The forward through the layers when the residual state is `n` streams
//! ([`crate::model::residual::stream_mix`]): `H_0[s] = X_1`, each sublayer's own step (read, branch, write), then
//! the collapse to `X_{2L+1}` (the sum for Hyper-Connections, mHC's learned read otherwise).

use crate::model::attention::self_attention::KvSlot;
use crate::model::base::context::ForwardContext;
use crate::model::residual::stream_mix::{StreamTrace, expand, sum_streams};
use crate::model::transformer::{SublayerTrace, Transformer, keeps_sums};
use burn::tensor::Tensor;

impl Transformer {
    /// The 2L sublayers on `n` streams from `X_1`, collapsed to `X_{2L+1}`. A sublayer's trace
    /// records the input it read as `X_l`, the mean of the streams after it as `z_l`, and the
    /// streams themselves.
    pub(super) fn run_streams(
        &self,
        x: Tensor<3>,
        n: usize,
        ctx: &ForwardContext,
        mut cache: Option<&mut [KvSlot]>,
    ) -> Tensor<3> {
        let k = self.meta.compute.kernels;
        let mut h = expand(x, n);
        let record = |step: crate::model::sublayer::StreamStep| {
            if keeps_sums(&ctx.records) {
                let [b, t, _, d] = step.next.dims();
                let sum: Tensor<3> = step.next.clone().mean_dim(2).reshape([b, t, d]);
                let streams = Some(StreamTrace { state: step.next.clone(), residual: step.residual });
                let (input, branch) = (step.input, step.branch);
                SublayerTrace { input, sum, branch, approx_variance: None, streams, depth_weights: None }
                    .record(&ctx.records);
            }
            step.next
        };
        for (i, layer) in self.layers.iter().enumerate() {
            let kv = cache.as_deref_mut().map(|c| &mut c[i]);
            h = record(layer.attn.stream_step(h, |f, x| f.forward(x, ctx, kv), k));
            h = record(layer.ffn.stream_step(h, |f, x| f.forward(x, ctx), k));
        }
        match &self.hc_head {
            Some(head) => head.collapse(h),
            None => sum_streams(h),
        }
    }
}
