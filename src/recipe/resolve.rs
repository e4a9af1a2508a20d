//! Resolving a [`RecipeSpec`] for a given depth: evaluate every expression, apply the per-layer
//! overrides, turn norm specs into [`NormKind`]s, and reject anything malformed with a message
//! that names the field.

use super::completep;
use super::expr::eval;
use super::hypersphere::{self, Hypersphere};
use super::moment_control::{self, MomentControl};
use super::spec::{
    AttnGate, BaseNorm, GateOn, GateOwner, GateShape, GateSpec, NormName, NormSpec, NormTable, QkClip, QkNorm,
    RecipeSpec, Scale, SublayerSpec, Which, X0Mix,
};
use crate::norm::{KindInfo, NormKind, SlotOptions};
use anyhow::{Context, bail, ensure};
use std::collections::BTreeMap;

/// Attention or feed-forward (`attn` / `ffn` in files and tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Branch {
    Attn,
    Ffn,
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Branch::Attn => "attn",
            Branch::Ffn => "ffn",
        })
    }
}

/// One sublayer's resolved equation `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))`.
#[derive(Clone, Debug, PartialEq)]
pub struct SublayerPlan {
    pub branch: Branch,
    /// Transformer layer `k`, 1-based.
    pub layer: usize,
    /// Sublayer `l`, 1-based.
    pub index: usize,
    pub input: Option<NormKind>,
    pub output: Option<NormKind>,
    pub outer: Option<NormKind>,
    pub skip: f64,
    pub residual: f64,
    pub input_scale: f64,
    pub init_out: f64,
    pub init_in: f64,
    /// The learnable residual gate `g`, when the sublayer has one.
    pub gate: Option<Gate>,
}

/// A resolved residual gate: shape, initial (used) value, owner, what it acts on, and its
/// parametrisation: the parameter starts at `stored` and is used as `stored · factor`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gate {
    pub shape: GateShape,
    pub init: f64,
    pub per: GateOwner,
    pub on: GateOn,
    pub stored: f64,
    pub factor: f64,
    /// Set by Admin's profiling pass at a fresh start (`init` is its value before).
    pub profile: bool,
}

/// A recipe resolved for one depth.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedRecipe {
    pub name: String,
    pub sublayers: Vec<SublayerPlan>,
    /// Initial value of the learnable embedding scale `e`, when the recipe has one.
    pub embedding_scale: Option<f64>,
    pub embedding_norm: Option<NormKind>,
    pub final_norm: Option<NormKind>,
    pub qk_norm: QkNorm,
    /// RMSNorm on the values (HybridNorm's QKV-norm): `Head`, `Full` or `None`.
    pub v_norm: QkNorm,
    pub attn_softcap: Option<f64>,
    pub final_softcap: Option<f64>,
    /// Qwen's sigmoid gate on each head's attention output, when on.
    pub attn_gate: AttnGate,
    /// gpt-oss's learnable per-head logit in the softmax denominator.
    pub attn_sink: bool,
    /// ResFormer's value residual: later layers mix the first layer's values into theirs.
    pub value_residual: bool,
    /// The constant multiplying the token embeddings (Gemma's `√d`), when the recipe has one.
    pub embedding_multiplier: Option<f64>,
    pub x0_mix: Option<X0Mix>,
    pub qk_clip: Option<QkClip>,
    /// nGPT's unit-norm weights and scaling factors, when the recipe lives on the hypersphere.
    pub hypersphere: Option<Hypersphere>,
    /// DeepScaleLM's moment-control initialisation, when the recipe draws its weights so.
    pub moment_control: Option<MomentControl>,
    /// `n` residual streams and their mixing, when the state is more than one vector.
    pub streams: Option<super::streams::Streams>,
    /// Attention Residuals' block size, when sublayers read an attention over depth.
    pub attn_res: Option<super::streams::AttnRes>,
    /// GPAS's forward-only scaling after every residual addition ([`RecipeSpec::gpas`]).
    pub gpas: bool,
    /// CompleteP's depth multiplier, when the recipe scales the branches and ε with depth (the
    /// sublayers' `residual` already include its `m^{-1}`).
    pub completep: Option<completep::CompleteP>,
    /// TaperNorm's gate schedule, when a slot is `tapernorm`.
    pub taper: Option<super::taper::Taper>,
    pub regularizer: f64,
    /// The sizes and the norm ε it was resolved for: a model of other sizes needs its own.
    pub dims: Dims,
    pub eps: f64,
}

/// The sizes a recipe's expressions may use: `L` (Transformer layers) and `d` (hidden size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub n_layers: usize,
    pub d_model: usize,
}

/// The deepest model normlab builds (DeepNet trained 1000 layers; KiteNorm's stress test 96).
pub const MAX_LAYERS: usize = 10_000;
/// The largest soft-cap: `x/c` stays a normal f32 for logits from 10⁻⁷ on (f32's smallest
/// normal is 1.2·10⁻³⁸).
pub const MAX_SOFTCAP: f64 = 1e30;
/// The widest hidden state normlab builds.
pub const MAX_WIDTH: usize = 1 << 16;

/// Resolves `spec` for a model of `dims` with norm epsilon `eps`.
pub fn resolve(spec: &RecipeSpec, dims: Dims, eps: f64) -> anyhow::Result<ResolvedRecipe> {
    Resolver(spec).resolve(dims, eps)
}

/// Turns a written norm slot of `spec` into a [`NormKind`] for a model of `dims`, rejecting
/// options the kind lacks.
pub fn norm_kind(spec: &RecipeSpec, slot: &NormSpec, dims: Dims, eps: f64) -> anyhow::Result<Option<NormKind>> {
    let r = Resolver(spec);
    r.norm(slot, &r.vars(dims), eps)
}

/// The resolution logic, as a view of the spec (the spec's own type stays plain data).
struct Resolver<'a>(&'a RecipeSpec);

impl std::ops::Deref for Resolver<'_> {
    type Target = RecipeSpec;
    fn deref(&self) -> &RecipeSpec {
        self.0
    }
}

impl Resolver<'_> {
    fn resolve(&self, dims: Dims, eps: f64) -> anyhow::Result<ResolvedRecipe> {
        self.resolve_inner(dims, eps).with_context(|| format!("recipe `{}`", self.name))
    }

    fn resolve_inner(&self, dims: Dims, eps: f64) -> anyhow::Result<ResolvedRecipe> {
        let n_layers = dims.n_layers;
        check_sizes(dims, eps)?;
        self.check_params()?;
        self.check_layer_entries()?;
        let mut sublayers = Vec::with_capacity(2 * n_layers);
        for index in 1..=2 * n_layers {
            sublayers.push(self.plan(index, dims, eps)?);
        }
        check_bhyt_pairs(&sublayers)?;
        check_layer_gates(&sublayers)?;
        self.check_attention()?;
        self.check_gpas(&sublayers)?;
        let vars = self.vars(dims);
        let hypersphere = self.hypersphere.as_ref().map(|h| hypersphere::resolve(h, self.0, &vars)).transpose()?;
        let moment_control = self.resolve_moment_control(&sublayers)?;
        let (streams, attn_res) = self.residual_state(&sublayers)?;
        let completep = self.completep.as_ref().map(|c| completep::resolve(c, self.0, n_layers)).transpose()?;
        // CompleteP: every branch × L_base/L.
        completep.iter().for_each(|c| sublayers.iter_mut().for_each(|p| p.residual *= c.branch_scale()));
        let embedding_norm = self.norm(&self.embedding_norm, &vars, eps).context("embedding_norm")?;
        let final_norm = self.norm(&self.final_norm, &vars, eps).context("final_norm")?;
        let taper = super::taper::resolve(self.0, check_taper_slots(&sublayers, &final_norm)?)?;
        let (embedding_scale, embedding_multiplier) = self.embedding_scales(&vars)?;
        Ok(ResolvedRecipe {
            dims,
            eps,
            name: self.name.clone(),
            sublayers,
            embedding_scale,
            embedding_norm,
            final_norm,
            qk_norm: self.qk_norm,
            v_norm: self.v_norm,
            attn_softcap: self.attn_softcap,
            final_softcap: self.final_softcap,
            attn_gate: self.attn_gate,
            attn_sink: self.attn_sink,
            value_residual: self.value_residual,
            embedding_multiplier,
            x0_mix: self.x0_mix,
            qk_clip: self.qk_clip,
            hypersphere,
            moment_control,
            streams,
            attn_res,
            gpas: self.gpas,
            completep,
            taper,
            regularizer: self.regularizer,
        })
    }

    /// The residual state when it is more than one vector: `n` streams or attention over depth
    /// (at most one), checked against what it replaces in the sublayers.
    fn residual_state(
        &self,
        sublayers: &[SublayerPlan],
    ) -> anyhow::Result<(Option<super::streams::Streams>, Option<super::streams::AttnRes>)> {
        let streams = self.streams.as_ref().map(super::streams::resolve).transpose()?;
        let attn_res =
            self.attn_res.as_ref().map(|a| super::streams::resolve_attn_res(a, sublayers.len())).transpose()?;
        ensure!(
            streams.is_none() || attn_res.is_none(),
            "`streams` and `attn_res` each replace the residual sum; keep one"
        );
        if let Some(state) = [streams.map(|_| "streams"), attn_res.map(|_| "attn_res")].into_iter().flatten().next() {
            check_residual_state(self.0, sublayers, state)?;
        }
        Ok((streams, attn_res))
    }

    /// GPAS scales the sum right after the residual addition: a post-norm's outer norm there would
    /// undo it (the authors' Post-LN form scales the skip instead, which normlab does not build),
    /// and nGPT's step has no such sum.
    fn check_gpas(&self, sublayers: &[SublayerPlan]) -> anyhow::Result<()> {
        if !self.gpas {
            return Ok(());
        }
        for p in sublayers {
            ensure!(
                p.outer.is_none(),
                "sublayer {}: `gpas` scales the sum after the residual addition, which an outer norm renormalises; use \
                 it with pre-, Peri- or sandwich-norm recipes (no outer norm)",
                p.index
            );
            ensure!(
                p.gate.is_none_or(|g| g.on != GateOn::Interpolate),
                "sublayer {}: `gpas` scales a residual sum, and nGPT's interpolation step has none",
                p.index
            );
        }
        Ok(())
    }

    /// The learnable embedding scale's initial value and the constant multiplier, each when the
    /// recipe has one (`"none"` removes a preset's scale in a config overlay).
    fn embedding_scales(&self, vars: &BTreeMap<String, f64>) -> anyhow::Result<(Option<f64>, Option<f64>)> {
        let scale = match &self.embedding_scale {
            Some(Scale::Expr(e)) if e.trim() == "none" => None,
            Some(s) => Some(scale_value(s, vars).context("embedding_scale")?),
            None => None,
        };
        let multiplier = self
            .embedding_multiplier
            .as_ref()
            .map(|s| scale_value(s, vars))
            .transpose()
            .context("embedding_multiplier")?;
        if let Some(m) = multiplier {
            ensure!(
                m.is_finite() && m > 0.0,
                "`embedding_multiplier` = {m} must be a positive number (Gemma: sqrt(d))"
            );
        }
        Ok((scale, multiplier))
    }

    /// DeepScaleLM's moment control, checked against the sublayers it draws.
    fn resolve_moment_control(&self, sublayers: &[SublayerPlan]) -> anyhow::Result<Option<MomentControl>> {
        let Some(spec) = &self.moment_control else { return Ok(None) };
        let m = moment_control::resolve(spec, self.0)?;
        check_moment_control(sublayers)?;
        Ok(Some(m))
    }

    /// The attention options: positive caps, a valid QK-clip, value norms RMSNorm only.
    fn check_attention(&self) -> anyhow::Result<()> {
        for (name, cap) in [("attn_softcap", self.attn_softcap), ("final_softcap", self.final_softcap)] {
            if let Some(c) = cap {
                ensure!(c.is_finite() && c > 0.0, "`{name}` = {c} must be a positive number (Gemma 2: 50 and 30)");
                // Past this, `x/c` underflows f32 for every logit and `c` itself may not be one.
                ensure!(
                    c <= MAX_SOFTCAP,
                    "`{name}` = {c} is beyond what f32 computes c·tanh(x/c) with (at most {MAX_SOFTCAP:e}); a cap \
                     that large changes nothing: remove it"
                );
            }
        }
        ensure!(
            !self.v_norm.is_l2(),
            "v_norm = \"{}\" is not a value norm normlab builds; use \"head\" or \"full\" (RMSNorm)",
            self.v_norm.as_str()
        );
        if let Some(X0Mix { residual, x0 }) = self.x0_mix {
            ensure!(residual.is_finite() && x0.is_finite(), "`x0_mix` values must be finite numbers");
        }
        if let Some(QkClip { tau, alpha }) = self.qk_clip {
            ensure!(tau.is_finite() && tau > 0.0, "`qk_clip.tau` = {tau} must be > 0 (Kimi K2: 100)");
            ensure!((0.0..=1.0).contains(&alpha), "`qk_clip.alpha` = {alpha} must lie in [0, 1] (Kimi K2: 0.5)");
            ensure!(
                !self.qk_norm.is_on(),
                "qk_clip rescales W_q and W_k, which QK-norm (qk_norm = \"{}\") undoes; use one or the other",
                self.qk_norm.as_str()
            );
        }
        Ok(())
    }

    /// Every `[[layers]]` entry has a range; `sublayer` has none.
    fn check_layer_entries(&self) -> anyhow::Result<()> {
        for (i, entry) in self.layers.iter().enumerate() {
            entry.range.as_ref().with_context(|| format!("layers[{i}] needs a `range`, e.g. range = \"1..=L\""))?;
        }
        if self.sublayer.range.is_some() || self.sublayer.sublayers.is_some() {
            bail!("`sublayer` applies to every sublayer: `range`/`sublayers` belong in a `[[recipe.layers]]` entry");
        }
        Ok(())
    }

    /// The named parameters are finite (ratios in [0, 1], no reserved names) and the
    /// regulariser's weight is ≥ 0.
    fn check_params(&self) -> anyhow::Result<()> {
        ensure!(
            self.regularizer >= 0.0 && self.regularizer.is_finite(),
            "`regularizer` must be ≥ 0, got {}",
            self.regularizer
        );
        for (name, v) in &self.params {
            ensure!(v.is_finite(), "params.{name} must be a finite number");
            if name.ends_with("_ratio") {
                ensure!((0.0..=1.0).contains(v), "params.{name} = {v} is outside [0, 1]");
            }
            ensure!(!matches!(name.as_str(), "L" | "k" | "l" | "d"), "params.{name}: `{name}` is reserved");
        }
        Ok(())
    }

    fn vars(&self, dims: Dims) -> BTreeMap<String, f64> {
        let mut v = self.params.clone();
        v.insert("L".into(), dims.n_layers as f64);
        v.insert("d".into(), dims.d_model as f64);
        v
    }

    /// Base spec with every override whose range covers this sublayer laid over it.
    fn effective(&self, index: usize, dims: Dims) -> anyhow::Result<SublayerSpec> {
        let n_layers = dims.n_layers;
        let layer = index.div_ceil(2);
        let branch_is_attn = index % 2 == 1;
        let mut spec = self.sublayer.clone();
        for (i, entry) in self.layers.iter().enumerate() {
            let range = entry.range.as_deref().unwrap_or_default();
            let (lo, hi) =
                parse_range(range, &self.vars(dims), n_layers).with_context(|| format!("layers[{i}].range"))?;
            let which_ok = match entry.sublayers.unwrap_or_default() {
                Which::Both => true,
                Which::Attn => branch_is_attn,
                Which::Ffn => !branch_is_attn,
            };
            if which_ok && (lo..=hi).contains(&layer) {
                spec.overlay(entry);
            }
        }
        Ok(spec)
    }

    fn plan(&self, index: usize, dims: Dims, eps: f64) -> anyhow::Result<SublayerPlan> {
        let layer = index.div_ceil(2);
        let branch = if index % 2 == 1 { Branch::Attn } else { Branch::Ffn };
        let spec = self.effective(index, dims)?;
        let mut vars = self.vars(dims);
        vars.insert("k".into(), layer as f64);
        vars.insert("l".into(), index as f64);
        let where_ =
            || format!("sublayer {index} (layer {layer}, {})", if branch == Branch::Attn { "attn" } else { "ffn" });
        let scale = |field: &str, s: &Option<Scale>| -> anyhow::Result<f64> {
            s.as_ref().map_or(Ok(1.0), |s| scale_value(s, &vars)).with_context(|| format!("`{field}`"))
        };
        let norm = |field: &str, n: &Option<NormSpec>| -> anyhow::Result<Option<NormKind>> {
            match n {
                None => Ok(None),
                Some(n) => self.norm(n, &vars, eps).with_context(|| format!("`{field}`")),
            }
        };
        let plan = (|| {
            Ok::<_, anyhow::Error>(SublayerPlan {
                branch,
                layer,
                index,
                input: norm("input", &spec.input)?,
                output: norm("output", &spec.output)?,
                outer: norm("outer", &spec.outer)?,
                skip: scale("skip", &spec.skip)?,
                residual: scale("residual", &spec.residual)?,
                input_scale: scale("input_scale", &spec.input_scale)?,
                init_out: scale("init_out", &spec.init_out)?,
                init_in: scale("init_in", &spec.init_in)?,
                gate: spec.gate.as_ref().map(|g| gate(g, &vars)).transpose().context("`gate`")?,
            })
        })()
        .with_context(where_)?;
        check_plan(&plan).with_context(where_)?;
        Ok(plan)
    }

    fn norm(&self, spec: &NormSpec, vars: &BTreeMap<String, f64>, eps: f64) -> anyhow::Result<Option<NormKind>> {
        let t = spec.table();
        for o in t.set_options() {
            ensure!(t.kind.options().contains(&o), "norm kind `{}` has no option `{}`", t.kind, o.name());
        }
        let Some(kind) = self.kind_meant(&t)? else { return Ok(None) };
        let alpha = t.alpha.as_ref().map(|a| scale_value(a, vars)).transpose().context("`alpha`")?;
        let options = SlotOptions {
            gain: t.gain,
            shift: t.shift,
            alpha,
            lambda: t.lambda,
            p: t.p,
            denominator: t.denominator,
            offset: t.offset,
            beta: t.beta,
            eps,
        };
        (kind.build)(&options).map(Some)
    }

    /// The kind a slot's written name means under the recipe's base norm: `ln` is LayerNorm or
    /// RMSNorm, `scalar-ln` under RMSNorm the scalarised RMSNorm; `None` for an empty slot.
    fn kind_meant(&self, t: &NormTable) -> anyhow::Result<Option<&'static KindInfo>> {
        let rms_base = self.norm == BaseNorm::Rmsnorm;
        let name = match t.kind.as_str() {
            "none" => return Ok(None),
            "ln" if rms_base => "rmsnorm",
            "ln" => "layernorm",
            "scalar-ln" if rms_base => {
                ensure!(
                    t.shift != Some(true),
                    "scalar-ln under norm = \"rmsnorm\" is the scalarised RMSNorm, which has no shift; remove `shift = \
                        true` or use norm = \"layernorm\""
                );
                "scalar-rms"
            }
            other => other,
        };
        let known = || NormName::known().join(", ");
        crate::norm::kinds::find(name)
            .map(Some)
            .with_context(|| format!("unknown norm kind `{name}` (known: {})", known()))
    }
}

/// What a resolved sublayer may not combine: an interpolating gate with skip or residual
/// scales, a variance-approximating norm outside an input slot.
fn check_plan(plan: &SublayerPlan) -> anyhow::Result<()> {
    if plan.gate.is_some_and(|g| g.on == GateOn::Interpolate) {
        ensure!(
            plan.skip == 1.0 && plan.residual == 1.0,
            "an interpolating gate (nGPT) is the step a = 1 − |g|, c = |g| itself; remove `skip` and `residual`"
        );
    }
    for (slot, kind) in [("output", &plan.output), ("outer", &plan.outer)] {
        if matches!(kind, Some(NormKind::Bhyt { .. } | NormKind::RmsNormApprox { .. })) {
            bail!(
                "`{slot}` = {}: the variance approximation (Algorithm 1) is defined for sublayer inputs and the \
                    final norm; use {} here",
                if matches!(kind, Some(NormKind::Bhyt { .. })) { "bhyt" } else { "rmsnorm-approx" },
                if matches!(kind, Some(NormKind::Bhyt { .. })) { "bhyt-star" } else { "rmsnorm" },
            );
        }
    }
    Ok(())
}

/// DeepScaleLM's moment control on these sublayers: its recursion needs every branch to read a
/// unit-variance input and add its own output, and it replaces the init scales.
fn check_moment_control(plans: &[SublayerPlan]) -> anyhow::Result<()> {
    // The recursion assumes each branch reads a unit-variance input and adds its own output.
    if let Some(p) = plans.iter().find(|p| p.input.is_none() || p.output.is_some() || p.gate.is_some()) {
        bail!(
            "sublayer {}: `moment_control` needs an input norm on every sublayer and no output norm or gate (its \
                moments are derived for X ← λ·X + β·F(N(X)))",
            p.index
        );
    }
    if let Some(p) = plans.iter().find(|p| p.input_scale != 1.0) {
        bail!("sublayer {} scales its input, which `moment_control` does not model; remove input_scale", p.index);
    }
    if let Some(p) = plans.iter().find(|p| p.init_in != 1.0 || p.init_out != 1.0) {
        bail!(
            "sublayer {} sets init_in/init_out, which `moment_control` replaces with its own standard deviations; \
                remove one of them",
            p.index
        );
    }
    Ok(())
}

/// A scale's value: a positive finite number, or an expression evaluating to one.
fn scale_value(s: &Scale, vars: &BTreeMap<String, f64>) -> anyhow::Result<f64> {
    let v = match s {
        Scale::Number(v) => *v,
        Scale::Expr(e) => eval(e, vars).map_err(anyhow::Error::msg)?,
    };
    match s {
        Scale::Number(_) => ensure!(v.is_finite() && v > 0.0, "{v} must be a positive finite number"),
        Scale::Expr(e) => ensure!(v.is_finite() && v > 0.0, "`{e}` = {v} must be a positive finite number"),
    }
    Ok(v)
}

/// Sizes normlab builds and a positive ε.
fn check_sizes(dims: Dims, eps: f64) -> anyhow::Result<()> {
    let n_layers = dims.n_layers;
    ensure!(n_layers >= 1, "n_layers must be at least 1");
    ensure!(n_layers <= MAX_LAYERS, "n_layers = {n_layers} is more than normlab builds (at most {MAX_LAYERS} layers)");
    ensure!(dims.d_model >= 1, "d_model must be at least 1");
    ensure!(dims.d_model <= MAX_WIDTH, "d_model = {} is more than normlab builds (at most {MAX_WIDTH})", dims.d_model);
    ensure!(eps > 0.0 && eps.is_finite(), "norm_eps must be a positive number, got {eps}");
    Ok(())
}

/// A gate's resolved form. Its initial value may be 0 (ReZero, SkipInit) or negative: any
/// finite number.
fn gate(g: &GateSpec, vars: &BTreeMap<String, f64>) -> anyhow::Result<Gate> {
    let init = match &g.init {
        Scale::Number(v) => *v,
        Scale::Expr(e) => eval(e, vars).map_err(anyhow::Error::msg)?,
    };
    ensure!(init.is_finite(), "`init` = {init} must be a finite number");
    let (stored, factor) = match &g.scale {
        Some(s) => {
            let scale = scale_value(s, vars).context("`scale`")?;
            ensure!(init != 0.0, "a gate with a `scale` needs a non-zero `init` (it is used as stored · init/scale)");
            (scale, init / scale)
        }
        None => (init, 1.0),
    };
    ensure!(
        !g.profile || (g.on == GateOn::Skip && g.scale.is_none() && g.per == GateOwner::Sublayer),
        "`profile` sets Admin's ω, one per sublayer on its skip (on = \"skip\", per = \"sublayer\", no `scale`)"
    );
    Ok(Gate { shape: g.shape, init, per: g.per, on: g.on, stored, factor, profile: g.profile })
}

/// A gate shared by a layer (`per = "layer"`, ReZero) must be the same gate in both of the
/// layer's sublayers.
fn check_layer_gates(plans: &[SublayerPlan]) -> anyhow::Result<()> {
    for pair in plans.chunks(2) {
        let [attn, ffn] = pair else { continue };
        let shared = |g: &Option<Gate>| g.is_some_and(|g| g.per == GateOwner::Layer);
        if (shared(&attn.gate) || shared(&ffn.gate)) && attn.gate != ffn.gate {
            bail!(
                "layer {}: a gate with per = \"layer\" is one parameter for the layer's attention and FFN, so both \
                    sublayers need the same gate (shape, init); use per = \"sublayer\" for separate gates",
                attn.layer
            );
        }
    }
    Ok(())
}

/// `"scalar-ln"` under `norm = "rmsnorm"`: the scalarised RMSNorm, which has no shift (there is
/// no centring for a shift to undo).
/// BHyT's approximated FFN-input norm needs the same layer's attention-input norm to be BHyT:
/// it reuses that norm's input variance and λ (Algorithm 1).
fn check_bhyt_pairs(plans: &[SublayerPlan]) -> anyhow::Result<()> {
    for pair in plans.chunks(2) {
        let [attn, ffn] = pair else { continue };
        if matches!(ffn.input, Some(NormKind::Bhyt { .. })) && !matches!(attn.input, Some(NormKind::Bhyt { .. })) {
            bail!(
                "layer {}: the FFN input norm is bhyt (variance approximation), which reuses the attention input \
                    norm's statistics, so that one must be bhyt too",
                attn.layer
            );
        }
        let approx = |n: &Option<NormKind>| matches!(n, Some(NormKind::RmsNormApprox { .. }));
        if approx(&ffn.input) && !approx(&attn.input) {
            bail!(
                "layer {}: the FFN input norm is rmsnorm-approx (variance approximation), which reuses the attention \
                    input norm's statistic, so that one must be rmsnorm-approx too",
                attn.layer
            );
        }
        if let (Some(NormKind::Bhyt { p: pa, .. }), Some(NormKind::Bhyt { p: pf, .. })) = (&attn.input, &ffn.input) {
            ensure!(pa == pf, "layer {}: both BHyT norms of a block must share p (κ)", attn.layer);
        }
    }
    Ok(())
}

/// Parses `a..=b`, `a..b` or `a` into an inclusive 1-based layer range. An empty range
/// (`1..=0`) is allowed: it selects nothing (mix-norm with few layers).
fn parse_range(src: &str, vars: &BTreeMap<String, f64>, n_layers: usize) -> anyhow::Result<(usize, usize)> {
    let int = |e: &str| -> anyhow::Result<i64> {
        let v = eval(e, vars).map_err(anyhow::Error::msg)?;
        ensure!(v.fract() == 0.0 && v.is_finite(), "`{e}` = {v} is not a whole layer number");
        Ok(v as i64)
    };
    let (lo, hi) = if let Some((a, b)) = src.split_once("..=") {
        (int(a)?, int(b)?)
    } else if let Some((a, b)) = src.split_once("..") {
        (int(a)?, int(b)? - 1)
    } else {
        let v = int(src)?;
        (v, v)
    };
    if hi < lo {
        return Ok((1, 0));
    }
    ensure!(lo >= 1 && hi as usize <= n_layers, "`{src}` = {lo}..={hi} is outside the layers 1..={n_layers}");
    Ok((lo as usize, hi as usize))
}

/// A residual state (`streams`, `attn_res`) replaces the skip and residual scales, the outer norms
/// and the gates: those must be the plain ones, and the options that act on one stream are
/// refused. `state` names the option for the messages.
fn check_residual_state(spec: &RecipeSpec, plans: &[SublayerPlan], state: &str) -> anyhow::Result<()> {
    for p in plans {
        if p.skip != 1.0 || p.residual != 1.0 || p.outer.is_some() || p.gate.is_some() {
            bail!(
                "sublayer {}: `{state}` replaces the residual sum, so a = c = 1 with no outer norm and no gate (its \
                 learned weights take their place)",
                p.index
            );
        }
    }
    for p in plans {
        if matches!(p.input, Some(NormKind::Bhyt { .. } | NormKind::RmsNormApprox { .. })) {
            bail!(
                "sublayer {}: BHyT's and RMSNorm-Approx's FFN statistic approximates the attention sublayer's input, \
                 which `{state}` reads apart from the FFN's; use their exact forms (bhyt-star, rmsnorm)",
                p.index
            );
        }
    }
    let conflicts = [
        ("x0_mix", spec.x0_mix.is_some()),
        ("hypersphere", spec.hypersphere.is_some()),
        ("moment_control", spec.moment_control.is_some()),
        ("regularizer", spec.regularizer > 0.0),
        ("gpas", spec.gpas),
        ("completep", spec.completep.is_some()),
    ];
    for (field, set) in conflicts {
        ensure!(!set, "`{field}` acts on a single residual stream; remove it or `{state}`");
    }
    Ok(())
}

/// Whether some sublayer input norm is `tapernorm`; TaperNorm in any other slot is refused.
fn check_taper_slots(plans: &[SublayerPlan], final_norm: &Option<NormKind>) -> anyhow::Result<bool> {
    let is_taper = |n: &Option<NormKind>| matches!(n, Some(NormKind::TaperNorm { .. }));
    if let Some(p) = plans.iter().find(|p| is_taper(&p.output) || is_taper(&p.outer)) {
        bail!(
            "sublayer {}: `tapernorm` replaces a pre-norm (the sublayer's `input` norm); TaperNorm's paper tapers the \
             internal pre-norms only",
            p.index
        );
    }
    ensure!(
        !is_taper(final_norm),
        "`final_norm` = \"tapernorm\": the final norm anchors the scale of the logits' input (TaperNorm's paper); \
         tapering it needs an auxiliary scale loss, which normlab does not build; keep `rmsnorm` there"
    );
    Ok(plans.iter().any(|p| is_taper(&p.input)))
}
