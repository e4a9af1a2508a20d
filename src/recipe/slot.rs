//! A norm slot as a recipe writes it (`"ln"`, `"rmsnorm"`, `{ kind = "dyt", alpha = 0.5 }`),
//! the base norm `"ln"` slots mean, and the slot resolved into a [`NormKind`] for a depth.

use super::expr::{Scale, Vars, scale_value};
use crate::norm::BhytDenominator;
use crate::norm::kinds::NormOption;
use crate::norm::{KindInfo, NormKind, SlotOptions};
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};

/// A norm slot as written: a kind name (`"none"`, `"ln"`, `"layernorm"`, `"rmsnorm"`,
/// `"scalar-ln"`, `"dyt"`, `"bhyt-star"`, `"bhyt"`, `"rmsnorm-approx"`) or a table with options.
///
/// `"ln"` means the recipe's base norm ([`BaseNorm`]), so that LayerNorm vs RMSNorm is
/// chosen independently of placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[serde(try_from = "toml::Value")]
pub enum NormSpec {
    Kind(NormName),
    Table(NormTable),
}

/// A norm kind as a recipe names it: `"none"` (an empty slot), `"ln"` (the recipe's base norm,
/// [`BaseNorm`]) or a kind of [`crate::norm::KINDS`], the one table of kinds their names
/// and options come from. `"scalar-ln"` under `norm = "rmsnorm"` is the scalarised RMSNorm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "&'static str")]
pub struct NormName(&'static str);

impl<'de> Deserialize<'de> for NormName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        NormName::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl NormName {
    /// An empty slot.
    pub const NONE: NormName = NormName("none");
    /// The recipe's base norm: LayerNorm or RMSNorm.
    pub const LN: NormName = NormName("ln");

    /// A kind of [`crate::norm::KINDS`] by its name, for the presets (a name the table lacks is
    /// refused when the recipe resolves; every preset resolves in the tests).
    pub const fn kind(name: &'static str) -> NormName {
        NormName(name)
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Every name a recipe may write.
    pub fn known() -> Vec<&'static str> {
        let mut all = vec![Self::NONE.0, Self::LN.0];
        all.extend(crate::norm::KINDS.iter().map(|k| k.name));
        all
    }

    /// The options a slot of this kind takes (any other set option is an error): `ln` takes
    /// LayerNorm's.
    pub fn options(self) -> &'static [NormOption] {
        let name = if self == Self::LN { "layernorm" } else { self.0 };
        crate::norm::kinds::find(name).map_or(&[], |k| k.options)
    }
}

impl TryFrom<String> for NormName {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::known()
            .into_iter()
            .find(|n| *n == s)
            .map(NormName)
            .ok_or_else(|| format!("unknown norm kind `{s}` (known: {})", Self::known().join(", ")))
    }
}

impl From<NormName> for &'static str {
    fn from(n: NormName) -> Self {
        n.as_str()
    }
}

impl std::fmt::Display for NormName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Options of a norm slot; fields that do not apply to the kind are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormTable {
    pub kind: NormName,
    /// Learnable gain γ (default true). `false` fixes γ = 1 (the Peri-LN paper's §4.4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<bool>,
    /// Learnable shift β (LayerNorm, scalarised LayerNorm; default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<bool>,
    /// DyT's and Derf's initial α (default 0.5, both repositories' default), SeeDNorm's (every
    /// entry; default 1): a number or an expression in `L`, `k`, `l`, `d` and `params` (the
    /// `dyt` preset steps it by width `d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<Scale>,
    /// BHyT's initial λ (the BHyT paper's C.3: 2.0 before attention, 1.0 before the FFN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// BHyT's target probability p, κ = (1 − p)^{−1/2} (default 0.99, κ = 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// BHyT*'s denominator: `"std"` (paper eq. 1, default) or `"rms"` (authors' code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denominator: Option<BhytDenominator>,
    /// Derf's initial shift `s` inside the erf (default 0, the Derf repository's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<f64>,
    /// SeeDNorm's initial β, every entry (default 0: RMSNorm at initialisation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
}

/// Parsed by hand so that a typo inside a norm table is reported by name, not as "did not
/// match any variant".
impl TryFrom<toml::Value> for NormSpec {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => NormName::try_from(s).map(NormSpec::Kind),
            toml::Value::Table(_) => v.try_into::<NormTable>().map(NormSpec::Table).map_err(|e| e.to_string()),
            other => Err(format!("a norm is a kind name or a table, not `{other}`")),
        }
    }
}

impl NormSpec {
    pub fn none() -> Self {
        NormSpec::Kind(NormName::NONE)
    }

    pub fn table(&self) -> NormTable {
        match self {
            NormSpec::Kind(k) => NormTable::of(*k),
            NormSpec::Table(t) => t.clone(),
        }
    }

    pub fn is_none(&self) -> bool {
        self.table().kind == NormName::NONE
    }
}

impl NormTable {
    /// The options this table sets.
    pub fn set_options(&self) -> Vec<NormOption> {
        let set = [
            (NormOption::Gain, self.gain.is_some()),
            (NormOption::Shift, self.shift.is_some()),
            (NormOption::Alpha, self.alpha.is_some()),
            (NormOption::Lambda, self.lambda.is_some()),
            (NormOption::P, self.p.is_some()),
            (NormOption::Denominator, self.denominator.is_some()),
            (NormOption::Offset, self.offset.is_some()),
            (NormOption::Beta, self.beta.is_some()),
        ];
        set.into_iter().filter(|(_, is_set)| *is_set).map(|(o, _)| o).collect()
    }

    /// `kind` with every option at its default.
    pub fn of(kind: NormName) -> Self {
        Self {
            kind,
            gain: None,
            shift: None,
            alpha: None,
            lambda: None,
            p: None,
            denominator: None,
            offset: None,
            beta: None,
        }
    }
}

/// The base norm that `"ln"` slots resolve to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseNorm {
    #[default]
    Layernorm,
    Rmsnorm,
}
/// Turns the written slot `spec` into a [`NormKind`] under the base norm `base` (expressions
/// evaluated with `vars`, norm ε `eps`), rejecting options the kind lacks; `None` for an empty
/// slot.
pub fn resolve(spec: &NormSpec, base: BaseNorm, vars: &Vars, eps: f64) -> anyhow::Result<Option<NormKind>> {
    let t = spec.table();
    for o in t.set_options() {
        ensure!(t.kind.options().contains(&o), "norm kind `{}` has no option `{}`", t.kind, o.name());
    }
    let Some(kind) = kind_meant(&t, base)? else { return Ok(None) };
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

/// The kind a slot's written name means under the base norm: `ln` is LayerNorm or RMSNorm,
/// `scalar-ln` under RMSNorm the scalarised RMSNorm; `None` for an empty slot.
fn kind_meant(t: &NormTable, base: BaseNorm) -> anyhow::Result<Option<&'static KindInfo>> {
    let rms_base = base == BaseNorm::Rmsnorm;
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
    crate::norm::kinds::find(name).map(Some).with_context(|| format!("unknown norm kind `{name}` (known: {})", known()))
}
