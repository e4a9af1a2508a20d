//! nGPT's hypersphere (Loshchilov et al., 2024, "nGPT: Normalized Transformer with
//! Representation Learning on the Hypersphere"; NVIDIA's reference `model.py`): the recipe option
//! that puts the embeddings and every weight vector on the unit sphere and adds the scaling
//! factors that give the normalised vectors back their range.
//!
//! ```text
//! q, k   = s_qk ⊙ Norm(RoPE(x W_q)),  s_qk ⊙ Norm(RoPE(x W_k))   per head; softmax scale √d_h
//! u, ν   = (s_uv ⊙ √d) ⊙ (x W_3, x W_1)                          FFN = W_2 (u ⊙ SiLU(ν))
//! logits = s_z ⊙ (h W_out)                                        every W_out column unit-norm
//! after every optimizer step: each embedding row and every W_q, W_k, W_v, W_1, W_3 column,
//! W_O, W_2 row and W_out column (the vectors along d) is scaled to unit L2 norm
//! ```
//!
//! Each factor is a scaled parameter: stored starting at `scale`, used as `stored · init/scale`
//! (`s_uv` also times `√d`, the reference code's `suv · √n_embd`). The residual update itself,
//! `h ← Norm(h + α ⊙ (Norm(F(h)) − h))`, is the sublayer equation with unit-L2 `N_out` and
//! `N_outer` and an interpolating gate α (see [`super::spec::GateOn::Interpolate`]).

use super::expr::{Scale, Vars, eval};
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};

/// A scaled parameter of nGPT: used value `init` at initialisation, stored starting at `scale`
/// (see [`super::spec::GateSpec::scale`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaledSpec {
    pub init: Scale,
    pub scale: Scale,
}

/// nGPT's scaling factors, each a scaled parameter; the defaults are NVIDIA's reference code's
/// (`sqk`, `sz`: init 1 stored at `1/√d`; `suv`: init 1 stored at 1, used times `√d`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HypersphereSpec {
    /// `s_qk ∈ ℝ^{d}` (one value per query/key channel of every head).
    #[serde(default = "unit_over_root_d")]
    pub sqk: ScaledSpec,
    /// `s_uv ∈ ℝ^{2·d_ff}` on the two GLU pre-activations, used times `√d`.
    #[serde(default = "unit")]
    pub suv: ScaledSpec,
    /// `s_z ∈ ℝ^V` on the logits.
    #[serde(default = "unit_over_root_d")]
    pub sz: ScaledSpec,
}

impl Default for HypersphereSpec {
    fn default() -> Self {
        Self { sqk: unit_over_root_d(), suv: unit(), sz: unit_over_root_d() }
    }
}

fn unit_over_root_d() -> ScaledSpec {
    ScaledSpec { init: Scale::Number(1.0), scale: Scale::expr("1/sqrt(d)") }
}

fn unit() -> ScaledSpec {
    ScaledSpec { init: Scale::Number(1.0), scale: Scale::Number(1.0) }
}

/// A resolved scaled parameter: it starts at `stored` and is used as `stored · factor`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaled {
    pub stored: f64,
    pub factor: f64,
}

impl Scaled {
    /// The value the forward uses at initialisation.
    pub fn init(self) -> f64 {
        self.stored * self.factor
    }
}

/// nGPT's resolved scaling factors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hypersphere {
    pub sqk: Scaled,
    /// Without the `√d` the forward multiplies in.
    pub suv: Scaled,
    pub sz: Scaled,
}

/// Resolves `h` with the recipe's variables (`d`, `L`, params). (The attention options nGPT's
/// own query and key normalisation replaces are refused where both concerns meet,
/// [`super::resolve`].)
pub fn resolve(h: &HypersphereSpec, vars: &Vars) -> anyhow::Result<Hypersphere> {
    let scaled = |name: &str, s: &ScaledSpec| scaled(s, vars).with_context(|| format!("residual.{name}"));
    Ok(Hypersphere { sqk: scaled("sqk", &h.sqk)?, suv: scaled("suv", &h.suv)?, sz: scaled("sz", &h.sz)? })
}

fn scaled(s: &ScaledSpec, vars: &Vars) -> anyhow::Result<Scaled> {
    let (init, scale) = (value(&s.init, vars).context("`init`")?, value(&s.scale, vars).context("`scale`")?);
    Ok(Scaled { stored: scale, factor: init / scale })
}

/// A positive finite number or expression.
fn value(s: &Scale, vars: &Vars) -> anyhow::Result<f64> {
    let v = match s {
        Scale::Number(v) => *v,
        Scale::Expr(e) => eval(e, vars).map_err(anyhow::Error::msg)?,
    };
    ensure!(v.is_finite() && v > 0.0, "`{}` = {v} must be a positive finite number", s.text());
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVIDIA's defaults at d = 1024: s_qk and s_z stored at 1/32 and used at 1 (factor 32),
    /// s_uv stored and used at 1.
    #[test]
    fn reference_defaults_by_hand() {
        let vars = Vars::from([("d".to_string(), 1024.0), ("L".to_string(), 4.0)]);
        let h = resolve(&HypersphereSpec::default(), &vars).unwrap();
        assert_eq!(h.sqk, Scaled { stored: 1.0 / 32.0, factor: 32.0 });
        assert_eq!(h.sz, Scaled { stored: 1.0 / 32.0, factor: 32.0 });
        assert_eq!(h.suv, Scaled { stored: 1.0, factor: 1.0 });
        assert_eq!(h.sqk.init(), 1.0);
    }
}
