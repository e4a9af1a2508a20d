//! Resolving a [`RecipeSpec`] for a given depth: each concern resolves in its own file
//! ([`super::sublayers`], [`super::attention`], [`super::residual`], [`super::init`],
//! [`super::embedding`], [`super::logits`]); this file puts them together and holds the checks
//! that span two concerns, each with a message that names both fields.

use super::attention::{self, Attention};
use super::embedding::{self, Embedding};
use super::expr::Vars;
use super::init::{self, InitScheme};
use super::logits::{self, Logits};
use super::residual::{self, Residual};
use super::slot::{self, NormSpec};
use super::spec::{GateOn, RecipeSpec};
use super::sublayers::{self, Dims, SublayerPlan};
use super::taper::{self, Taper};
use crate::norm::NormKind;
use anyhow::{Context, bail, ensure};

/// A recipe resolved for one depth, by concern.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedRecipe {
    pub name: String,
    pub sublayers: Vec<SublayerPlan>,
    pub attention: Attention,
    pub residual: Residual,
    pub init: InitScheme,
    pub embedding: Embedding,
    pub logits: Logits,
    /// TaperNorm's gate schedule, when a slot is `tapernorm`.
    pub taper: Option<Taper>,
    /// The sizes and the norm ε it was resolved for: a model of other sizes needs its own.
    pub dims: Dims,
    pub eps: f64,
}

/// The deepest model normlab builds (DeepNet trained 1000 layers; KiteNorm's stress test 96).
pub const MAX_LAYERS: usize = 10_000;
/// The widest hidden state normlab builds.
pub const MAX_WIDTH: usize = 1 << 16;

/// Resolves `spec` for a model of `dims` with norm epsilon `eps`.
pub fn resolve(spec: &RecipeSpec, dims: Dims, eps: f64) -> anyhow::Result<ResolvedRecipe> {
    resolve_inner(spec, dims, eps).with_context(|| format!("recipe `{}`", spec.name))
}

/// Turns a written norm slot of `spec` into a [`NormKind`] for a model of `dims`, rejecting
/// options the kind lacks.
pub fn norm_kind(spec: &RecipeSpec, slot: &NormSpec, dims: Dims, eps: f64) -> anyhow::Result<Option<NormKind>> {
    slot::resolve(slot, spec.placement.norm, &sublayers::vars(&spec.placement, dims), eps)
}

fn resolve_inner(spec: &RecipeSpec, dims: Dims, eps: f64) -> anyhow::Result<ResolvedRecipe> {
    check_sizes(dims, eps)?;
    let mut plans = sublayers::plans(&spec.placement, dims, eps)?;
    let vars: Vars = sublayers::vars(&spec.placement, dims);
    let base = spec.placement.norm;
    let attention = attention::resolve(&spec.attention)?;
    let residual = residual::resolve(&spec.residual, &vars, plans.len()).context("residual")?;
    let init = init::resolve(&spec.init, dims.n_layers).context("init")?;
    let embedding = embedding::resolve(&spec.embedding, base, &vars, eps)?;
    let logits = logits::resolve(&spec.logits, base, &vars, eps)?;
    check_residual(&residual, &plans, &attention)?;
    check_init(&init, &residual, &plans)?;
    ensure!(
        residual.is_sum() || logits.regularizer == 0.0,
        "`logits.regularizer` acts on a single residual stream; remove it or residual kind `{}`",
        residual.kind()
    );
    let tapers = check_taper_slots(&plans, &logits.norm)?;
    ensure!(
        !tapers || residual.is_sum(),
        "`tapernorm` tapers the pre-norms of a single residual stream; it does not combine with residual kind `{}`",
        residual.kind()
    );
    let taper = taper::resolve(spec.placement.taper.as_ref(), tapers)?;
    // CompleteP: every branch × L_base/L.
    if let Some(c) = init.completep() {
        plans.iter_mut().for_each(|p| p.residual *= c.branch_scale());
    }
    Ok(ResolvedRecipe {
        name: spec.name.clone(),
        sublayers: plans,
        attention,
        residual,
        init,
        embedding,
        logits,
        taper,
        dims,
        eps,
    })
}

/// What each residual kind needs of the sublayers and the attention.
fn check_residual(residual: &Residual, plans: &[SublayerPlan], attention: &Attention) -> anyhow::Result<()> {
    match residual {
        Residual::Sum { gpas: true, .. } => check_gpas(plans),
        Residual::Sum { .. } => Ok(()),
        Residual::Streams(_) | Residual::AttnRes(_) => check_residual_state(plans, residual.kind()),
        Residual::Hypersphere(_) => check_hypersphere_attention(attention),
    }
}

/// GPAS scales the sum right after the residual addition: a post-norm's outer norm there would
/// undo it (the authors' Post-LN form scales the skip instead, which normlab does not build),
/// and nGPT's step has no such sum.
fn check_gpas(sublayers: &[SublayerPlan]) -> anyhow::Result<()> {
    for p in sublayers {
        ensure!(
            p.outer.is_none(),
            "sublayer {}: `residual.gpas` scales the sum after the residual addition, which an outer norm \
             renormalises; use it with pre-, Peri- or sandwich-norm recipes (no outer norm)",
            p.index
        );
        ensure!(
            p.gate.is_none_or(|g| g.on != GateOn::Interpolate),
            "sublayer {}: `residual.gpas` scales a residual sum, and nGPT's interpolation step has none",
            p.index
        );
    }
    Ok(())
}

/// nGPT normalises queries and keys itself: the attention options that would act on them too
/// are refused.
fn check_hypersphere_attention(a: &Attention) -> anyhow::Result<()> {
    let conflicts = [
        ("qk_norm", a.qk_norm.is_on()),
        ("qk_clip", a.qk_clip.is_some()),
        ("v_norm", a.v_norm.is_on()),
        ("softcap", a.softcap.is_some()),
    ];
    for (field, set) in conflicts {
        ensure!(
            !set,
            "residual kind `hypersphere`: nGPT normalises queries and keys itself (s_qk ⊙ unit vectors, softmax \
             scale √d_h); remove `attention.{field}`"
        );
    }
    Ok(())
}

/// What each initialisation needs of the residual kind and the sublayers.
fn check_init(init: &InitScheme, residual: &Residual, plans: &[SublayerPlan]) -> anyhow::Result<()> {
    if *init == InitScheme::Standard {
        return Ok(());
    }
    let kind = init.kind();
    match residual {
        Residual::Sum { .. } if matches!(init, InitScheme::MomentControl(_)) => check_moment_control(plans),
        Residual::Sum { .. } => Ok(()),
        Residual::Hypersphere(_) => bail!(
            "init kind `{kind}` sets the weights' and branches' scales, which nGPT's unit-norm projection \
             (residual kind `hypersphere`) undoes; use one or the other"
        ),
        _ => bail!(
            "init kind `{kind}` acts on a single residual stream; remove it or residual kind `{}`",
            residual.kind()
        ),
    }
}

/// DeepScaleLM's moment control on these sublayers: its recursion needs every branch to read a
/// unit-variance input and add its own output, and it replaces the init scales.
fn check_moment_control(plans: &[SublayerPlan]) -> anyhow::Result<()> {
    if let Some(p) = plans.iter().find(|p| p.input.is_none() || p.output.is_some() || p.gate.is_some()) {
        bail!(
            "sublayer {}: init kind `moment-control` needs an input norm on every sublayer and no output norm or \
             gate (its moments are derived for X ← λ·X + β·F(N(X)))",
            p.index
        );
    }
    if let Some(p) = plans.iter().find(|p| p.input_scale != 1.0) {
        bail!(
            "sublayer {} scales its input, which init kind `moment-control` does not model; remove input_scale",
            p.index
        );
    }
    if let Some(p) = plans.iter().find(|p| p.init_in != 1.0 || p.init_out != 1.0) {
        bail!(
            "sublayer {} sets init_in/init_out, which init kind `moment-control` replaces with its own standard \
             deviations; remove one of them",
            p.index
        );
    }
    Ok(())
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

/// A residual state of streams or attention over depth replaces the skip and residual scales,
/// the outer norms and the gates: those must be the plain ones, and BHyT's shared statistic
/// cannot be read. `kind` names the residual kind for the messages.
fn check_residual_state(plans: &[SublayerPlan], kind: &str) -> anyhow::Result<()> {
    for p in plans {
        if p.skip != 1.0 || p.residual != 1.0 || p.outer.is_some() || p.gate.is_some() {
            bail!(
                "sublayer {}: residual kind `{kind}` replaces the residual sum, so a = c = 1 with no outer norm and no \
                 gate (its learned weights take their place)",
                p.index
            );
        }
        if matches!(p.input, Some(NormKind::Bhyt { .. } | NormKind::RmsNormApprox { .. })) {
            bail!(
                "sublayer {}: BHyT's and RMSNorm-Approx's FFN statistic approximates the attention sublayer's input, \
                 which residual kind `{kind}` reads apart from the FFN's; use their exact forms (bhyt-star, rmsnorm)",
                p.index
            );
        }
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
        "`logits.norm` = \"tapernorm\": the final norm anchors the scale of the logits' input (TaperNorm's paper); \
         tapering it needs an auxiliary scale loss, which normlab does not build; keep `rmsnorm` there"
    );
    Ok(plans.iter().any(|p| is_taper(&p.input)))
}
