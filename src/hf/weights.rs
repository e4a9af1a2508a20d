//! Checkpoint tensors under Hugging Face names ↔ normlab names. Linear weights are
//! `[d_out, d_in]` in Hugging Face (`torch.nn.Linear.weight`) and `[d_in, d_out]` in normlab:
//! they are transposed both ways; embeddings, norm gains and biases are copied.

use super::config::Family;
use crate::io::tensors;
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

/// Every tensor of a model of `family` with `n_layers` layers (biases, QK-norms and the output
/// projection only when `bias`, the family and `tied` call for them).
pub fn mappings(family: Family, n_layers: usize, bias: bool, tied: bool) -> Vec<Mapping> {
    let m = |normlab: String, hf: String, transpose: bool| Mapping { normlab, hf, transpose };
    let mut v = vec![m("tok_emb".into(), "model.embed_tokens.weight".into(), false)];
    for i in 0..n_layers {
        let a = format!("layers.{i}.attn");
        let f = format!("layers.{i}.ffn");
        let h = format!("model.layers.{i}");
        for (ours, theirs) in [("wq", "q_proj"), ("wk", "k_proj"), ("wv", "v_proj"), ("wo", "o_proj")] {
            v.push(m(format!("{a}.f.{ours}"), format!("{h}.self_attn.{theirs}.weight"), true));
        }
        if bias {
            for (ours, theirs) in [("bq", "q_proj"), ("bk", "k_proj"), ("bv", "v_proj")] {
                v.push(m(format!("{a}.f.{ours}"), format!("{h}.self_attn.{theirs}.bias"), false));
            }
        }
        if matches!(family, Family::Qwen3 | Family::Olmo2) {
            v.push(m(format!("{a}.f.q_norm.gain"), format!("{h}.self_attn.q_norm.weight"), false));
            v.push(m(format!("{a}.f.k_norm.gain"), format!("{h}.self_attn.k_norm.weight"), false));
        }
        for (ours, theirs) in [("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")] {
            v.push(m(format!("{f}.f.{ours}"), format!("{h}.mlp.{theirs}.weight"), true));
        }
        let (attn_norm, ffn_norm) = match family {
            Family::Olmo2 => {
                (("output_norm", "post_attention_layernorm"), ("output_norm", "post_feedforward_layernorm"))
            }
            _ => (("input_norm", "input_layernorm"), ("input_norm", "post_attention_layernorm")),
        };
        v.push(m(format!("{a}.{}.gain", attn_norm.0), format!("{h}.{}.weight", attn_norm.1), false));
        v.push(m(format!("{f}.{}.gain", ffn_norm.0), format!("{h}.{}.weight", ffn_norm.1), false));
    }
    v.push(m("final_norm.gain".into(), "model.norm.weight".into(), false));
    if !tied {
        v.push(m("lm_head".into(), "lm_head.weight".into(), true));
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
