//! A recipe as written in a config file.
//!
//! ```toml
//! recipe = "kitenorm"                 # a preset by name
//! ```
//! or a preset with changes, or a recipe from scratch (no `preset`):
//! ```toml
//! [recipe]
//! preset = "peri"
//! [recipe.placement]
//! norm = "rmsnorm"                    # Peri-LN as in the Peri-LN paper
//! [recipe.placement.sublayer]
//! output = { kind = "ln", gain = false }   # the Peri-LN paper's §4.4.1: output-norm gain frozen at 1
//! [[recipe.placement.layers]]         # appended to the preset's overrides
//! range = "1..=2"
//! residual = "0.5"
//! [recipe.embedding]
//! norm = "none"                       # ... or as in KiteNorm Table 2
//! [recipe.logits]
//! norm = "none"
//! ```
//!
//! Changes are laid over the preset section by section: a field written replaces the preset's,
//! `placement.sublayer` and `placement.params` field by field, `placement.layers` is appended,
//! and a `residual` or `init` of another `kind` replaces the preset's whole. A config in the
//! single-table form of earlier versions (`qk_norm = "head"`, `streams = {…}` at the top) is
//! read through [`super::flat_form`].

use super::catalog::{PRESET_NAMES, preset};
use super::presets::parts::blank;
use super::residual;
use super::spec::RecipeSpec;
use anyhow::Context;
use serde::{Deserialize, Serialize};

/// `recipe = "name"` or a `[recipe]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[serde(try_from = "toml::Value")]
pub enum RecipeConfig {
    Preset(String),
    Custom(Box<RecipeOverlay>),
}

impl TryFrom<toml::Value> for RecipeConfig {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => Ok(RecipeConfig::Preset(s)),
            toml::Value::Table(t) => RecipeOverlay::try_from(t).map(|o| RecipeConfig::Custom(Box::new(o))),
            other => Err(format!("`recipe` is a preset name or a table, not `{other}`")),
        }
    }
}

impl Default for RecipeConfig {
    fn default() -> Self {
        RecipeConfig::Preset("pre".into())
    }
}

impl RecipeConfig {
    /// The full recipe this config describes.
    pub fn spec(&self) -> anyhow::Result<RecipeSpec> {
        match self {
            RecipeConfig::Preset(name) => lookup(name),
            RecipeConfig::Custom(o) => o.apply(),
        }
    }
}

/// Changes to a preset (or, without `preset`, a recipe from scratch: no norms, scales 1), in the
/// sectioned form of [`RecipeSpec`]; a written table is checked when it is read.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "toml::Table", into = "toml::Table")]
pub struct RecipeOverlay {
    pub preset: Option<String>,
    /// Every other key as written (translated from the single-table form where it was that).
    pub changes: toml::Table,
}

impl TryFrom<toml::Table> for RecipeOverlay {
    type Error = String;

    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let preset = match t.remove("preset") {
            None => None,
            Some(toml::Value::String(s)) => Some(s),
            Some(other) => return Err(format!("`preset` is a preset name, not `{other}`")),
        };
        let changes = super::flat_form::translate(t)?;
        let o = RecipeOverlay { preset, changes };
        o.apply().map_err(|e| format!("{e:#}"))?;
        Ok(o)
    }
}

impl From<RecipeOverlay> for toml::Table {
    fn from(o: RecipeOverlay) -> toml::Table {
        let mut t = toml::Table::new();
        if let Some(p) = o.preset {
            t.insert("preset".into(), toml::Value::String(p));
        }
        t.extend(o.changes);
        t
    }
}

fn lookup(name: &str) -> anyhow::Result<RecipeSpec> {
    preset(name).with_context(|| format!("unknown recipe `{name}`; presets are: {}", PRESET_NAMES.join(", ")))
}

impl RecipeOverlay {
    /// An overlay from its TOML text (`preset = "pre"\n[attention]\nqk_norm = "head"`).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let t: toml::Table = toml::from_str(text).context("recipe")?;
        RecipeOverlay::try_from(t).map_err(anyhow::Error::msg)
    }

    /// The recipe: the preset (or the blank recipe) with the changes laid over it.
    fn apply(&self) -> anyhow::Result<RecipeSpec> {
        let base = match &self.preset {
            Some(p) => lookup(p)?,
            None => blank("custom", "custom recipe"),
        };
        let toml::Value::Table(mut spec) = toml::Value::try_from(&base).context("the preset as a table")? else {
            anyhow::bail!("recipe `{}` is not a table", base.name)
        };
        if self.preset.is_some() && !self.changes.is_empty() && !self.changes.contains_key("name") {
            spec.insert("name".into(), toml::Value::String(format!("{}*", base.name)));
        }
        for (key, value) in &self.changes {
            lay_over(&mut spec, key, value.clone());
        }
        check_residual_options(&spec)?;
        let place = super::locate::first_refused(&spec).map_or(String::new(), |p| format!("`{p}`: "));
        toml::Value::Table(spec).try_into::<RecipeSpec>().map_err(|e| anyhow::anyhow!("{place}{}", e.message().trim()))
    }
}

/// Lays the written `value` of section `key` over the recipe table `spec`.
fn lay_over(spec: &mut toml::Table, key: &str, value: toml::Value) {
    let toml::Value::Table(changes) = value else {
        spec.insert(key.into(), value);
        return;
    };
    let Some(toml::Value::Table(section)) = spec.get_mut(key) else {
        spec.insert(key.into(), toml::Value::Table(changes));
        return;
    };
    // A kind other than the preset's replaces its section whole: its settings are the new kind's.
    let other_kind = changes.get("kind").is_some_and(|k| section.get("kind") != Some(k));
    if other_kind {
        *section = changes;
        return;
    }
    for (field, v) in changes {
        match (field.as_str(), section.get_mut(&field), v) {
            ("sublayer" | "params", Some(toml::Value::Table(old)), toml::Value::Table(new)) if key == "placement" => {
                old.extend(new)
            }
            ("layers", Some(toml::Value::Array(old)), toml::Value::Array(new)) if key == "placement" => old.extend(new),
            (_, _, v) => {
                section.insert(field, v);
            }
        }
    }
}

/// Every setting of the residual section is one its kind takes ([`residual::KINDS`]): a setting
/// of another kind is named with the kind it belongs to.
fn check_residual_options(spec: &toml::Table) -> anyhow::Result<()> {
    let Some(toml::Value::Table(r)) = spec.get("residual") else { return Ok(()) };
    let kind = r.get("kind").and_then(|k| k.as_str()).unwrap_or("sum");
    let names = || residual::KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ");
    let row = residual::find(kind).with_context(|| format!("unknown residual kind `{kind}` (kinds: {})", names()))?;
    let Some(key) = r.keys().find(|k| *k != "kind" && !row.options.contains(&k.as_str())) else { return Ok(()) };
    let owner = residual::KINDS.iter().find(|k| k.options.contains(&key.as_str()));
    let whose = owner.map_or(String::new(), |o| format!(": `{key}` is an option of residual kind `{}`", o.name));
    anyhow::bail!(
        "unknown field `{key}` for residual kind `{kind}`{whose} (the options of `{kind}`: {})",
        row.options.join(", ")
    )
}
