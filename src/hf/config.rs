//! A Hugging Face `config.json` of the Llama, Qwen2, Qwen3 and OLMo-2 families and their
//! mixture-of-experts kin (Mixtral, Qwen3-MoE, OLMoE), and the normlab model it maps to.

pub use super::family::Family;
use crate::model::ModelConfig;
use crate::recipe::{RecipeConfig, RecipeOverlay};
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The fields of `config.json` normlab reads (others are ignored).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HfConfig {
    pub model_type: String,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    pub vocab_size: usize,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    /// Absent in `transformers` ≥ 5, which writes `rope_parameters.rope_theta` instead.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_parameters: Option<serde_json::Value>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    /// The MoE families' fields.
    #[serde(flatten)]
    pub moe: super::moe::HfMoe,
}

fn default_eps() -> f64 {
    1e-6
}
fn default_act() -> String {
    "silu".into()
}

impl HfConfig {
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let p = dir.join("config.json");
        ensure!(p.is_file(), "{} has no config.json; give a Hugging Face checkpoint directory", dir.display());
        let text = std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a Llama/Qwen/OLMo-2 config.json", p.display()))
    }

    /// The family, or a clear refusal of anything else.
    pub fn family(&self) -> anyhow::Result<Family> {
        let f = match self.model_type.as_str() {
            "llama" => Family::Llama,
            "qwen2" => Family::Qwen2,
            "qwen3" => Family::Qwen3,
            "olmo2" => Family::Olmo2,
            "mixtral" => Family::Mixtral,
            "qwen3_moe" => Family::Qwen3Moe,
            "olmoe" => Family::Olmoe,
            other => bail!(
                "model_type `{other}` is not supported; normlab imports llama, qwen2, qwen3, olmo2, mixtral, \
                 qwen3_moe and olmoe checkpoints"
            ),
        };
        if f.is_moe() {
            self.moe.check(f)?;
        }
        ensure!(self.hidden_act == "silu", "hidden_act `{}` is not supported (SiLU-GLU only)", self.hidden_act);
        ensure!(!self.mlp_bias, "mlp_bias = true is not supported (bias-free FFN only)");
        ensure!(
            self.rope_scaling.as_ref().is_none_or(|v| v.is_null()),
            "rope_scaling is not supported (plain RoPE only); this checkpoint uses {}",
            self.rope_scaling.as_ref().map(|v| v.to_string()).unwrap_or_default()
        );
        let rope_type = self.rope_parameters.as_ref().and_then(|p| p.get("rope_type")).and_then(|t| t.as_str());
        ensure!(
            rope_type.is_none_or(|t| t == "default"),
            "rope_type `{}` is not supported (plain RoPE only)",
            rope_type.unwrap_or_default()
        );
        ensure!(
            matches!(f, Family::Llama | Family::Qwen2) || !self.attention_bias,
            "attention_bias = true is not supported for {}",
            self.model_type
        );
        Ok(f)
    }

    /// RoPE's θ from either place it is written (10000 when neither says).
    pub fn theta(&self) -> f64 {
        let nested = self.rope_parameters.as_ref().and_then(|p| p.get("rope_theta")).and_then(|t| t.as_f64());
        self.rope_theta.or(nested).unwrap_or(10_000.0)
    }

    /// Query/key/value biases: always in Qwen2, `attention_bias` elsewhere.
    pub fn attn_bias(&self, f: Family) -> bool {
        f == Family::Qwen2 || self.attention_bias
    }

    /// The normlab model of this checkpoint under `recipe`.
    pub fn model_config(&self, f: Family, recipe: RecipeConfig) -> anyhow::Result<ModelConfig> {
        let moe = f.is_moe().then(|| self.moe.moe_config(f, self.num_hidden_layers)).transpose()?;
        Ok(ModelConfig {
            vocab_size: self.vocab_size,
            d_model: self.hidden_size,
            n_layers: self.num_hidden_layers,
            n_heads: self.num_attention_heads,
            n_kv_heads: self.num_key_value_heads.filter(|&k| k != self.num_attention_heads),
            head_dim: self.head_dim.filter(|&h| h * self.num_attention_heads != self.hidden_size),
            attn_bias: self.attn_bias(f),
            tie_embeddings: self.tie_word_embeddings,
            pad_vocab: true,
            ffn: crate::model::FfnKind::Glu,
            d_glu: Some(self.intermediate_size),
            d_mlp: None,
            rope_base: self.theta(),
            norm_eps: self.rms_norm_eps,
            init_std: 0.02,
            recipe,
            kernels: Default::default(),
            lora: None,
            moe,
        })
    }
}

/// The recipe of an import: the family's own, or `target` (a preset name) with the family's
/// RMSNorm and QK-norm so the imported weights keep their role.
pub fn recipe_for(f: Family, target: Option<&str>) -> anyhow::Result<RecipeConfig> {
    let text = match target {
        None => f.source_recipe().to_string(),
        Some(t) => {
            let qk = match f.qk_norm() {
                "none" => String::new(),
                q => format!("[attention]\nqk_norm = \"{q}\"\n"),
            };
            let with_norm = format!("preset = \"{t}\"\n[placement]\nnorm = \"rmsnorm\"\n{qk}");
            // Recipes whose norms are not LayerNorm-like (DyT, BHyT) keep their own kind.
            if let Ok(overlay) = RecipeOverlay::parse(&with_norm) {
                return Ok(RecipeConfig::Custom(Box::new(overlay)));
            }
            format!("preset = \"{t}\"\n{qk}")
        }
    };
    let overlay = RecipeOverlay::parse(&text)
        .with_context(|| format!("recipe `{}` cannot be built", target.unwrap_or(f.model_type())))?;
    Ok(RecipeConfig::Custom(Box::new(overlay)))
}
