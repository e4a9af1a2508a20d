//! A recipe as written in a config file.
//!
//! ```toml
//! recipe = "kitenorm"                 # a preset by name
//! ```
//! or a preset with changes, or a recipe from scratch (no `preset`):
//! ```toml
//! [recipe]
//! preset = "peri"
//! norm = "rmsnorm"                    # Peri-LN as in the Peri-LN paper
//! final_norm = "none"                 # ... or as in KiteNorm Table 2
//! embedding_norm = "none"
//! [recipe.sublayer]
//! output = { kind = "ln", gain = false }   # the Peri-LN paper's §4.4.1: output-norm gain frozen at 1
//! [[recipe.layers]]                   # appended to the preset's overrides
//! range = "1..=2"
//! residual = "0.5"
//! ```

use super::catalog::{PRESET_NAMES, preset};
use super::presets::parts::blank;
use super::spec::{
    AttnGate, AttnResSpec, BaseNorm, CompletePSpec, HypersphereSpec, MomentControlSpec, NormSpec, QkClip, QkNorm,
    RecipeSpec, Scale, StreamsSpec, SublayerSpec, TaperSpec, X0Mix,
};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
            toml::Value::Table(_) => {
                v.try_into::<RecipeOverlay>().map(|o| RecipeConfig::Custom(Box::new(o))).map_err(|e| e.to_string())
            }
            other => Err(format!("`recipe` is a preset name or a table, not `{other}`")),
        }
    }
}

impl Default for RecipeConfig {
    fn default() -> Self {
        RecipeConfig::Preset("pre".into())
    }
}

/// Changes to a preset (or, without `preset`, a recipe from scratch: no norms, scales 1).
/// `params` are merged, `layers` appended, `sublayer` fields replace the preset's.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeOverlay {
    pub preset: Option<String>,
    pub name: Option<String>,
    pub about: Option<String>,
    pub norm: Option<BaseNorm>,
    pub embedding_norm: Option<NormSpec>,
    pub final_norm: Option<NormSpec>,
    pub qk_norm: Option<QkNorm>,
    pub v_norm: Option<QkNorm>,
    pub attn_softcap: Option<f64>,
    pub final_softcap: Option<f64>,
    pub attn_gate: Option<AttnGate>,
    pub attn_sink: Option<bool>,
    pub value_residual: Option<bool>,
    pub x0_mix: Option<X0Mix>,
    pub qk_clip: Option<QkClip>,
    pub hypersphere: Option<HypersphereSpec>,
    pub moment_control: Option<MomentControlSpec>,
    pub streams: Option<StreamsSpec>,
    pub attn_res: Option<AttnResSpec>,
    pub gpas: Option<bool>,
    pub completep: Option<CompletePSpec>,
    pub taper: Option<TaperSpec>,
    pub embedding_scale: Option<Scale>,
    pub embedding_multiplier: Option<Scale>,
    pub regularizer: Option<f64>,
    #[serde(default)]
    pub params: BTreeMap<String, f64>,
    pub sublayer: Option<SublayerSpec>,
    #[serde(default)]
    pub layers: Vec<SublayerSpec>,
    #[serde(default)]
    pub notes: Vec<String>,
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

fn lookup(name: &str) -> anyhow::Result<RecipeSpec> {
    preset(name).with_context(|| format!("unknown recipe `{name}`; presets are: {}", PRESET_NAMES.join(", ")))
}

impl RecipeOverlay {
    /// The optional sections this overlay sets, each replacing the preset's whole.
    fn replace_sections(&self, r: &mut RecipeSpec) {
        macro_rules! replace {
            ($($f:ident),*) => { $( if let Some(v) = &self.$f { r.$f = Some(v.clone()); } )* };
        }
        replace!(
            embedding_scale,
            embedding_multiplier,
            hypersphere,
            moment_control,
            streams,
            attn_res,
            completep,
            taper
        );
    }

    fn apply(&self) -> anyhow::Result<RecipeSpec> {
        let mut r = match &self.preset {
            Some(p) => lookup(p)?,
            None => blank("custom", "custom recipe"),
        };
        let changed = self.name.is_none()
            && self.preset.is_some()
            && *self != RecipeOverlay { preset: self.preset.clone(), ..Default::default() };
        if let Some(v) = &self.name {
            r.name = v.clone();
        } else if changed {
            r.name = format!("{}*", r.name);
        }
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = &self.$f { r.$f = v.clone(); } )* };
        }
        set!(
            about,
            norm,
            embedding_norm,
            final_norm,
            qk_norm,
            v_norm,
            attn_gate,
            attn_sink,
            value_residual,
            gpas,
            regularizer
        );
        macro_rules! put {
            ($($f:ident),*) => { $( if self.$f.is_some() { r.$f = self.$f; } )* };
        }
        put!(attn_softcap, final_softcap, x0_mix, qk_clip);
        self.replace_sections(&mut r);
        r.params.extend(self.params.clone());
        if let Some(s) = &self.sublayer {
            r.sublayer.overlay(s);
            r.sublayer.range = s.range.clone().or(r.sublayer.range.take());
            r.sublayer.sublayers = s.sublayers.or(r.sublayer.sublayers);
        }
        r.layers.extend(self.layers.iter().cloned());
        r.notes.extend(self.notes.iter().cloned());
        Ok(r)
    }
}
