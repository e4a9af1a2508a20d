//! The checkpoint families normlab imports and exports, and what each one's layout is.

/// The families normlab imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Pre-norm RMSNorm, SiLU-GLU, RoPE, GQA (`model_type = "llama"`).
    Llama,
    /// Llama's layout with query/key/value biases (`qwen2`).
    Qwen2,
    /// Llama's layout with per-head QK RMSNorm and an explicit head size (`qwen3`).
    Qwen3,
    /// Norms on the sublayer outputs (`X + RMS(F(X))`), full-width QK-norm (`olmo2`).
    Olmo2,
    /// Llama's layout with a MoE feed-forward in every layer (`mixtral`).
    Mixtral,
    /// Qwen3's layout with MoE feed-forwards, some layers dense (`qwen3_moe`).
    Qwen3Moe,
    /// Pre-norm RMSNorm with full-width QK-norm and a MoE feed-forward in every layer (`olmoe`).
    Olmoe,
}

impl Family {
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Olmo2 => "olmo2",
            Family::Mixtral => "mixtral",
            Family::Qwen3Moe => "qwen3_moe",
            Family::Olmoe => "olmoe",
        }
    }

    /// Whether the family's feed-forward is a mixture of experts.
    pub fn is_moe(self) -> bool {
        matches!(self, Family::Mixtral | Family::Qwen3Moe | Family::Olmoe)
    }

    /// The families, dense and MoE.
    pub const ALL: [Family; 7] =
        [Family::Llama, Family::Qwen2, Family::Qwen3, Family::Olmo2, Family::Mixtral, Family::Qwen3Moe, Family::Olmoe];

    /// The normlab recipe under which the checkpoint's weights keep their meaning.
    pub fn source_recipe(self) -> &'static str {
        match self {
            Family::Llama | Family::Qwen2 | Family::Mixtral => "preset = \"pre\"\n[placement]\nnorm = \"rmsnorm\"\n",
            Family::Qwen3 | Family::Qwen3Moe => {
                "preset = \"pre\"\n[placement]\nnorm = \"rmsnorm\"\n[attention]\nqk_norm = \"head\"\n"
            }
            Family::Olmo2 => "preset = \"olmo2\"\n",
            Family::Olmoe => "preset = \"pre\"\n[placement]\nnorm = \"rmsnorm\"\n[attention]\nqk_norm = \"full\"\n",
        }
    }

    /// The QK-norm the checkpoint has (`none`, `head`, `full`).
    pub fn qk_norm(self) -> &'static str {
        match self {
            Family::Llama | Family::Qwen2 | Family::Mixtral => "none",
            Family::Qwen3 | Family::Qwen3Moe => "head",
            Family::Olmo2 | Family::Olmoe => "full",
        }
    }
}
