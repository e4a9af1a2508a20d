//! The sizes a benchmark runs at (`normlab bench model --dims`): the CPU reference model of
//! `tools/torch_reference.py`, or KiteNorm's Table-1 model at the micro-batch the
//! PyTorch GPU figures were taken at. The same sizes are passed to `tools/torch_gpu.py`.

use crate::model::{FfnKind, ModelConfig};
use crate::recipe::{RecipeConfig, RecipeOverlay};
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// Model and batch sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dims {
    pub vocab: usize,
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention); `None`: one per query head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_kv_heads: Option<usize>,
    /// GLU hidden size.
    pub d_ff: usize,
    pub batch: usize,
    pub seq: usize,
}

/// The sizes `normlab bench model --dims` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DimsChoice {
    /// The CPU reference model of `tools/torch_reference.py` (8 × 256 tokens).
    #[default]
    Reference,
    /// KiteNorm Table 1 at micro-batch 4 × 2048.
    Table1,
    /// The BHyT paper's Llama-3.2 shape ratios at a CPU size (`--speed`'s default): 16
    /// layers, d_head 64, four query heads per key/value head, FFN 4d, vocabulary 64d, 2 × 256.
    Speed,
    /// Llama-3.2-1B as the BHyT paper trains it (§4.1): V 128256, d 2048, 16 layers, 32 heads,
    /// 8 key/value heads, FFN 8192, micro-batch 4 × 1024.
    Llama1b,
    /// Llama-3.2-3B: d 3072, 28 layers, 24 heads, 8 key/value heads, FFN 8192, 2 × 1024.
    Llama3b,
    /// A smoke-test size (byte vocabulary, d 32, 2 layers, 2 heads, GLU 64, 2 × 32): the GPU
    /// code path on a software device (lavapipe) in seconds.
    Tiny,
}

impl Dims {
    /// `torch_reference.py`: byte vocabulary, d 256, 6 layers, 4 heads, GLU 688, 8 × 256.
    pub const REFERENCE: Dims =
        Dims { vocab: 256, d_model: 256, n_layers: 6, n_heads: 4, n_kv_heads: None, d_ff: 688, batch: 8, seq: 256 };
    /// KiteNorm Table 1 (GPT-2 vocabulary, d 512, 12 layers, 8 heads, GLU 1536; 92 M parameters)
    /// at micro-batch 4 × 2048.
    pub const TABLE1: Dims = Dims {
        vocab: 50257,
        d_model: 512,
        n_layers: 12,
        n_heads: 8,
        n_kv_heads: None,
        d_ff: 1536,
        batch: 4,
        seq: 2048,
    };
    /// [`DimsChoice::Speed`]: Llama-3.2-1B's ratios (d_head 64, 4:1 GQA, FFN 4d, 16 layers) at
    /// d 256, with the vocabulary scaled to keep the output head's share of the FLOPs (≈ 21 %).
    pub const SPEED: Dims = Dims {
        vocab: 16384,
        d_model: 256,
        n_layers: 16,
        n_heads: 4,
        n_kv_heads: Some(1),
        d_ff: 1024,
        batch: 2,
        seq: 256,
    };
    /// [`DimsChoice::Llama1b`].
    pub const LLAMA_1B: Dims = Dims {
        vocab: 128256,
        d_model: 2048,
        n_layers: 16,
        n_heads: 32,
        n_kv_heads: Some(8),
        d_ff: 8192,
        batch: 4,
        seq: 1024,
    };
    /// [`DimsChoice::Llama3b`].
    pub const LLAMA_3B: Dims = Dims {
        vocab: 128256,
        d_model: 3072,
        n_layers: 28,
        n_heads: 24,
        n_kv_heads: Some(8),
        d_ff: 8192,
        batch: 2,
        seq: 1024,
    };

    /// [`DimsChoice::Tiny`].
    pub const TINY: Dims =
        Dims { vocab: 256, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: None, d_ff: 64, batch: 2, seq: 32 };

    /// `reference` or `table1`, with optional `batch` / `seq` overrides.
    pub fn of(choice: DimsChoice, batch: Option<usize>, seq: Option<usize>) -> anyhow::Result<Dims> {
        let base = match choice {
            DimsChoice::Reference => Dims::REFERENCE,
            DimsChoice::Table1 => Dims::TABLE1,
            DimsChoice::Speed => Dims::SPEED,
            DimsChoice::Llama1b => Dims::LLAMA_1B,
            DimsChoice::Llama3b => Dims::LLAMA_3B,
            DimsChoice::Tiny => Dims::TINY,
        };
        let d = Dims { batch: batch.unwrap_or(base.batch), seq: seq.unwrap_or(base.seq), ..base };
        anyhow::ensure!(d.batch > 0 && d.seq > 0, "--batch and --seq must be > 0");
        Ok(d)
    }

    /// The same sizes as `torch_gpu.py` flags.
    pub fn torch_args(&self) -> Vec<String> {
        let (v, d, l, h, ff, b, t) =
            (self.vocab, self.d_model, self.n_layers, self.n_heads, self.d_ff, self.batch, self.seq);
        [("V", v), ("D", d), ("L", l), ("H", h), ("FF", ff), ("B", b), ("T", t)]
            .iter()
            .flat_map(|(k, v)| [format!("--{k}"), v.to_string()])
            .collect()
    }

    /// The model with `recipe` at these sizes; `pre` uses RMSNorm (ε = 1e-5) and RoPE base 10⁴
    /// as the PyTorch scripts do.
    pub fn model(&self, recipe: &str) -> ModelConfig {
        let recipe = if recipe == "pre" {
            let overlay = RecipeOverlay::parse("preset = \"pre\"\nname = \"pre\"\n[placement]\nnorm = \"rmsnorm\"");
            RecipeConfig::Custom(Box::new(overlay.expect("pre with RMSNorm is a valid recipe")))
        } else {
            RecipeConfig::Preset(recipe.into())
        };
        ModelConfig {
            vocab_size: self.vocab,
            d_model: self.d_model,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            ffn: FfnKind::Glu,
            d_glu: Some(self.d_ff),
            rope_base: 10_000.0,
            norm_eps: 1e-5,
            init_std: 0.02,
            recipe,
            ..Default::default()
        }
    }

    /// One fixed batch, `batch × (seq + 1)` tokens from a 64-bit LCG (the reference script's,
    /// whose byte vocabulary takes the low 8 bits), split into inputs and targets.
    pub fn lcg_batch(&self, device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
        let mut s: u64 = 0x2545_F491_4F6C_DD1D;
        let toks: Vec<i64> = (0..self.batch * (self.seq + 1))
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((s >> 33) % self.vocab as u64) as i64
            })
            .collect();
        let all = Tensor::<2, Int>::from_data(TensorData::new(toks, [self.batch, self.seq + 1]), device);
        (all.clone().narrow(1, 0, self.seq), all.narrow(1, 1, self.seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table1_dims_are_the_papers_and_reach_torch_as_flags() {
        let d = Dims::of(DimsChoice::Table1, Some(32), None).unwrap();
        assert_eq!((d.batch, d.seq, d.vocab), (32, 2048, 50257));
        let args = d.torch_args().join(" ");
        assert_eq!(args, "--V 50257 --D 512 --L 12 --H 8 --FF 1536 --B 32 --T 2048");
        assert!(Dims::of(DimsChoice::Reference, Some(0), None).is_err(), "--batch 0 is refused");
        // KiteNorm Table 1: about 92 M parameters with untied embeddings: 2·V·d for embedding
        // and head, 12 layers of 4d² + 3·d·1536, and 2 norm gains per layer plus the final one.
        let (v, dm, ff) = (50257usize, 512usize, 1536usize);
        let want = 2 * v * dm + 12 * (4 * dm * dm + 3 * dm * ff + 2 * dm) + dm;
        let cfg = d.model("pre");
        let model = crate::model::Transformer::new(&cfg, crate::init::ParamSource::Seeded(0), &Device::flex()).unwrap();
        assert_eq!(crate::model::base::params::count(&model), want);
    }

    #[test]
    fn the_reference_batch_is_the_byte_lcg_of_the_pytorch_script() {
        // torch_reference.py: s = s·6364136223846793005 + 1442695040888963407 (mod 2⁶⁴),
        // token = (s >> 33) & 0xFF, from s = 0x2545F4914F6CDD1D; first token by hand here.
        let s =
            0x2545_F491_4F6C_DD1Du64.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let (x, _) = Dims::REFERENCE.lcg_batch(&Device::flex());
        let first = x.into_data().convert::<i64>().as_slice::<i64>().unwrap()[0];
        assert_eq!(first, ((s >> 33) & 0xFF) as i64);
    }
}
