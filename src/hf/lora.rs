//! A LoRA run's adapters out of normlab: merged into their projections (`export --hf`), or as
//! a `peft` adapter directory (`export --peft`: `adapter_config.json` and
//! `adapter_model.safetensors`) that `PeftModel.from_pretrained` loads onto the parent run's
//! own export.
//!
//! normlab's `A` `[d_in, r]` and `B` `[r, d_out]` are the transposes of `peft`'s
//! `lora_A.weight` `[r, d_in]` and `lora_B.weight` `[d_out, r]`; the merged projection is
//! `W + (α/r)·A B` in normlab's orientation, `W_hf + (α/r)·B_peft A_peft` in PyTorch's.

use super::weights::Mapping;
use crate::model::base::lora::{LoraConfig, LoraTarget};
use anyhow::{Context, ensure};
use burn::tensor::TensorData;
use std::collections::BTreeMap;

/// The adapter tensors' names end so: `….lora_wq.a`.
fn adapter_parts(name: &str) -> Option<(&str, &str, &str)> {
    let (rest, factor) = name.rsplit_once('.')?;
    let (module, weight) = rest.rsplit_once(".lora_")?;
    Some((module, weight, factor))
}

fn f32s(t: &TensorData) -> anyhow::Result<Vec<f32>> {
    t.clone().convert::<f32>().try_into_vec::<f32>().map_err(|e| anyhow::anyhow!("{e:?}"))
}

/// Every adapted projection `W` replaced by `W + (α/r)·A B` and the adapters removed: the
/// tensors of the plain model the adapters describe.
pub fn merge(tensors: &mut BTreeMap<String, TensorData>, cfg: &LoraConfig) -> anyhow::Result<()> {
    let scale = cfg.alpha / cfg.rank as f64;
    let adapted: Vec<(String, String)> = tensors
        .keys()
        .filter_map(|k| {
            adapter_parts(k).filter(|p| p.2 == "a").map(|(m, w, _)| (format!("{m}.{w}"), format!("{m}.lora_{w}")))
        })
        .collect();
    for (base, lora) in adapted {
        let a = tensors.remove(&format!("{lora}.a")).context("an adapter without its A")?;
        let b = tensors.remove(&format!("{lora}.b")).with_context(|| format!("the adapter {lora} has no B"))?;
        let w = tensors.get_mut(&base).with_context(|| format!("the adapter {lora} has no projection {base}"))?;
        let ([d_in, r], [r2, d_out]) = (dims(&a)?, dims(&b)?);
        ensure!(r == r2 && dims(w)? == [d_in, d_out], "the adapter {lora} does not fit {base}");
        let (av, bv, mut wv) = (f32s(&a)?, f32s(&b)?, f32s(w)?);
        for i in 0..d_in {
            for j in 0..d_out {
                let ab: f64 = (0..r).map(|k| av[i * r + k] as f64 * bv[k * d_out + j] as f64).sum();
                wv[i * d_out + j] = (wv[i * d_out + j] as f64 + scale * ab) as f32;
            }
        }
        *w = TensorData::new(wv, [d_in, d_out]);
    }
    Ok(())
}

fn dims(t: &TensorData) -> anyhow::Result<[usize; 2]> {
    let s = t.shape();
    ensure!(s.len() == 2, "an adapter factor must be a matrix, found shape {s:?}");
    Ok([s[0], s[1]])
}

/// The `peft` adapter of a run exported with `modeling_normlab.py`, whose projections are
/// parameters (`layers.0.attn.f.wq`, in normlab's `[d_in, d_out]`): `peft`'s LoRA on parameters
/// (`target_parameters`). `peft` treats such a parameter as a linear weight of shape
/// `[out, in]` = `[d_in, d_out]` and adds `B_peft A_peft`, so `lora_B` is normlab's `A` and
/// `lora_A` normlab's `B`, untransposed. It wraps a module once per adapted parameter, the
/// module's first parameter innermost: the adapter of the `k`-th of `n` adapted parameters of a
/// module lies under `n − 1 − k` `base_layer.` prefixes.
pub fn peft_adapter_params(
    tensors: &BTreeMap<String, TensorData>,
    cfg: &LoraConfig,
    base: &str,
) -> anyhow::Result<(BTreeMap<String, TensorData>, serde_json::Value)> {
    let plan = cfg.plan()?;
    // `modeling_normlab.py`'s parameter order within the attention and the FFN module.
    let order =
        [LoraTarget::Q, LoraTarget::K, LoraTarget::V, LoraTarget::O, LoraTarget::W1, LoraTarget::W2, LoraTarget::W3];
    let mut out = BTreeMap::new();
    for (name, t) in tensors {
        let Some((module, weight, factor)) = adapter_parts(name) else { continue };
        let target = order.iter().find(|o| o.names().0 == weight).with_context(|| format!("no projection {weight}"))?;
        let attn = order[..4].contains(target);
        let siblings: Vec<&LoraTarget> =
            order.iter().filter(|o| order[..4].contains(o) == attn && plan.targets.contains(o)).collect();
        let k = siblings.iter().position(|o| *o == target).context("an adapter the plan does not name")?;
        let depth = "base_layer.".repeat(siblings.len() - 1 - k);
        let theirs = if factor == "a" { "lora_B" } else { "lora_A" };
        out.insert(format!("base_model.model.{module}.{depth}{theirs}.weight"), t.clone());
    }
    let targets: Vec<String> = plan
        .targets
        .iter()
        .map(|t| format!("{}.f.{}", if order[..4].contains(t) { "attn" } else { "ffn" }, t.names().0))
        .collect();
    let mut config = adapter_config(cfg, base);
    config["target_modules"] = serde_json::json!([]);
    config["target_parameters"] = serde_json::json!(targets);
    // `peft` refuses dropout on parameters; it acts only in training, so inference is unchanged.
    config["lora_dropout"] = serde_json::json!(0.0);
    Ok((out, config))
}

fn adapter_config(cfg: &LoraConfig, base: &str) -> serde_json::Value {
    serde_json::json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": cfg.rank,
        "lora_alpha": cfg.alpha,
        "lora_dropout": cfg.dropout,
        "bias": "none",
        "fan_in_fan_out": false,
        "use_rslora": false,
        "use_dora": false,
        "init_lora_weights": true,
        "modules_to_save": null,
        "inference_mode": true,
    })
}

/// The `peft` adapter of a run exported in a `transformers` family's layout (`maps`): its
/// tensors under `peft`'s names and `adapter_config.json`.
pub fn peft_adapter(
    tensors: &BTreeMap<String, TensorData>,
    cfg: &LoraConfig,
    maps: &[Mapping],
    base: &str,
) -> anyhow::Result<(BTreeMap<String, TensorData>, serde_json::Value)> {
    let mut out = BTreeMap::new();
    for (name, t) in tensors {
        let Some((module, weight, factor)) = adapter_parts(name) else { continue };
        let ours = format!("{module}.{weight}");
        let m = maps.iter().find(|m| m.normlab == ours).with_context(|| format!("no Hugging Face name for {ours}"))?;
        let hf_module = m.hf.strip_suffix(".weight").context("a projection's name ends in .weight")?;
        let key = format!("base_model.model.{hf_module}.lora_{}.weight", factor.to_uppercase());
        out.insert(key, super::weights::transposed(t)?);
    }
    let plan = cfg.plan()?;
    let targets: Vec<&str> = plan.targets.iter().map(|t: &LoraTarget| t.names().1).collect();
    let mut config = adapter_config(cfg, base);
    config["target_modules"] = serde_json::json!(targets);
    Ok((out, config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_alpha_over_r_times_a_b_by_hand() {
        // W = 0 (2×3), A = [[1],[2]] (2×1), B = [[1, 0, -1]] (1×3), α/r = 4/1.
        let mut t = BTreeMap::from([
            ("l.f.wq".to_string(), TensorData::new(vec![0f32; 6], [2, 3])),
            ("l.f.lora_wq.a".to_string(), TensorData::new(vec![1f32, 2.0], [2, 1])),
            ("l.f.lora_wq.b".to_string(), TensorData::new(vec![1f32, 0.0, -1.0], [1, 3])),
        ]);
        let cfg = LoraConfig { rank: 1, alpha: 4.0, ..Default::default() };
        merge(&mut t, &cfg).unwrap();
        assert_eq!(t.keys().collect::<Vec<_>>(), vec!["l.f.wq"]);
        assert_eq!(f32s(&t["l.f.wq"]).unwrap(), vec![4.0, 0.0, -4.0, 8.0, 0.0, -8.0]);
    }
}
