//! A checkpoint's `config.json` checked against the tensors actually present, before anything
//! is sized from it: a config that claims 10¹² layers, or a vocabulary the embedding does not
//! have, is refused in one line instead of building what it claims.

use super::config::HfConfig;
use anyhow::ensure;
use burn::tensor::TensorData;
use std::collections::{BTreeMap, BTreeSet};

/// The layer indices `i` of the `model.layers.{i}.` tensors.
fn layer_indices(tensors: &BTreeMap<String, TensorData>) -> BTreeSet<usize> {
    tensors.keys().filter_map(|k| k.strip_prefix("model.layers.")?.split('.').next()?.parse().ok()).collect()
}

/// `config.json`'s layer count, width and vocabulary against the checkpoint's tensors.
pub fn check(hf: &HfConfig, tensors: &BTreeMap<String, TensorData>) -> anyhow::Result<()> {
    let layers = layer_indices(tensors);
    ensure!(
        layers.len() == hf.num_hidden_layers && layers.iter().enumerate().all(|(i, &l)| i == l),
        "config.json says num_hidden_layers = {}, but the checkpoint's tensors hold {} layers{}; the config and the \
         weights do not belong together",
        hf.num_hidden_layers,
        layers.len(),
        if layers.iter().enumerate().all(|(i, &l)| i == l) {
            String::new()
        } else {
            " (not numbered 0, 1, …)".into()
        }
    );
    let embedding: Option<Vec<usize>> = tensors.get("model.embed_tokens.weight").map(|t| t.shape().to_vec());
    ensure!(
        embedding.as_deref() == Some(&[hf.vocab_size, hf.hidden_size][..]),
        "config.json says vocab_size = {} and hidden_size = {}, but the embedding model.embed_tokens.weight is {}; \
         the config and the weights do not belong together",
        hf.vocab_size,
        hf.hidden_size,
        embedding.map_or("missing".into(), |s| format!("{s:?}"))
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[usize]) -> TensorData {
        TensorData::new(vec![0f32; shape.iter().product()], shape.to_vec())
    }

    /// Two layers and a 10 × 4 embedding: the config must say so.
    #[test]
    fn the_config_must_describe_the_tensors() {
        let mut t = BTreeMap::new();
        t.insert("model.embed_tokens.weight".to_string(), tensor(&[10, 4]));
        for i in 0..2 {
            t.insert(format!("model.layers.{i}.mlp.up_proj.weight"), tensor(&[1, 1]));
        }
        let cfg = |layers: usize, vocab: usize| -> HfConfig {
            serde_json::from_value(serde_json::json!({"model_type": "llama", "hidden_size": 4, "intermediate_size": 8,
                "num_hidden_layers": layers, "num_attention_heads": 2, "vocab_size": vocab}))
            .unwrap()
        };
        check(&cfg(2, 10), &t).unwrap();
        let e = check(&cfg(1_000_000_000_000, 10), &t).unwrap_err().to_string();
        assert!(e.contains("num_hidden_layers = 1000000000000") && e.contains("hold 2 layers"), "{e}");
        assert!(check(&cfg(2, 11), &t).unwrap_err().to_string().contains("[10, 4]"));
    }
}
