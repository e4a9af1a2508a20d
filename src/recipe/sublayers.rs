//! The placement resolved for a depth: every sublayer's equation
//! `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))` with the per-layer overrides laid over
//! the base, expressions evaluated and norm slots turned into [`NormKind`]s.

use super::expr::{Scale, Vars, eval, scale_value};
use super::slot::{self, NormSpec};
use super::spec::{GateOn, GateOwner, GateShape, GateSpec, PlacementSpec, SublayerSpec, Which};
use crate::norm::NormKind;
use anyhow::{Context, bail, ensure};

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

/// The sizes a recipe's expressions may use: `L` (Transformer layers) and `d` (hidden size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub n_layers: usize,
    pub d_model: usize,
}

/// The variables of a recipe's expressions at `dims`: its params, `L` and `d`.
pub fn vars(placement: &PlacementSpec, dims: Dims) -> Vars {
    let mut v = placement.params.clone();
    v.insert("L".into(), dims.n_layers as f64);
    v.insert("d".into(), dims.d_model as f64);
    v
}

/// Every sublayer's plan for `dims` with norm ε `eps`, checked.
pub fn plans(p: &PlacementSpec, dims: Dims, eps: f64) -> anyhow::Result<Vec<SublayerPlan>> {
    let placement = Placement(p);
    placement.check_params()?;
    placement.check_layer_entries()?;
    let plans =
        (1..=2 * dims.n_layers).map(|index| placement.plan(index, dims, eps)).collect::<anyhow::Result<Vec<_>>>()?;
    check_bhyt_pairs(&plans)?;
    check_layer_gates(&plans)?;
    Ok(plans)
}

/// The resolution logic, as a view of the spec (the spec's own type stays plain data).
struct Placement<'a>(&'a PlacementSpec);

impl std::ops::Deref for Placement<'_> {
    type Target = PlacementSpec;
    fn deref(&self) -> &PlacementSpec {
        self.0
    }
}

impl Placement<'_> {
    fn vars(&self, dims: Dims) -> Vars {
        vars(self.0, dims)
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

    /// The named parameters are finite (ratios in [0, 1], no reserved names).
    fn check_params(&self) -> anyhow::Result<()> {
        for (name, v) in &self.params {
            ensure!(v.is_finite(), "params.{name} must be a finite number");
            if name.ends_with("_ratio") {
                ensure!((0.0..=1.0).contains(v), "params.{name} = {v} is outside [0, 1]");
            }
            ensure!(!matches!(name.as_str(), "L" | "k" | "l" | "d"), "params.{name}: `{name}` is reserved");
        }
        Ok(())
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
                Some(n) => slot::resolve(n, self.norm, &vars, eps).with_context(|| format!("`{field}`")),
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

/// A gate's resolved form. Its initial value may be 0 (ReZero, SkipInit) or negative: any
/// finite number.
fn gate(g: &GateSpec, vars: &Vars) -> anyhow::Result<Gate> {
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
fn parse_range(src: &str, vars: &Vars, n_layers: usize) -> anyhow::Result<(usize, usize)> {
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
