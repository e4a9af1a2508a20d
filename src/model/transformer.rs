//! The decoder-only Transformer: `X_1 = N_emb(e · Embed(x))` (`e` a learnable scalar when the
//! recipe has an embedding scale), 2L sublayers (attention then FFN in
//! each Transformer layer), `logits = N_final(X_{2L+1}) W_out`. Embedding and output
//! projection are untied unless `model.tie_embeddings` (imported checkpoints): then `W_out = Eᵀ`.

use crate::init::{Init, ParamBuilder, ParamSource};
use crate::kernels::{Precision, widen};
use crate::model::attention::self_attention::{Attention, AttnShape, HEAD_MAX, KvSlot, STATS};
use crate::model::base::compute::Compute;
use crate::model::base::context::ForwardContext;
use crate::model::base::names;
use crate::model::base::records::{RecordKind, Records};
use crate::model::base::rope::Rope;
use crate::model::base::softcap::softcap;
use crate::model::base::terms::{LossTerm, Reading, Reduce};
use crate::model::chunked_loss::chunked_cross_entropy;
use crate::model::ffn::dense::{DenseFfn, FfnShape};
use crate::model::ffn::moe::balance::{MoeBalance, ROUTING};
use crate::model::ffn::moe::block::{Moe, MoeShape};
use crate::model::ffn_block::FfnBlock;
use crate::model::hook::Hook;
use crate::model::layer::{Layer, TAPER_CALIBRATION};
use crate::model::model_config::ModelConfig;
use crate::model::moment_sigmas::{self, LayerInit, MomentSigmas};
use crate::model::regularizer::{REGULARIZER, variance_penalty};
use crate::model::residual::unit_sphere::{self, Unit};
use crate::model::sublayer::{Sublayer, SublayerOut};
use crate::norm::Norm;
use crate::recipe::{GateOwner, Residual, ResolvedRecipe, SublayerPlan};
use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor};

#[derive(Module, Debug)]
pub struct Transformer {
    pub tok_emb: Param<Tensor<2>>,
    /// The learnable scalar `e` on the token embeddings, `[1]`, when the recipe has one.
    pub emb_scale: Option<Param<Tensor<1>>>,
    pub emb_norm: Option<Norm>,
    pub layers: Vec<Layer>,
    pub final_norm: Option<Norm>,
    /// `[d, V]`; `None` when tied to the token embedding (`logits = x Eᵀ`).
    pub lm_head: Option<Param<Tensor<2>>>,
    /// nGPT's logit scale `s_z` `[V]` (stored; used times `meta.hypersphere`'s factor).
    pub sz: Option<Param<Tensor<1>>>,
    /// mHC's collapse of the residual streams before the final norm.
    pub hc_head: Option<crate::model::residual::stream_mix::StreamHead>,
    /// Attention Residuals' read of the output over depth.
    pub attn_res_head: Option<crate::model::residual::depth_attention::DepthQuery>,
    #[module(skip)]
    pub meta: ModelMeta,
}

/// Non-parameter facts the forward needs.
#[derive(Clone, Debug)]
pub struct ModelMeta {
    pub rope: Rope,
    pub regularizer: f64,
    pub recipe: String,
    /// Soft-capping of the output logits, `c·tanh(logits/c)`.
    pub final_softcap: Option<f64>,
    /// The constant multiplying the token embeddings (Gemma's `√d`), when the recipe has one.
    pub embedding_multiplier: Option<f64>,
    /// The residual kind: the plain sum, `n` streams, attention over depth or nGPT's sphere.
    pub residual: crate::recipe::Residual,
    /// QK-clip's settings: a training forward then records every head's largest logit.
    pub qk_clip: Option<crate::recipe::QkClip>,
    /// The initialisation kind (under CompleteP the optimizer scales the layers' ε).
    pub init: crate::recipe::InitScheme,
    /// TaperNorm's gate schedule, when a slot is `tapernorm`.
    pub taper: Option<crate::recipe::Taper>,
    /// What changes the weights after every optimizer step, in order: the recipe's hooks, then
    /// a MoE model's bias balancing ([`Transformer::after_step`]).
    pub after_step: Vec<Hook>,
    /// Kernels, precision and memory limits, handed to every module each forward.
    pub compute: Compute,
    /// The MoE balancing terms' coefficients and the bias step, when the model has MoE layers.
    pub moe: Option<MoeBalance>,
}

/// What a sublayer exposes to the probes: `X_l` (entering), `Z_l` (after the residual
/// addition, before any outer norm) and the residual-branch output.
#[derive(Clone, Debug)]
pub struct SublayerTrace {
    pub input: Tensor<3>,
    pub sum: Tensor<3>,
    pub branch: Tensor<3>,
    /// BHyT only, FFN sublayers: the approximated input variance `ŝ²` (`[B, T, 1]`).
    pub approx_variance: Option<Tensor<3>>,
    /// With residual streams: the streams after the sublayer and its residual mixing `R`.
    pub streams: Option<crate::model::residual::stream_mix::StreamTrace>,
    /// With Attention Residuals: the weights `α` `[B, T, S]` over the sources it read.
    pub depth_weights: Option<Tensor<3>>,
}

/// What [`Transformer::forward`] returns besides the logits; neither changes the computation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// Every sublayer's `z_l` (the variance regulariser reads them).
    pub sums: bool,
    /// The per-sublayer traces (the probes read them).
    pub traces: bool,
}

impl Keep {
    /// The logits only.
    pub const LOGITS: Keep = Keep { sums: false, traces: false };
    /// The logits and the per-sublayer traces.
    pub const TRACES: Keep = Keep { sums: false, traces: true };
}

/// Every sublayer's `z_l`, when the forward keeps them ([`Keep::sums`]: KiteNorm's regulariser).
pub const SUMS: RecordKind<Tensor<3>> = RecordKind::named("sublayer/sum");
/// Every sublayer's trace, when the forward keeps them ([`Keep::traces`]: the probes).
pub const TRACES: RecordKind<SublayerTrace> = RecordKind::named("sublayer/trace");

impl SublayerTrace {
    /// Records this sublayer's `z_l` and its trace, as far as `records` collect them.
    pub(super) fn record(self, records: &Records) {
        if records.collects(SUMS) {
            records.push(SUMS, self.sum.clone());
        }
        records.push(TRACES, self);
    }
}

/// Whether a forward under `records` needs each sublayer's `z_l` (for the sums or the traces).
pub(super) fn keeps_sums(records: &Records) -> bool {
    records.collects(SUMS) || records.collects(TRACES)
}

/// The forward up to the final norm.
struct Hidden {
    hidden: Tensor<3>,
    last_hidden: Tensor<3>,
    records: Records,
}

/// Forward results. `sums` holds every `z_l` when [`Keep::sums`] asked for them, `traces` one
/// entry per sublayer when [`Keep::traces`] did; each is empty otherwise. `records` holds what
/// the forward collected ([`Transformer::records_for`]): attention's diagnostics when probing,
/// QK-clip's logit maxima and TaperNorm's calibration when training, a MoE model's routing
/// when training or probing.
pub struct ForwardOutput {
    pub logits: Tensor<3>,
    pub sums: Vec<Tensor<3>>,
    pub traces: Vec<SublayerTrace>,
    /// `X_{2L+1}`, the hidden state after the last sublayer (before any final norm).
    pub last_hidden: Tensor<3>,
    pub records: Records,
}

/// What the probes read of a forward: every sublayer's trace, the last hidden state and the
/// forward's records, without the logits (see [`Transformer::trace`]).
pub struct Traced {
    pub traces: Vec<SublayerTrace>,
    /// `X_{2L+1}`, the hidden state after the last sublayer (before any final norm).
    pub last_hidden: Tensor<3>,
    /// Per token, the RMS of its output logits and their log-sum-exp `log Z`, `[B·T]` each.
    pub logit_rms: Tensor<1>,
    pub log_z: Tensor<1>,
    /// Attention's diagnostics ([`STATS`]) and a MoE model's routing ([`ROUTING`]).
    pub records: Records,
}

/// A loss forward's results: the loss `[1]` (CE plus every term times its weight), the CE, the
/// terms by name and, for a training forward, what the step reads of it by name.
pub struct LossParts {
    pub loss: Tensor<1>,
    pub ce: Tensor<1>,
    pub terms: Vec<LossTerm>,
    pub readings: Vec<Reading>,
}

impl LossParts {
    /// The value of the term `name`, when the loss has it.
    pub fn term(&self, name: &str) -> Option<Tensor<1>> {
        self.terms.iter().find(|t| t.name == name).map(|t| t.value.clone())
    }
}

/// The name of PaLM's z-loss term, mean log²Z over the counted tokens.
pub const Z_LOSS: &str = "z";

/// What a training step minimises besides the recipe's own terms: which targets count
/// (`masked`: those ≥ 0) and PaLM's z-loss coefficient (`c · mean log²Z`; 0 = none).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Objective {
    pub masked: bool,
    pub z_loss: f64,
}

/// The cross-entropy of a forward: `objective` = CE + c·z (carrying both gradients), the CE and
/// z values, and what the forward recorded.
struct CeParts {
    objective: Tensor<1>,
    ce: Tensor<1>,
    z: Option<Tensor<1>>,
    sums: Vec<Tensor<3>>,
    records: Records,
}

impl Transformer {
    /// Builds the model of `cfg`, resolving its recipe: seeded init (`ParamSource::Seeded`) or
    /// loaded weights (`ParamSource::Loaded`). A run resolves its recipe once, when its config
    /// is loaded, and builds with [`Transformer::with_recipe`].
    pub fn new(cfg: &ModelConfig, source: ParamSource, device: &Device) -> anyhow::Result<Self> {
        Self::with_recipe(cfg, &cfg.validate()?.1, source, device)
    }

    /// Builds the model of `cfg` with `recipe`, resolved for `cfg`'s sizes and ε.
    pub fn with_recipe(
        cfg: &ModelConfig,
        recipe: &ResolvedRecipe,
        source: ParamSource,
        device: &Device,
    ) -> anyhow::Result<Self> {
        let dims = crate::recipe::Dims { n_layers: cfg.n_layers, d_model: cfg.d_model };
        anyhow::ensure!(
            recipe.dims == dims && recipe.eps == cfg.norm_eps,
            "recipe `{}` was resolved for {:?} and ε = {}, not for this model's {dims:?} and ε = {}; resolve it \
                for this model",
            recipe.name,
            recipe.dims,
            recipe.eps,
            cfg.norm_eps
        );
        // Loaded weights were saved on the sphere; drawn ones are put there (nGPT's first
        // `normalize_matrices`).
        let drawn = !matches!(source, ParamSource::Loaded(_));
        let mut b = ParamBuilder::new(device, source);
        let compute = Compute::for_device(cfg.kernels, device);
        let model = Self::build(cfg, recipe, &mut b, compute)?;
        b.finish()?;
        let model = if drawn && recipe.residual.hypersphere().is_some() { model.project_to_sphere() } else { model };
        // Under LoRA only the adapters (and, by option, the recipe's own parameters) train.
        Ok(match &cfg.lora {
            Some(l) => crate::model::base::lora::set_trainable(model, |name, rank| l.trains(name, rank)),
            None => model,
        })
    }

    /// nGPT: the embedding and every weight vector along `d` scaled to unit L2 norm
    /// ([`crate::model::residual::unit_sphere`]); the model unchanged for any other recipe.
    pub fn project_to_sphere(mut self) -> Self {
        if self.meta.residual.hypersphere().is_none() {
            return self;
        }
        self.tok_emb = unit_sphere::unit(self.tok_emb, Unit::Rows);
        self.lm_head = self.lm_head.map(|w| unit_sphere::unit(w, Unit::Columns));
        for layer in &mut self.layers {
            unit_sphere::project_attention(&mut layer.attn.f);
            if let crate::model::ffn_block::FfnBlock::Dense(f) = &mut layer.ffn.f {
                unit_sphere::project_ffn(f);
            }
        }
        self
    }

    /// The largest logits and attention-score tensors one forward materialises whole (values);
    /// beyond them the loss runs over chunks of tokens and attention over blocks of query rows.
    pub fn set_memory_limits(&mut self, logits: usize, scores: usize) {
        self.meta.compute.logits_limit = logits;
        self.meta.compute.scores_limit = scores;
    }

    /// Computes the matmuls and the activations between them in `p` (`train.precision`); the
    /// parameters stay in their own type. See [`crate::kernels::precision`].
    pub fn set_precision(&mut self, p: Precision) {
        self.meta.compute.precision = p;
    }

    fn build(
        cfg: &ModelConfig,
        recipe: &ResolvedRecipe,
        b: &mut ParamBuilder<'_>,
        compute: Compute,
    ) -> anyhow::Result<Self> {
        let d = cfg.d_model;
        let sigmas =
            recipe.init.moment_control().map(|mc| moment_sigmas::sigmas(cfg, &recipe.sublayers, mc)).transpose()?;
        let std_of = |pick: fn(&MomentSigmas) -> f64| sigmas.as_ref().map_or(cfg.init_std, pick);
        let std = std_of(|s| s.embedding);
        let tok_emb = b.matrix(names::TOKEN_EMBEDDING, [cfg.vocab_size, d], Init::Normal { std })?;
        let emb_scale =
            recipe.embedding.scale.map(|e| b.vector(names::EMBEDDING_SCALE, 1, Init::Constant(e))).transpose()?;
        let emb_norm = recipe.embedding.norm.clone().map(|k| Norm::new(k, d, b, names::EMBEDDING_NORM)).transpose()?;
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for (i, pair) in recipe.sublayers.chunks(2).enumerate() {
            let init = LayerInit::new(cfg, &pair[0], &pair[1], sigmas.as_ref(), i);
            layers.push(Self::layer(cfg, recipe, &pair[0], &pair[1], init, b, i)?);
        }
        let final_norm = recipe.logits.norm.clone().map(|k| Norm::new(k, d, b, names::FINAL_NORM)).transpose()?;
        let lm_head = (!cfg.tie_embeddings)
            .then(|| {
                b.matrix(names::OUTPUT_PROJECTION, [d, cfg.vocab_size], Init::Normal { std: std_of(|s| s.output) })
            })
            .transpose()?;
        let sz = recipe
            .residual
            .hypersphere()
            .map(|h| b.vector(names::LOGIT_SCALE, cfg.vocab_size, Init::Constant(h.sz.stored)))
            .transpose()?;
        anyhow::ensure!(
            recipe.residual.hypersphere().is_none() || cfg.kv_heads() == cfg.n_heads,
            "nGPT's s_qk is one vector over the query and key heads; set model.n_kv_heads = model.n_heads ({})",
            cfg.n_heads
        );
        let meta = Self::meta(cfg, recipe, compute);
        let hc_head = recipe
            .residual
            .streams()
            .filter(|s| !matches!(s.mixing, crate::recipe::Mixing::Hc { .. }))
            .map(|s| crate::model::residual::stream_mix::StreamHead::new(s.n, d, cfg.init_std, cfg.norm_eps, b))
            .transpose()?;
        let attn_res_head = recipe
            .residual
            .attn_res()
            .map(|_| crate::model::residual::depth_attention::DepthQuery::new(d, cfg.norm_eps, b, names::DEPTH_HEAD))
            .transpose()?;
        Ok(Self { tok_emb, emb_scale, emb_norm, layers, final_norm, lm_head, sz, hc_head, attn_res_head, meta })
    }

    /// The non-parameter facts the forward reads, from the recipe and the config.
    fn meta(cfg: &ModelConfig, recipe: &ResolvedRecipe, compute: Compute) -> ModelMeta {
        ModelMeta {
            rope: Rope { head_dim: cfg.head_dim(), base: cfg.rope_base },
            regularizer: recipe.logits.regularizer,
            recipe: recipe.name.clone(),
            final_softcap: recipe.logits.softcap,
            embedding_multiplier: recipe.embedding.multiplier,
            residual: recipe.residual,
            qk_clip: recipe.attention.qk_clip,
            init: recipe.init,
            taper: recipe.taper,
            after_step: Self::hooks(cfg, recipe),
            compute,
            moe: cfg.moe.as_ref().map(|m| MoeBalance { aux: m.aux_loss, form: m.aux_form, z: m.z_loss }),
        }
    }

    /// The after-step hooks: the recipe's, then DeepSeek V3's bias step γ of a MoE model whose
    /// router has one (under LoRA the base, its selection biases included, stays the parent's).
    fn hooks(cfg: &ModelConfig, recipe: &ResolvedRecipe) -> Vec<Hook> {
        let bias = cfg.moe.as_ref().and_then(|m| m.router.bias_step()).filter(|_| cfg.lora.is_none());
        let recipe = recipe.after_step().into_iter().map(Hook::Recipe);
        recipe.chain(bias.map(|gamma| Hook::BalanceExperts { gamma })).collect()
    }

    /// Layer `i`'s attention sizes, init scales and the recipe's attention options.
    fn attn_shape(
        cfg: &ModelConfig,
        recipe: &ResolvedRecipe,
        init: &LayerInit,
        i: usize,
        lora: Option<crate::model::base::lora::LoraPlan>,
    ) -> AttnShape {
        use crate::model::attention::self_attention::ValueRole;
        let a = &recipe.attention;
        AttnShape {
            d_model: cfg.d_model,
            n_heads: cfg.n_heads,
            n_kv_heads: cfg.kv_heads(),
            head_dim: cfg.head_dim(),
            bias: cfg.attn_bias,
            std: init.std,
            init_qk: init.attn_qk,
            init_in: init.attn_in,
            init_out: init.attn_out,
            qk_norm: a.qk_norm.is_on().then_some((a.qk_norm, cfg.norm_eps)),
            v_norm: a.v_norm.is_on().then_some((a.v_norm, cfg.norm_eps)),
            softcap: a.softcap,
            sqk: recipe.residual.hypersphere().map(|h| h.sqk),
            gate: a.gate,
            sink: a.sink,
            value_residual: a.value_residual.then_some(if i == 0 { ValueRole::Source } else { ValueRole::Mix }),
            lora,
        }
    }

    fn layer(
        cfg: &ModelConfig,
        recipe: &ResolvedRecipe,
        attn: &SublayerPlan,
        ffn: &SublayerPlan,
        init: LayerInit,
        b: &mut ParamBuilder<'_>,
        i: usize,
    ) -> anyhow::Result<Layer> {
        let attn_plan_gate = attn.gate;
        let lora = cfg.lora.as_ref().map(|l| l.plan()).transpose()?;
        let attn_shape = Self::attn_shape(cfg, recipe, &init, i, lora.clone());
        let ffn_shape = FfnShape {
            kind: cfg.ffn,
            d_model: cfg.d_model,
            d_ff: cfg.d_ff(),
            std: init.std,
            init_in: init.ffn_in,
            init_out: init.ffn_out,
            suv: recipe.residual.hypersphere().map(|h| h.suv),
            lora: lora.clone(),
        };
        let (a, f) = (names::sublayer(i, 0), names::sublayer(i, 1));
        let attn_f = Attention::new(&attn_shape, b, &names::child(&a, names::BRANCH_FUNCTION))?;
        let ffn_f = Self::ffn_function(cfg, ffn_shape, b, &names::child(&f, names::BRANCH_FUNCTION), i)?;
        let mut attn = Sublayer::new(attn, cfg.d_model, attn_f, b, &a)?;
        let mut ffn = Sublayer::new(ffn, cfg.d_model, ffn_f, b, &f)?;
        if let Some(s) = recipe.residual.streams() {
            let sizes =
                crate::model::residual::stream_mix::MixSizes { d: cfg.d_model, std: cfg.init_std, eps: cfg.norm_eps };
            attn.hc = Some(crate::model::residual::stream_mix::StreamMix::new(s, 2 * i, sizes, b, &a)?);
            ffn.hc = Some(crate::model::residual::stream_mix::StreamMix::new(s, 2 * i + 1, sizes, b, &f)?);
        }
        if recipe.residual.attn_res().is_some() {
            let query = |b: &mut ParamBuilder<'_>, p: &str| {
                let prefix = names::child(p, names::DEPTH_ATTENTION);
                crate::model::residual::depth_attention::DepthQuery::new(cfg.d_model, cfg.norm_eps, b, &prefix)
            };
            attn.attn_res = (i > 0).then(|| query(b, &a)).transpose()?;
            ffn.attn_res = Some(query(b, &f)?);
        }
        let layer = names::layer(i);
        let shared = attn_plan_gate.filter(|g| g.per == GateOwner::Layer);
        let gate = shared.map(|g| crate::model::sublayer::gate(g, cfg.d_model, b, &layer)).transpose()?;
        let mut lambda = |name: &str, init: fn(&crate::recipe::X0Mix) -> f64| {
            recipe
                .residual
                .x0_mix()
                .map(|m| b.vector(&names::child(&layer, name), 1, Init::Constant(init(&m))))
                .transpose()
        };
        let resid_lambda = lambda(names::RESID_LAMBDA, |m| m.residual)?;
        let x0_lambda = lambda(names::X0_LAMBDA, |m| m.x0)?;
        let gpas = recipe
            .residual
            .gpas()
            .then(|| b.vector(&names::child(&layer, names::GPAS), 1, Init::Constant(0.0)))
            .transpose()?;
        Ok(Layer { attn, ffn, gate, resid_lambda, x0_lambda, gpas })
    }

    /// Layer `i`'s feed-forward function: dense, or a mixture of experts of the same kind and
    /// init when `[model.moe]` makes layer `i` a MoE layer.
    fn ffn_function(
        cfg: &ModelConfig,
        shape: FfnShape,
        b: &mut ParamBuilder<'_>,
        prefix: &str,
        i: usize,
    ) -> anyhow::Result<FfnBlock> {
        match &cfg.moe {
            Some(m) if m.is_moe_layer(i) => {
                let dims = crate::recipe::Dims { n_layers: cfg.n_layers, d_model: cfg.d_model };
                let norms = m.norms(&cfg.recipe.spec()?, dims, cfg.norm_eps)?;
                let expert = FfnShape { d_ff: m.expert_width(shape.d_ff), ..shape };
                let (experts, top_k, shared, router) = (m.experts, m.top_k, m.shared, m.router);
                let moe = MoeShape { expert, experts, top_k, shared, router, norms, capacity: m.capacity };
                Ok(FfnBlock::Moe(Moe::new(moe, b, prefix)?))
            }
            _ => Ok(FfnBlock::Dense(DenseFfn::new(&shape, b, prefix)?)),
        }
    }

    pub fn n_layers(&self) -> usize {
        self.layers.len()
    }

    /// Whether some layer's FFN input norm takes the block's approximated variance (BHyT,
    /// RMSNorm-Approx), whose attention term `‖W_V W_O‖²_F` a decode computes once.
    pub fn approximates(&self) -> bool {
        self.layers.iter().any(|l| l.ffn.approximating_input().is_some())
    }

    /// Logits `[B, T, V]` for tokens `[B, T]`, plus what `keep` asks for.
    pub fn forward(&self, tokens: Tensor<2, Int>, keep: Keep) -> ForwardOutput {
        let t = tokens.dims()[1];
        let ctx = ForwardContext::new(t, self.meta.rope, self.meta.compute, &tokens.device());
        self.run(tokens, ctx, None, keep)
    }

    /// The forward's traces up to the last hidden state, without the output projection: the
    /// probes never read the logits, the largest tensor of a step at a GPT-2 vocabulary
    /// (`[B, T, 50257]`).
    pub fn trace(&self, tokens: Tensor<2, Int>) -> Traced {
        let t = tokens.dims()[1];
        let ctx = ForwardContext::new(t, self.meta.rope, self.meta.compute, &tokens.device());
        let h = self.run_hidden(tokens, ctx, None, Keep::TRACES);
        let (logit_rms, log_z) = self.logit_summary(h.hidden);
        let traces = h.records.take(TRACES);
        Traced { traces, last_hidden: h.last_hidden, logit_rms, log_z, records: h.records }
    }

    /// Per token of the final hidden states `[B, T, d]`: the RMS of its output logits and their
    /// log-sum-exp, `[B·T]` each, over blocks of tokens whose logits stay under the limit.
    fn logit_summary(&self, hidden: Tensor<3>) -> (Tensor<1>, Tensor<1>) {
        let [b, t, d] = hidden.dims();
        let w = self.output_weight();
        let v = w.dims()[1];
        let rows = (self.meta.compute.logits_limit / v).max(1);
        let h = hidden.reshape([b * t, d]);
        let Compute { precision: p, kernels: k, .. } = self.meta.compute;
        let (mut rms, mut lse) = (Vec::new(), Vec::new());
        for start in (0..b * t).step_by(rows) {
            let len = rows.min(b * t - start);
            let l = widen(k.matmul(p, h.clone().narrow(0, start, len), w.clone()));
            let l = match self.meta.final_softcap {
                Some(c) => softcap(l, c),
                None => l,
            };
            rms.push(l.clone().square().mean_dim(1).sqrt().reshape([len]));
            let max = l.clone().max_dim(1);
            lse.push(((l - max.clone()).exp().sum_dim(1).log() + max).reshape([len]));
        }
        (Tensor::cat(rms, 0), Tensor::cat(lse, 0))
    }

    /// `X_1 = N_emb(e · m · Embed(tokens))` (`m` the recipe's constant multiplier), `[B, T, d]`.
    pub(super) fn embed(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [bsz, t] = tokens.dims();
        let d = self.tok_emb.dims()[1];
        let mut x = self.tok_emb.val().select(0, tokens.reshape([bsz * t])).reshape([bsz, t, d]);
        if let Some(m) = self.meta.embedding_multiplier {
            x = x * m;
        }
        if let Some(e) = &self.emb_scale {
            x = x * e.val().unsqueeze::<3>();
        }
        match &self.emb_norm {
            Some(n) => n.forward(x, self.meta.compute.kernels),
            None => x,
        }
    }

    /// The forward under `ctx` up to the final norm, reading and extending one KV slot per
    /// layer when `cache` is given (see [`crate::model::decode`]).
    fn run_hidden(
        &self,
        tokens: Tensor<2, Int>,
        mut ctx: ForwardContext,
        cache: Option<&mut [KvSlot]>,
        keep: Keep,
    ) -> Hidden {
        ctx.records = self.records_for(keep);
        let x = self.embed(tokens);
        let k = self.meta.compute.kernels;
        let mut x = match self.meta.residual {
            Residual::Streams(s) => self.run_streams(x, s.n, &ctx, cache),
            Residual::AttnRes(a) => self.run_attn_res(x, a.block, &ctx, cache),
            Residual::Sum { .. } | Residual::Hypersphere(_) => self.run_layers(x, &ctx, cache),
        };
        let last_hidden = x.clone();
        if let Some(n) = &self.final_norm {
            x = n.forward(x, k);
        }
        Hidden { hidden: x, last_hidden, records: ctx.records }
    }

    /// The record kinds a forward collects: the sums and traces `keep` asks for; attention's
    /// diagnostics when probing (`keep.traces`);
    /// QK-clip's logit maxima and TaperNorm's calibration when training; a MoE model's routing
    /// in every forward that trains, LoRA's (whose embedding is frozen) included, since the
    /// balancing terms reach the adapters through the router's input, and when probing.
    fn records_for(&self, keep: Keep) -> Records {
        let mut records = Records::default();
        let emb = self.tok_emb.val();
        let training = emb.is_require_grad();
        if keep.sums {
            records.collect(SUMS);
        }
        if keep.traces {
            records.collect(TRACES);
            records.collect(STATS);
        }
        if self.meta.qk_clip.is_some() && training {
            records.collect(HEAD_MAX);
        }
        if self.meta.taper.is_some() && training {
            records.collect(TAPER_CALIBRATION);
        }
        if self.meta.moe.is_some() && (emb.is_autodiff() || keep.traces) {
            records.collect(ROUTING);
        }
        records
    }

    /// The 2L sublayers on one residual stream, from `X_1` to `X_{2L+1}`.
    fn run_layers(&self, mut x: Tensor<3>, ctx: &ForwardContext, mut cache: Option<&mut [KvSlot]>) -> Tensor<3> {
        let keep_sums = keeps_sums(&ctx.records);
        let x0 = self.layers.iter().any(|l| l.x0_lambda.is_some()).then(|| x.clone());
        for (i, layer) in self.layers.iter().enumerate() {
            if let Some(x0) = &x0 {
                x = layer.mix_x0(x, x0);
            }
            let input = x.clone();
            let value_output = ctx.value_output.as_ref().map(|v| v[i].clone());
            let out = layer.forward(x, ctx, cache.as_deref_mut().map(|c| &mut c[i]), value_output, keep_sums);
            let ffn_input = out.attn.next.clone();
            let record = |input, out: &SublayerOut, approx_variance| {
                // A sublayer returns its sum whenever the forward keeps sums or traces.
                let Some(sum) = out.sum.clone().filter(|_| keep_sums) else { return };
                let (branch, streams, depth_weights) = (out.branch.clone(), None, None);
                SublayerTrace { input, sum, branch, approx_variance, streams, depth_weights }.record(&ctx.records);
            };
            record(input, &out.attn, None);
            record(ffn_input, &out.ffn, out.ffn_variance);
            x = out.ffn.next;
        }
        x
    }

    /// The output projection `W_out` `[d, V]`: `lm_head`, or `Eᵀ` when tied; nGPT's `s_z`
    /// folded in, `W_out ⊙ s_z` (column `j` times `s_z[j]`, so `h·(w_j s_j) = s_j (h·w_j)`).
    pub fn output_weight(&self) -> Tensor<2> {
        let w = match &self.lm_head {
            Some(w) => w.val(),
            None => self.tok_emb.val().transpose(),
        };
        match (&self.sz, self.meta.residual.hypersphere()) {
            (Some(sz), Some(h)) => w * (sz.val() * h.sz.factor).unsqueeze::<2>(),
            _ => w,
        }
    }

    /// The forward under `ctx` with the logits of every position.
    pub(super) fn run(
        &self,
        tokens: Tensor<2, Int>,
        ctx: ForwardContext,
        cache: Option<&mut [KvSlot]>,
        keep: Keep,
    ) -> ForwardOutput {
        let h = self.run_hidden(tokens, ctx, cache, keep);
        let [bsz, t, d] = h.hidden.dims();
        let w = self.output_weight();
        let v = w.dims()[1];
        let Compute { precision: p, kernels: k, .. } = self.meta.compute;
        let logits = widen(k.matmul(p, h.hidden.reshape([bsz * t, d]), w)).reshape([bsz, t, v]);
        let logits = match self.meta.final_softcap {
            Some(c) => softcap(logits, c),
            None => logits,
        };
        let (sums, traces) = (h.records.take(SUMS), h.records.take(TRACES));
        ForwardOutput { logits, sums, traces, last_hidden: h.last_hidden, records: h.records }
    }

    /// Mean next-token cross-entropy of `tokens` against `targets` (below 0: not counted when
    /// `masked`), and the `z_l` the regulariser needs when `keep_sums`. When one micro-batch's
    /// logits would hold more than [`Compute::logits_limit`] values, the projection and the
    /// loss run over chunks of tokens ([`chunked_cross_entropy`]) instead of materialising them.
    pub fn cross_entropy_of(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        masked: bool,
        keep_sums: bool,
    ) -> (Tensor<1>, Vec<Tensor<3>>) {
        let parts = self.cross_entropy_parts(tokens, targets, Objective { masked, z_loss: 0.0 }, keep_sums);
        (parts.objective, parts.sums)
    }

    /// [`Transformer::cross_entropy_of`], and the per-head logit maxima a QK-clip recipe's
    /// training forward records.
    fn cross_entropy_parts(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        objective: Objective,
        keep_sums: bool,
    ) -> CeParts {
        let [b, t] = tokens.dims();
        let v = self.tok_emb.dims()[0];
        let limit = self.meta.compute.logits_limit;
        let Objective { masked, z_loss } = objective;
        if b * t * v <= limit {
            let out = self.forward(tokens, Keep { sums: keep_sums, traces: false });
            let z = (z_loss > 0.0).then(|| mean_log_z_squared(out.logits.clone(), targets.clone(), masked));
            let ce =
                if masked { masked_cross_entropy(out.logits, targets).0 } else { cross_entropy(out.logits, targets) };
            let objective = match &z {
                Some(z) => ce.clone() + z.clone() * z_loss,
                None => ce.clone(),
            };
            return CeParts { objective, ce, z, sums: out.sums, records: out.records };
        }
        let ctx = ForwardContext::new(t, self.meta.rope, self.meta.compute, &tokens.device());
        let h = self.run_hidden(tokens, ctx, None, Keep { sums: keep_sums, traces: false });
        let d = h.hidden.dims()[2];
        let chunk = (limit / v).max(1);
        let hidden = h.hidden.reshape([b * t, d]);
        let w = self.output_weight();
        let c = self.meta.compute;
        let out = chunked_cross_entropy(hidden, w, targets.reshape([b * t]), chunk, c, self.meta.final_softcap, z_loss);
        let sums = h.records.take(SUMS);
        CeParts { objective: out.objective, ce: out.ce, z: out.z, sums, records: h.records }
    }

    /// Cross-entropy plus λ·R (KiteNorm eq. 24) when the recipe declares a regulariser.
    /// Returns `(loss, ce, reg)`, each `[1]`; `reg` is `None` without a regulariser. With
    /// `masked`, targets below 0 are ignored ([`masked_cross_entropy`]).
    pub fn loss(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        masked: bool,
    ) -> (Tensor<1>, Tensor<1>, Option<Tensor<1>>) {
        let p = self.loss_parts(tokens, targets, Objective { masked, z_loss: 0.0 });
        let reg = p.term(REGULARIZER);
        (p.loss, p.ce, reg)
    }

    /// [`Transformer::loss`] under `objective`: CE, then the terms in order (the objective's
    /// z-loss, KiteNorm's regulariser, a MoE model's balancing terms), each times its weight;
    /// and what a training forward reports to its step.
    pub fn loss_parts(&self, tokens: Tensor<2, Int>, targets: Tensor<2, Int>, objective: Objective) -> LossParts {
        let lambda = self.meta.regularizer;
        let z_weight = objective.z_loss;
        let CeParts { objective, ce, z, sums, records } =
            self.cross_entropy_parts(tokens, targets, objective, lambda > 0.0);
        // The objective carries the z-loss already (the chunked loss computes both at once).
        let mut terms: Vec<LossTerm> =
            z.map(|value| LossTerm { name: Z_LOSS, value, weight: z_weight }).into_iter().collect();
        let mut added = (lambda > 0.0)
            .then(|| LossTerm { name: REGULARIZER, value: variance_penalty(&sums), weight: lambda })
            .into_iter()
            .collect::<Vec<_>>();
        let routers = records.take(ROUTING);
        if let Some(m) = self.meta.moe {
            added.extend(m.terms(&routers));
        }
        let loss = added.iter().fold(objective, |loss, t| loss + t.value.clone() * t.weight);
        terms.extend(added);
        let mut readings = vec![
            Reading::device(HEAD_MAX.name, Reduce::Max, records.take(HEAD_MAX)),
            Reading::device(TAPER_CALIBRATION.name, Reduce::Mean, records.take(TAPER_CALIBRATION)),
        ];
        readings.extend(crate::model::ffn::moe::balance::readings(&routers));
        readings.retain(|r| !r.rows.is_empty());
        LossParts { loss, ce, terms, readings }
    }
}

/// Mean cross-entropy over the positions whose target is ≥ 0 (a target of −1 marks a prompt
/// or padding position: it contributes nothing to the loss or its gradient), and the number
/// of counted positions. `logits` `[B, T, V]`, `targets` `[B, T]` → `[1]`.
pub fn masked_cross_entropy(logits: Tensor<3>, targets: Tensor<2, Int>) -> (Tensor<1>, Tensor<1>) {
    let [b, t, v] = logits.dims();
    let targets = targets.reshape([b * t, 1]);
    let logp = burn::tensor::activation::log_softmax(logits.reshape([b * t, v]), 1);
    let picked = logp.gather(1, targets.clone().clamp_min(0));
    // The mask in the logits' own float type (f32 in training, f64 in the tests).
    let keep = picked.zeros_like().mask_fill(targets.greater_equal_elem(0), 1.0);
    let picked = picked * keep.clone();
    let count = keep.sum();
    (-picked.sum() / count.clone().clamp_min(1.0), count)
}

/// Mean over the counted positions (all, or those whose target is ≥ 0 when `masked`) of
/// `log² Z`, `Z = Σ_v exp(logit_v)`: PaLM's z-loss before its coefficient. `[B, T, V]` → `[1]`.
pub fn mean_log_z_squared(logits: Tensor<3>, targets: Tensor<2, Int>, masked: bool) -> Tensor<1> {
    let [b, t, v] = logits.dims();
    let logits = logits.reshape([b * t, v]);
    let max = logits.clone().max_dim(1).detach();
    let log_z = (logits - max.clone()).exp().sum_dim(1).log() + max;
    let sq = log_z.square().reshape([b * t]);
    if !masked {
        return sq.mean();
    }
    let keep = sq.zeros_like().mask_fill(targets.reshape([b * t]).greater_equal_elem(0), 1.0);
    (sq * keep.clone()).sum() / keep.sum().clamp_min(1.0)
}

/// Mean next-token cross-entropy: `logits` `[B, T, V]`, `targets` `[B, T]` → `[1]`.
pub fn cross_entropy(logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<1> {
    let [b, t, v] = logits.dims();
    let logp = burn::tensor::activation::log_softmax(logits.reshape([b * t, v]), 1);
    let picked = logp.gather(1, targets.reshape([b * t, 1]));
    -picked.mean()
}
