//! One Transformer layer: an attention sublayer, then a feed-forward sublayer, each the
//! sublayer equation of [`crate::model::sublayer`].

use crate::model::attention::self_attention::{Attention, KvSlot};
use crate::model::base::context::ForwardContext;
use crate::model::base::records::RecordKind;
use crate::model::bhyt;
use crate::model::ffn_block::FfnBlock;
use crate::model::sublayer::{Sublayer, SublayerOut};
use burn::module::{Module, Param};
use burn::tensor::Tensor;

#[derive(Module, Debug)]
pub struct Layer {
    pub attn: Sublayer<Attention>,
    pub ffn: Sublayer<FfnBlock>,
    /// One gate for both sublayers (ReZero's `resweight`), when the recipe shares it.
    pub gate: Option<Param<Tensor<1>>>,
    /// The x0-mixing scalars `λ_r` and `λ₀` (`[1]` each) of `X ← λ_r·X + λ₀·X_1` before this
    /// layer (modded-nanogpt's block `lambdas`, nanochat's `resid_lambdas` and `x0_lambdas`).
    pub resid_lambda: Option<Param<Tensor<1>>>,
    pub x0_lambda: Option<Param<Tensor<1>>>,
    /// GPAS's `α_k` (`[1]`), scaling the stream after both residual additions of this layer.
    pub gpas: Option<Param<Tensor<1>>>,
}

/// Both sublayers' outputs, and BHyT's approximated FFN-input statistic when there is one.
pub struct LayerOut {
    pub attn: SublayerOut,
    pub ffn: SublayerOut,
    pub ffn_variance: Option<Tensor<3>>,
}

impl Layer {
    /// `λ_r·x + λ₀·x0` when the layer mixes in the embedding stream `x0 = X_1`; `x` otherwise.
    pub fn mix_x0(&self, x: Tensor<3>, x0: &Tensor<3>) -> Tensor<3> {
        match (&self.resid_lambda, &self.x0_lambda) {
            (Some(r), Some(l0)) => x * r.val().unsqueeze::<3>() + x0.clone() * l0.val().unsqueeze::<3>(),
            _ => x,
        }
    }

    /// GPAS's `X − SiLU(α_k)·sg(X)` on a sublayer's output when the recipe has it
    /// ([`crate::model::residual::gpas`]); `x` otherwise.
    fn scale_activations(&self, x: Tensor<3>) -> Tensor<3> {
        match &self.gpas {
            Some(alpha) => crate::model::residual::gpas::gpas(x, alpha.val()),
            None => x,
        }
    }

    /// The block: an attention sublayer, then a feed-forward sublayer, each
    /// `N_outer(a·X + c·N_out(F(s·N_in(X))))` (or its recipe's own step). `kv`: this layer's KV
    /// cache when decoding incrementally; `value_output`: its `‖W_V W_O‖²_F` when computed once
    /// for a decode; `keep_sums`: return each sublayer's `z_l` (see [`Sublayer::forward`]).
    pub fn forward(
        &self,
        x: Tensor<3>,
        ctx: &ForwardContext,
        kv: Option<&mut KvSlot>,
        value_output: Option<Tensor<1>>,
        keep_sums: bool,
    ) -> LayerOut {
        let d = x.dims()[2];
        // BHyT (Algorithm 1): the block input's exact s_x² for the attention input norm…
        let exact = bhyt::block_statistic(&self.attn, &x);
        // X_{l+1} = N_outer(a·X_l + c·N_out(Attn(s·N_in(X_l))))
        let attn = self.sublayer(&self.attn, x, exact.clone(), |f, h| f.forward(h, ctx, kv), ctx, keep_sums);
        // …and its approximation ŝ² (Theorem 3.5) for the FFN input norm.
        let ffn_variance = bhyt::ffn_variance(&self.attn, &self.ffn, exact, value_output, [ctx.bhyt_len, d]);
        // X_{l+2} = N_outer(a·X_{l+1} + c·N_out(FFN(s·N_in(X_{l+1}))))
        let x = attn.next.clone();
        let ffn = self.sublayer(&self.ffn, x, ffn_variance.clone(), |f, h| f.forward(h, ctx), ctx, keep_sums);
        LayerOut { attn, ffn, ffn_variance }
    }

    /// One of this layer's sublayers on `x`, with what the layer adds around it: TaperNorm's
    /// record of its input, the layer's shared gate, GPAS's scaling of its output.
    fn sublayer<F>(
        &self,
        sub: &Sublayer<F>,
        x: Tensor<3>,
        variance: Option<Tensor<3>>,
        f: impl FnOnce(&F, Tensor<3>) -> Tensor<3>,
        ctx: &ForwardContext,
        keep_sum: bool,
    ) -> SublayerOut {
        record_taper(sub, &x, ctx);
        let shared = self.gate.as_ref().map(Param::val);
        let mut out = sub.forward(x, variance, f, shared, keep_sum, ctx.compute.kernels);
        out.next = self.scale_activations(out.next);
        out
    }
}

/// TaperNorm's training forwards: the calibration statistics `[2]` of each `tapernorm` input
/// norm ([`crate::norm::TaperNorm::calibration`]), attention's then the FFN's of each layer.
pub const TAPER_CALIBRATION: RecordKind<Tensor<1>> = RecordKind::named("taper/calibration");

/// TaperNorm's calibration statistics of `sub`'s input norm on its input `x`, recorded when the
/// forward collects them and the slot is `tapernorm`.
fn record_taper<F>(sub: &Sublayer<F>, x: &Tensor<3>, ctx: &ForwardContext) {
    if let (true, Some(n)) =
        (ctx.records.collects(TAPER_CALIBRATION), sub.input_norm.as_ref().and_then(|n| n.as_taper()))
    {
        ctx.records.push(TAPER_CALIBRATION, n.calibration(x.clone()));
    }
}
