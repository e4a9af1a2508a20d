//! Model size and options.

use crate::kernels::Kernels;
pub use crate::model::ffn::kinds::FfnKind;
use crate::recipe::{RecipeConfig, RecipeSpec, ResolvedRecipe};
use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// The largest vocabulary normlab builds (GPT-2's is 50 257; the largest open models' ≈ 256 K).
pub const MAX_VOCAB: usize = 1 << 24;

/// Decoder-only Transformer configuration. Defaults are a small CPU-friendly model; KiteNorm
/// Table 1 uses d_model 512, 8 heads, d_glu 1536, RoPE base 500000, ε = 1e-6.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Vocabulary size (256 for the byte tokenizer).
    pub vocab_size: usize,
    /// Hidden size d.
    pub d_model: usize,
    /// Number of Transformer layers L (2L sublayers).
    pub n_layers: usize,
    /// Attention (query) heads; must divide `d_model` unless `head_dim` is given; the head size
    /// must be even (RoPE).
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention: each serves `n_heads / n_kv_heads` query
    /// heads); default `n_heads`.
    pub n_kv_heads: Option<usize>,
    /// Head size; default `d_model / n_heads` (Qwen3 sets it apart from `d_model`).
    pub head_dim: Option<usize>,
    /// Biases on the query, key and value projections (Qwen2).
    pub attn_bias: bool,
    /// Output projection tied to the token embedding: `logits = x Eᵀ` (no `lm_head`).
    pub tie_embeddings: bool,
    /// The embedding has rows beyond the tokenizer's vocabulary (an imported checkpoint's
    /// padding): `vocab_size` may then exceed the tokenizer's size.
    pub pad_vocab: bool,
    /// `glu` (SiLU-gated) or `mlp` (GELU, `d_mlp` wide).
    pub ffn: FfnKind,
    /// GLU hidden size (with `ffn = "glu"`); default ⌈8d/3⌉ rounded up to a multiple of 16
    /// (688 for d = 256).
    pub d_glu: Option<usize>,
    /// MLP hidden size (with `ffn = "mlp"`); default 4·d. A config may give both widths, so
    /// that a sweep over `model.ffn` compares the two at their own sizes. An MLP with as many parameters as a GLU of width `g` has
    /// `d_mlp = 3g/2` (KiteNorm E.2: 2304 against Table 1's 1536).
    pub d_mlp: Option<usize>,
    /// RoPE base θ (10000; KiteNorm Table 1 uses 500000).
    pub rope_base: f64,
    /// ε of every norm (KiteNorm Table 1: 1e-6).
    pub norm_eps: f64,
    /// Std of the N(0, std²) init of every linear and embedding weight (0.02).
    pub init_std: f64,
    /// The placement recipe: a preset name or a table (see [`crate::recipe::config`]).
    pub recipe: RecipeConfig,
    /// `fused` (default): one-pass CPU kernels for the norms, SwiGLU, RoPE and the causal
    /// softmax where the backend is `flex`; `composite`: the reference formulas everywhere.
    pub kernels: Kernels,
    /// LoRA adapters on the projections, every other weight frozen (`[model.lora]`; a
    /// fine-tuning run's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<crate::model::base::lora::LoraConfig>,
    /// A mixture of experts of kind `ffn` in the MoE layers (`[model.moe]`); every layer dense
    /// without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<crate::model::ffn::moe::options::MoeConfig>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            vocab_size: 256,
            d_model: 128,
            n_layers: 4,
            n_heads: 4,
            n_kv_heads: None,
            head_dim: None,
            attn_bias: false,
            tie_embeddings: false,
            pad_vocab: false,
            ffn: FfnKind::Glu,
            d_glu: None,
            d_mlp: None,
            rope_base: 10_000.0,
            norm_eps: 1e-6,
            init_std: 0.02,
            recipe: RecipeConfig::default(),
            kernels: Kernels::default(),
            lora: None,
            moe: None,
        }
    }
}

impl ModelConfig {
    /// Hidden size of the feed-forward block.
    pub fn d_ff(&self) -> usize {
        // Each kind reads its own width, so a sweep over `model.ffn` compares them at their sizes.
        let given = match self.ffn {
            FfnKind::Glu => self.d_glu,
            FfnKind::Mlp => self.d_mlp,
        };
        given.unwrap_or_else(|| (self.ffn.info().default_width)(self.d_model))
    }

    /// Parameters of the embedding, attention, feed-forward and output matrices (and the
    /// attention biases), from the sizes alone and in f64 so that no size overflows: what a
    /// memory estimate needs before anything is allocated. The norms' gains, shifts and scales
    /// (a few `d`-vectors per sublayer) are left out.
    pub fn matrix_params(&self) -> f64 {
        let v = self.vocab_size as f64;
        let d = self.d_model as f64;
        let l = self.n_layers as f64;
        let dq = self.n_heads as f64 * self.head_dim() as f64;
        let dkv = self.kv_heads() as f64 * self.head_dim() as f64;
        let bias = if self.attn_bias { dq + 2.0 * dkv } else { 0.0 };
        let attn = 2.0 * d * dq + 2.0 * d * dkv + bias;
        let projections = (self.ffn.info().inputs + 1) as f64 * d;
        let dense = projections * self.d_ff() as f64;
        // In closed form: a size may be far beyond what normlab builds (it is refused after).
        let ffn = match &self.moe {
            Some(m) => {
                let width = m.expert_width(self.d_ff()) as f64;
                let moe = m.layer_count(self.n_layers) as f64;
                let block = d * m.experts as f64 + projections * width * (m.experts + m.shared) as f64;
                moe * block + (l - moe) * dense
            }
            None => l * dense,
        };
        let output = if self.tie_embeddings { 0.0 } else { v * d };
        v * d + output + l * attn + ffn
    }

    /// The feed-forward activations a token keeps per layer for the backward pass (the widest
    /// layer): `3·d_ff` for a dense block; for a MoE block its `k` (and shared) experts' three
    /// hidden rows, its `k` gathered input rows and weighted outputs, and the router's `E`
    /// logits and scores.
    pub fn ffn_values_per_token(&self) -> f64 {
        let dense = 3.0 * self.d_ff() as f64;
        match &self.moe {
            Some(m) => {
                let width = m.expert_width(self.d_ff()) as f64;
                let moe = 3.0 * (m.top_k + m.shared) as f64 * width
                    + 2.0 * m.top_k as f64 * self.d_model as f64
                    + 2.0 * m.experts as f64;
                if m.first_dense > 0 || m.every > 1 { dense.max(moe) } else { moe }
            }
            None => dense,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.d_model / self.n_heads.max(1))
    }

    pub fn kv_heads(&self) -> usize {
        self.n_kv_heads.unwrap_or(self.n_heads)
    }

    /// Refuses a size beyond what normlab builds, before anything is sized from it.
    fn check_bounds(&self) -> anyhow::Result<()> {
        use crate::recipe::{MAX_LAYERS, MAX_WIDTH};
        let bounds = [
            ("model.n_layers", self.n_layers, MAX_LAYERS),
            ("model.d_model", self.d_model, MAX_WIDTH),
            ("model.n_heads", self.n_heads, MAX_WIDTH),
            ("model.n_kv_heads", self.kv_heads(), MAX_WIDTH),
            ("model.head_dim", self.head_dim.unwrap_or(0), MAX_WIDTH),
            ("model.vocab_size", self.vocab_size, MAX_VOCAB),
            (
                "the feed-forward width (model.d_glu or model.d_mlp)",
                self.d_glu.max(self.d_mlp).unwrap_or(0),
                16 * MAX_WIDTH,
            ),
        ];
        for (name, value, max) in bounds {
            ensure!(value <= max, "{name} = {value} is more than normlab builds (at most {max})");
        }
        Ok(())
    }

    /// Checks sizes and resolves the recipe for this depth.
    pub fn validate(&self) -> anyhow::Result<(RecipeSpec, ResolvedRecipe)> {
        self.check_bounds()?;
        ensure!(self.vocab_size > 0, "model.vocab_size must be > 0");
        ensure!(self.d_model > 0, "model.d_model must be > 0");
        ensure!(self.n_layers > 0, "model.n_layers must be > 0");
        ensure!(self.d_ff() > 0, "the feed-forward width (model.d_glu or model.d_mlp) must be > 0");
        ensure!(self.n_heads > 0, "model.n_heads must be > 0");
        ensure!(
            self.head_dim.is_some() || self.d_model.is_multiple_of(self.n_heads),
            "model.d_model = {} is not divisible by model.n_heads = {}; pick n_heads that divides d_model",
            self.d_model,
            self.n_heads
        );
        ensure!(self.head_dim != Some(0), "model.head_dim must be > 0");
        let kv = self.kv_heads();
        ensure!(
            kv > 0 && self.n_heads.is_multiple_of(kv),
            "model.n_kv_heads = {kv} must be > 0 and divide model.n_heads = {}",
            self.n_heads
        );
        ensure!(
            self.head_dim().is_multiple_of(2),
            "head size d_model/n_heads = {} must be even for RoPE",
            self.head_dim()
        );
        ensure!(self.d_glu != Some(0), "model.d_glu must be > 0");
        ensure!(self.rope_base > 1.0, "model.rope_base must be > 1");
        ensure!(self.init_std > 0.0 && self.init_std.is_finite(), "model.init_std must be > 0");
        if let Some(l) = &self.lora {
            l.plan()?;
            // Every adapted projection has d_model on one side: an adapter of rank ≥ d_model
            // holds as many values as the matrix it adapts, and is no low-rank update.
            ensure!(
                l.rank < self.d_model,
                "model.lora.rank = {} is not below d_model = {}: an adapter of that rank is no smaller than the \
                 projection it adapts; give a rank below d_model (peft's default is 8)",
                l.rank,
                self.d_model
            );
        }
        let spec = self.recipe.spec()?;
        let dims = crate::recipe::Dims { n_layers: self.n_layers, d_model: self.d_model };
        let resolved = crate::recipe::resolve(&spec, dims, self.norm_eps)?;
        if let Some(m) = &self.moe {
            self.check_moe(m, &resolved)?;
            m.norms(&spec, dims, self.norm_eps)?;
        }
        Ok((spec, resolved))
    }

    /// `[model.moe]` against the sizes and what the experts cannot run with.
    fn check_moe(&self, m: &crate::model::ffn::moe::options::MoeConfig, recipe: &ResolvedRecipe) -> anyhow::Result<()> {
        m.check(self.n_layers)?;
        ensure!(
            recipe.residual.hypersphere().is_none(),
            "recipe `{}` lives on nGPT's hypersphere, whose FFN scales s_uv are one dense block's; drop [model.moe] or \
             pick another recipe",
            recipe.name
        );
        Ok(())
    }
}
