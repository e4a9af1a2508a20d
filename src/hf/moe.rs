//! The mixture-of-experts fields of a Mixtral, Qwen3-MoE or OLMoE `config.json` ↔ normlab's
//! `[model.moe]`.
//!
//! All three route with a softmax over the experts, then the top k (Mixtral always
//! renormalises the k weights, which equals normlab's `topk-softmax`; Qwen3-MoE and OLMoE when
//! `norm_topk_prob`), have no shared experts, no norm on the router or the experts' outputs
//! and no capacity limit (dropless, as normlab's evaluation forward is under any capacity
//! factor, so a run with one exports as the same model); transformers trains them with its pooled balancing loss
//! (`aux_form = "pooled"` on import). Mixtral and OLMoE make every layer MoE; Qwen3-MoE's layer
//! `i` is MoE unless `i ∈ mlp_only_layers` and when `(i + 1) % decoder_sparse_step == 0`
//! (transformers' `Qwen3MoeDecoderLayer`), which normlab holds as `first_dense`/`every`.

use super::family::Family;
use crate::model::ffn::moe::balance::AuxForm;
use crate::model::ffn::moe::options::MoeConfig;
use crate::model::ffn::moe::router::Router;
use crate::model::{FfnKind, ModelConfig};
use anyhow::{bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The MoE fields normlab reads from a `config.json` (absent in the dense families).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HfMoe {
    /// Routed experts (OLMoE and Qwen3-MoE's `num_experts`, Mixtral's `num_local_experts`).
    #[serde(default, alias = "num_local_experts", skip_serializing_if = "Option::is_none")]
    pub num_experts: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_experts_per_tok: Option<usize>,
    /// Qwen3-MoE's expert width (`intermediate_size` is then its dense layers').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_intermediate_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_topk_prob: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder_sparse_step: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_only_layers: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_aux_loss_coef: Option<f64>,
    /// OLMoE's clamp of q, k and v; normlab has none, so only `null` imports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_qkv: Option<f64>,
    /// Mixtral's multiplicative router noise in training; normlab has none, so only 0 imports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_jitter_noise: Option<f64>,
    /// Mixtral's sliding-window attention (`null`: full causal attention, as normlab's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_sliding_window: Option<bool>,
}

/// transformers' default `router_aux_loss_coef` of each family, when config.json omits it.
fn default_aux_loss(f: Family) -> f64 {
    if f == Family::Olmoe { 0.01 } else { 0.001 }
}

impl HfMoe {
    /// Refuses what normlab's MoE block cannot run; checked with the family.
    pub fn check(&self, f: Family) -> anyhow::Result<()> {
        ensure!(
            self.clip_qkv.is_none(),
            "clip_qkv = {} is not supported (normlab does not clamp q, k, v); only clip_qkv = null imports",
            self.clip_qkv.unwrap_or_default()
        );
        let jitter = self.router_jitter_noise.unwrap_or(0.0);
        ensure!(jitter == 0.0, "router_jitter_noise = {jitter} is not supported (normlab's router has no noise)");
        let windowed = match f {
            Family::Mixtral => self.sliding_window.is_some(),
            _ => self.use_sliding_window == Some(true),
        };
        ensure!(!windowed, "sliding-window attention is not supported (full causal attention only)");
        ensure!(
            self.num_experts.is_some() && self.num_experts_per_tok.is_some(),
            "a {} config.json must give num_experts (or num_local_experts) and num_experts_per_tok",
            f.model_type()
        );
        Ok(())
    }

    /// The MoE layers of an `n_layers` checkpoint, by the family's rule.
    fn moe_layers(&self, f: Family, n_layers: usize) -> Vec<usize> {
        if f != Family::Qwen3Moe {
            return (0..n_layers).collect();
        }
        let step = self.decoder_sparse_step.unwrap_or(1).max(1);
        let dense = self.mlp_only_layers.clone().unwrap_or_default();
        (0..n_layers).filter(|i| !dense.contains(i) && (i + 1) % step == 0).collect()
    }

    /// normlab's `[model.moe]` for family `f` with `n_layers` layers; a layer set that
    /// `first_dense`/`every` cannot hold is refused.
    pub fn moe_config(&self, f: Family, n_layers: usize) -> anyhow::Result<MoeConfig> {
        let max = crate::recipe::MAX_LAYERS;
        ensure!(n_layers <= max, "num_hidden_layers = {n_layers} is more than normlab builds ({max})");
        let layers = self.moe_layers(f, n_layers);
        let Some(&first) = layers.first() else {
            bail!("this {} config.json makes no layer MoE (mlp_only_layers, decoder_sparse_step)", f.model_type())
        };
        let every = match layers.get(1) {
            Some(&second) => second - first,
            None => n_layers,
        };
        let moe = MoeConfig {
            experts: self.num_experts.unwrap_or_default(),
            top_k: self.num_experts_per_tok.unwrap_or_default(),
            d_expert: if f == Family::Qwen3Moe { self.moe_intermediate_size } else { None },
            shared: 0,
            router: match f {
                Family::Mixtral => Router::TopkSoftmax,
                _ => Router::SoftmaxTopk { normalize: self.norm_topk_prob.unwrap_or(false) },
            },
            every,
            first_dense: first,
            aux_loss: self.router_aux_loss_coef.unwrap_or(default_aux_loss(f)),
            // The form transformers trains these checkpoints with, so the coefficient keeps
            // its meaning.
            aux_form: AuxForm::Pooled,
            z_loss: 0.0,
            router_norm: None,
            expert_norm: None,
            capacity: None,
        };
        let held: Vec<usize> = (0..n_layers).filter(|&i| moe.is_moe_layer(i)).collect();
        ensure!(
            held == layers,
            "the MoE layers {layers:?} of this config.json are not a first_dense/every pattern normlab holds \
             (layers first_dense, first_dense + every, …)"
        );
        Ok(moe)
    }
}

/// Why `m`'s MoE block has no layout in family `f` (`None`: it has one).
pub fn unexpressible(f: Family, m: &ModelConfig, moe: &MoeConfig) -> Option<String> {
    let every_layer = (0..m.n_layers).all(|i| moe.is_moe_layer(i));
    let router_ok = matches!(
        (f, moe.router),
        (_, Router::TopkSoftmax)
            | (_, Router::SoftmaxTopk { normalize: true })
            | (Family::Qwen3Moe | Family::Olmoe, Router::SoftmaxTopk { normalize: false })
    );
    let router = format!("{} router", moe.router.info().name);
    let why = [
        (moe.shared > 0, "shared experts"),
        (moe.router_norm.is_some() || moe.expert_norm.is_some(), "router or expert norm slots"),
        (m.ffn != FfnKind::Glu, "non-GLU experts"),
        (m.attn_bias, "attention biases"),
        (!router_ok, router.as_str()),
        (f != Family::Qwen3Moe && !every_layer, "dense layers"),
        (f == Family::Olmoe && m.head_dim() * m.n_heads != m.d_model, "head size other than d_model / n_heads"),
    ];
    let found: Vec<&str> = why.iter().filter(|(bad, _)| *bad).map(|(_, w)| *w).collect();
    (!found.is_empty()).then(|| format!("the {} layout has no place for its {}", f.model_type(), found.join(", ")))
}

/// The MoE keys of family `f`'s `config.json` for `m`.
pub fn config_keys(f: Family, m: &ModelConfig, moe: &MoeConfig) -> Map<String, Value> {
    let width = moe.expert_width(m.d_ff());
    let normalize = !matches!(moe.router, Router::SoftmaxTopk { normalize: false });
    let mut o = Map::new();
    o.insert("num_experts_per_tok".into(), json!(moe.top_k));
    o.insert("router_aux_loss_coef".into(), json!(moe.aux_loss));
    match f {
        Family::Mixtral => {
            o.insert("num_local_experts".into(), json!(moe.experts));
            o.insert("intermediate_size".into(), json!(width));
            o.insert("router_jitter_noise".into(), json!(0.0));
            o.insert("sliding_window".into(), Value::Null);
        }
        Family::Qwen3Moe => {
            let dense: Vec<usize> = (0..m.n_layers).filter(|&i| !moe.is_moe_layer(i)).collect();
            // The key transformers itself writes (its attribute map reads `num_experts` too).
            o.insert("num_local_experts".into(), json!(moe.experts));
            o.insert("moe_intermediate_size".into(), json!(width));
            o.insert("norm_topk_prob".into(), json!(normalize));
            o.insert("decoder_sparse_step".into(), json!(1));
            o.insert("mlp_only_layers".into(), json!(dense));
            o.insert("use_sliding_window".into(), json!(false));
        }
        _ => {
            o.insert("num_experts".into(), json!(moe.experts));
            o.insert("intermediate_size".into(), json!(width));
            o.insert("norm_topk_prob".into(), json!(normalize));
            o.insert("clip_qkv".into(), Value::Null);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hf(v: Value) -> HfMoe {
        serde_json::from_value(v).unwrap()
    }

    /// Qwen3-MoE's rule by hand: 6 layers, step 2 → layers 1, 3, 5 (first_dense 1, every 2);
    /// mlp_only_layers [0, 1] at step 1 → 2..6; a hole in the middle has no pattern.
    #[test]
    fn qwen_layer_sets_map_to_first_dense_and_every() {
        let base = json!({"num_experts": 4, "num_experts_per_tok": 2});
        let with = |k: &str, v: Value| {
            let mut b = base.clone();
            b[k] = v;
            hf(b)
        };
        let m = with("decoder_sparse_step", json!(2)).moe_config(Family::Qwen3Moe, 6).unwrap();
        assert_eq!((m.first_dense, m.every), (1, 2));
        let m = with("mlp_only_layers", json!([0, 1])).moe_config(Family::Qwen3Moe, 6).unwrap();
        assert_eq!((m.first_dense, m.every), (2, 1));
        let e = with("mlp_only_layers", json!([3])).moe_config(Family::Qwen3Moe, 6).unwrap_err().to_string();
        assert!(e.contains("[0, 1, 2, 4, 5]") && e.contains("first_dense/every"), "{e}");
        let e = with("mlp_only_layers", json!([0, 1])).moe_config(Family::Qwen3Moe, 2).unwrap_err().to_string();
        assert!(e.contains("no layer MoE"), "{e}");
    }

    /// The export's keys read back as the same MoE block (Qwen3-MoE with dense layers 0, 1).
    #[test]
    fn exported_keys_import_as_the_same_block() {
        let moe = MoeConfig {
            d_expert: Some(24),
            first_dense: 2,
            aux_loss: 0.02,
            aux_form: AuxForm::Pooled,
            router: Router::SoftmaxTopk { normalize: true },
            ..toml::from_str("experts = 6\ntop_k = 2").unwrap()
        };
        let m = ModelConfig { n_layers: 5, moe: Some(moe.clone()), ..Default::default() };
        assert_eq!(unexpressible(Family::Qwen3Moe, &m, &moe), None);
        let keys = config_keys(Family::Qwen3Moe, &m, &moe);
        assert_eq!(keys["mlp_only_layers"], json!([0, 1]));
        let back = hf(Value::Object(keys)).moe_config(Family::Qwen3Moe, 5).unwrap();
        assert_eq!(back, moe);
        let why = unexpressible(Family::Mixtral, &m, &moe).unwrap();
        assert!(why.contains("dense layers"), "{why}");
    }

    #[test]
    fn refuses_what_the_block_cannot_run() {
        let e = hf(json!({"num_experts": 4, "num_experts_per_tok": 2, "clip_qkv": 8.0}))
            .check(Family::Olmoe)
            .unwrap_err()
            .to_string();
        assert!(e.contains("clip_qkv = 8"), "{e}");
        let e = hf(json!({"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4096}))
            .check(Family::Mixtral)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sliding-window"), "{e}");
        assert!(hf(json!({"num_experts_per_tok": 2})).check(Family::Mixtral).is_err());
    }
}
