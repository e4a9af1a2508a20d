//! Checkpoint tensors under Hugging Face names ↔ normlab names. Linear weights are
//! `[d_out, d_in]` in Hugging Face (`torch.nn.Linear.weight`) and `[d_in, d_out]` in normlab:
//! they are transposed both ways; embeddings, norm gains and biases are copied.

use super::family::Family;
use crate::io::tensors;
use crate::model::ModelConfig;
use anyhow::{Context, ensure};
use burn::tensor::TensorData;
use std::collections::BTreeMap;
use std::path::Path;

/// Every tensor of a checkpoint directory: `model.safetensors`, or the shards listed in
/// `model.safetensors.index.json`.
pub fn read_checkpoint(dir: &Path) -> anyhow::Result<BTreeMap<String, TensorData>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(tensors::read(&single)?.tensors);
    }
    let index = dir.join("model.safetensors.index.json");
    ensure!(
        index.is_file(),
        "{} has neither model.safetensors nor model.safetensors.index.json; give a checkpoint saved with safetensors",
        dir.display()
    );
    let text = std::fs::read_to_string(&index).with_context(|| format!("cannot read {}", index.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", index.display()))?;
    let map = v.get("weight_map").and_then(|m| m.as_object()).context("the index has no weight_map")?;
    let mut shards: Vec<&str> = map.values().filter_map(|s| s.as_str()).collect();
    shards.sort();
    shards.dedup();
    let mut all = BTreeMap::new();
    for s in shards {
        let p = dir.join(s);
        ensure!(p.is_file(), "shard {} listed in the index is missing", p.display());
        all.extend(tensors::read(&p)?.tensors);
    }
    Ok(all)
}

/// How one tensor moves: normlab name, Hugging Face name, transposed or not.
pub struct Mapping {
    pub normlab: String,
    pub hf: String,
    pub transpose: bool,
}

/// Every tensor of `m` as a model of `family` (biases, QK-norms, MoE layers and the output
/// projection where `m` and the family have them).
pub fn mappings(family: Family, m: &ModelConfig) -> Vec<Mapping> {
    let mut v = vec![map("tok_emb", "model.embed_tokens.weight", false)];
    for i in 0..m.n_layers {
        let a = format!("layers.{i}.attn");
        let f = format!("layers.{i}.ffn");
        let h = format!("model.layers.{i}");
        for (ours, theirs) in [("wq", "q_proj"), ("wk", "k_proj"), ("wv", "v_proj"), ("wo", "o_proj")] {
            v.push(map(&format!("{a}.f.{ours}"), &format!("{h}.self_attn.{theirs}.weight"), true));
        }
        if m.attn_bias {
            for (ours, theirs) in [("bq", "q_proj"), ("bk", "k_proj"), ("bv", "v_proj")] {
                v.push(map(&format!("{a}.f.{ours}"), &format!("{h}.self_attn.{theirs}.bias"), false));
            }
        }
        if family.qk_norm() != "none" {
            v.push(map(&format!("{a}.f.q_norm.gain"), &format!("{h}.self_attn.q_norm.weight"), false));
            v.push(map(&format!("{a}.f.k_norm.gain"), &format!("{h}.self_attn.k_norm.weight"), false));
        }
        match m.moe.as_ref().filter(|moe| moe.is_moe_layer(i)) {
            Some(moe) => v.extend(moe_mappings(family, &f, &h, moe.experts)),
            None => v.extend(glu_mappings(&format!("{f}.f"), &format!("{h}.mlp"), GLU_NAMES)),
        }
        let (attn_norm, ffn_norm) = match family {
            Family::Olmo2 => {
                (("output_norm", "post_attention_layernorm"), ("output_norm", "post_feedforward_layernorm"))
            }
            _ => (("input_norm", "input_layernorm"), ("input_norm", "post_attention_layernorm")),
        };
        v.push(map(&format!("{a}.{}.gain", attn_norm.0), &format!("{h}.{}.weight", attn_norm.1), false));
        v.push(map(&format!("{f}.{}.gain", ffn_norm.0), &format!("{h}.{}.weight", ffn_norm.1), false));
    }
    v.push(map("final_norm.gain", "model.norm.weight", false));
    if !m.tie_embeddings {
        v.push(map("lm_head", "lm_head.weight", true));
    }
    v
}

fn map(normlab: &str, hf: &str, transpose: bool) -> Mapping {
    Mapping { normlab: normlab.into(), hf: hf.into(), transpose }
}

/// normlab's GLU matrices (gate `w1`, up `w3`, down `w2`) and Llama's names for them.
const GLU_NAMES: [(&str, &str); 3] = [("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")];
/// Mixtral's expert names: its `w1`, `w3`, `w2` are normlab's.
const MIXTRAL_NAMES: [(&str, &str); 3] = [("w1", "w1"), ("w3", "w3"), ("w2", "w2")];

fn glu_mappings(ours: &str, theirs: &str, names: [(&str, &str); 3]) -> Vec<Mapping> {
    names.iter().map(|(o, t)| map(&format!("{ours}.{o}"), &format!("{theirs}.{t}.weight"), true)).collect()
}

/// A MoE layer's router (`[d, E]` in normlab, `gate.weight [E, d]` in Hugging Face) and
/// experts, under Mixtral's `block_sparse_moe` or Qwen3-MoE's and OLMoE's `mlp`.
fn moe_mappings(family: Family, ffn: &str, layer: &str, experts: usize) -> Vec<Mapping> {
    let (block, names) = match family {
        Family::Mixtral => (format!("{layer}.block_sparse_moe"), MIXTRAL_NAMES),
        _ => (format!("{layer}.mlp"), GLU_NAMES),
    };
    let mut v = vec![map(&format!("{ffn}.f.router"), &format!("{block}.gate.weight"), true)];
    for e in 0..experts {
        v.extend(glu_mappings(&format!("{ffn}.f.experts.{e}"), &format!("{block}.experts.{e}"), names));
    }
    v
}

pub fn transposed(t: &TensorData) -> anyhow::Result<TensorData> {
    let s = t.shape();
    ensure!(s.len() == 2, "a linear weight must be a matrix, found shape {s:?}");
    let (r, c) = (s[0], s[1]);
    let src = t.clone().convert::<f32>();
    let src = src.as_slice::<f32>().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut out = vec![0f32; r * c];
    for i in 0..r {
        for j in 0..c {
            out[j * r + i] = src[i * c + j];
        }
    }
    Ok(TensorData::new(out, [c, r]))
}

/// Hugging Face tensors → normlab names. Every mapped tensor must be present; tensors no
/// mapping names (rotary caches, …) are returned apart.
pub fn to_normlab(
    hf: &BTreeMap<String, TensorData>,
    maps: &[Mapping],
) -> anyhow::Result<(BTreeMap<String, TensorData>, Vec<String>)> {
    let mut out = BTreeMap::new();
    for m in maps {
        let t = hf.get(&m.hf).with_context(|| {
            format!("the checkpoint has no tensor `{}`; it is not a complete model of its model_type", m.hf)
        })?;
        out.insert(m.normlab.clone(), if m.transpose { transposed(t)? } else { t.clone().convert::<f32>() });
    }
    let known: std::collections::HashSet<&str> = maps.iter().map(|m| m.hf.as_str()).collect();
    let unused = hf.keys().filter(|k| !known.contains(k.as_str())).cloned().collect();
    Ok((out, unused))
}

/// normlab tensors → Hugging Face names.
pub fn to_hf(ours: &BTreeMap<String, TensorData>, maps: &[Mapping]) -> anyhow::Result<BTreeMap<String, TensorData>> {
    let mut out = BTreeMap::new();
    for m in maps {
        let t = ours.get(&m.normlab).with_context(|| format!("the run has no parameter `{}`", m.normlab))?;
        out.insert(m.hf.clone(), if m.transpose { transposed(t)? } else { t.clone() });
    }
    Ok(out)
}
