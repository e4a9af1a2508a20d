//! The export of a run whose recipe has no Hugging Face layout: `config.json` with `auto_map`
//! to `modeling_normlab.py` (written beside it, loaded with `trust_remote_code=True`), the
//! resolved recipe under `recipe`, and normlab's own tensors unchanged in `model.safetensors`.

use super::special::ConfigIds;
use crate::model::ModelConfig;
use crate::norm::{BhytDenominator, NormKind};
use crate::recipe::{Gate, GateOn, GateOwner, GateShape, QkNorm, Residual, ResolvedRecipe};
use serde_json::{Value, json};

/// The PyTorch implementation shipped with every such export.
pub const MODELING: &str = include_str!("modeling_normlab.py");
pub const MODELING_FILE: &str = "modeling_normlab.py";

/// One norm slot as `modeling_normlab.Norm` reads it.
pub fn norm_json(n: &NormKind) -> Value {
    match *n {
        NormKind::LayerNorm { gain, shift, eps } => {
            json!({"kind": "layernorm", "gain": gain, "shift": shift, "eps": eps})
        }
        NormKind::RmsNorm { gain, eps } => json!({"kind": "rmsnorm", "gain": gain, "eps": eps}),
        NormKind::ScalarLayerNorm { shift, eps } => json!({"kind": "scalar-layernorm", "shift": shift, "eps": eps}),
        NormKind::ScalarRmsNorm { eps } => json!({"kind": "scalar-rmsnorm", "eps": eps}),
        NormKind::Dyt { .. } => json!({"kind": "dyt"}),
        NormKind::BhytStar { p, denominator, eps, .. } => {
            let d = match denominator {
                BhytDenominator::Std => "std",
                BhytDenominator::Rms => "rms",
            };
            json!({"kind": "bhyt-star", "p": p, "denominator": d, "eps": eps})
        }
        NormKind::Bhyt { p, eps, .. } => json!({"kind": "bhyt", "p": p, "eps": eps}),
        NormKind::RmsNormApprox { gain, eps } => json!({"kind": "rmsnorm-approx", "gain": gain, "eps": eps}),
        NormKind::LayerNorm1p { shift, eps } => json!({"kind": "layernorm-1p", "shift": shift, "eps": eps}),
        NormKind::Derf { .. } => json!({"kind": "derf"}),
        NormKind::L2 => json!({"kind": "l2"}),
        NormKind::SeeDNorm { eps, .. } => json!({"kind": "seednorm", "eps": eps}),
        NormKind::ZcRms { eps } => json!({"kind": "zc-rms", "eps": eps}),
        NormKind::TaperNorm { eps } => json!({"kind": "tapernorm", "eps": eps}),
    }
}

fn slot(n: &Option<NormKind>) -> Value {
    n.as_ref().map(norm_json).unwrap_or(Value::Null)
}

/// The recipe as `modeling_normlab.py` reads it: every sublayer's a, c, s and norm slots.
pub fn recipe_json(r: &ResolvedRecipe, eps: f64) -> Value {
    let sublayers: Vec<Value> = r
        .sublayers
        .iter()
        .map(|s| {
            let mut v = json!({
                "branch": s.branch.to_string(), "a": s.skip, "c": s.residual, "s": s.input_scale,
                "input": slot(&s.input), "output": slot(&s.output), "outer": slot(&s.outer),
            });
            if let Some(g) = s.gate {
                v["gate"] = gate_json(g);
            }
            v
        })
        .collect();
    let mut v = json!({
        "name": r.name,
        "embedding_scale": r.embedding.scale.is_some(),
        "embedding_norm": slot(&r.embedding.norm),
        "final_norm": slot(&r.logits.norm),
        "qk_norm": place(r.attention.qk_norm),
        "qk_norm_eps": eps,
        "sublayers": sublayers,
    });
    // The options below are written only when a recipe has them, so that the config of a
    // recipe without them reads as before.
    attention_json(&r.attention, &mut v);
    residual_json(r.residual, &mut v);
    if let Some(c) = r.logits.softcap {
        v["final_softcap"] = json!(c);
    }
    if let Some(m) = r.embedding.multiplier {
        v["embedding_multiplier"] = json!(m);
    }
    v
}

/// The attention's options, each written into `v` only when the recipe has it.
fn attention_json(a: &crate::recipe::Attention, v: &mut Value) {
    if a.v_norm.is_on() {
        v["v_norm"] = json!(place(a.v_norm));
    }
    if let Some(c) = a.softcap {
        v["attn_softcap"] = json!(c);
    }
    if a.gate.is_on() {
        v["attn_gate"] = json!(a.gate.as_str());
    }
    if a.sink {
        v["attn_sink"] = json!(true);
    }
    if a.value_residual {
        v["value_residual"] = json!(true);
    }
}

/// The residual kind as `modeling_normlab.py` reads it: nothing for the plain sum without
/// options, else the key of its kind.
fn residual_json(r: Residual, v: &mut Value) {
    match r {
        Residual::Sum { x0_mix, gpas } => {
            if x0_mix.is_some() {
                v["x0_mix"] = json!(true);
            }
            if gpas {
                v["gpas"] = json!(true);
            }
        }
        Residual::Streams(s) => v["streams"] = streams_json(s),
        Residual::AttnRes(a) => v["attn_res"] = json!({"block": a.block}),
        // Each used value is the stored one times its factor (s_uv also times √d).
        Residual::Hypersphere(h) => {
            v["hypersphere"] = json!({"sqk_factor": h.sqk.factor, "suv_factor": h.suv.factor, "sz_factor": h.sz.factor})
        }
    }
}

/// The residual streams as `modeling_normlab.py` reads them: `n`, the mixing and its settings.
fn streams_json(s: crate::recipe::Streams) -> Value {
    use crate::recipe::Mixing;
    match s.mixing {
        Mixing::Hc { dynamic } => json!({"n": s.n, "mixing": "hc", "dynamic": dynamic}),
        Mixing::Mhc { sinkhorn_iters } => json!({"n": s.n, "mixing": "mhc", "sinkhorn_iters": sinkhorn_iters}),
        Mixing::MhcLite => json!({"n": s.n, "mixing": "mhc-lite"}),
    }
}

/// A gate as `modeling_normlab.py` reads it: `"scalar"`/`"channel"`, owned by the sublayer or
/// the layer (its value comes from the weights).
fn gate_json(g: Gate) -> Value {
    let shape = match g.shape {
        GateShape::Scalar => "scalar",
        GateShape::Channel => "channel",
    };
    let per = match g.per {
        GateOwner::Sublayer => "sublayer",
        GateOwner::Layer => "layer",
    };
    let mut v = json!({"shape": shape, "per": per});
    // Written only when they differ from a branch gate used as stored.
    match g.on {
        GateOn::Branch => {}
        GateOn::Skip => v["on"] = json!("skip"),
        GateOn::Interpolate => v["on"] = json!("interpolate"),
    }
    if g.factor != 1.0 {
        v["factor"] = json!(g.factor);
    }
    v
}

fn place(q: QkNorm) -> &'static str {
    q.as_str()
}

/// `config.json` for model `m` (recipe `r`) trained on sequences of `seq_len`; `eos`: the
/// token that ends an answer (a pairs run's `<end>`), if any.
pub fn config_json(m: &ModelConfig, r: &ResolvedRecipe, seq_len: usize, ids: ConfigIds) -> Value {
    json!({
        "architectures": ["NormlabForCausalLM"],
        "model_type": "normlab",
        "auto_map": {
            "AutoConfig": "modeling_normlab.NormlabConfig",
            "AutoModelForCausalLM": "modeling_normlab.NormlabForCausalLM",
        },
        "vocab_size": m.vocab_size,
        "hidden_size": m.d_model,
        "num_hidden_layers": m.n_layers,
        "num_attention_heads": m.n_heads,
        "num_key_value_heads": m.kv_heads(),
        "head_dim": m.head_dim(),
        "intermediate_size": m.d_ff(),
        "ffn": m.ffn.info().name,
        "attention_bias": m.attn_bias,
        "tie_word_embeddings": m.tie_embeddings,
        "rope_theta": m.rope_base,
        "bhyt_seq_len": seq_len,
        // The context it was trained for: lm-eval's `hf` model reads its limit from here.
        "max_position_embeddings": seq_len,
        "torch_dtype": "float32",
        "bos_token_id": ids.bos,
        "eos_token_id": ids.eos,
        "pad_token_id": null,
        "recipe": recipe_json(r, m.norm_eps),
        // normlab's own description, from which the model is rebuilt exactly.
        "normlab": {"model": m, "seq_len": seq_len},
    })
}

/// A `tokenizer.json` that encodes text to its UTF-8 bytes (id = byte value), as normlab's
/// byte tokenizer does: byte-level BPE over the 256 byte characters with no merges.
pub fn byte_tokenizer_json() -> anyhow::Result<String> {
    use crate::data::tokenizer::byte_char;
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    let vocab: [(String, u32); 256] = std::array::from_fn(|b| (byte_char(b as u8).to_string(), b as u32));
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, Vec::new())
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the byte tokenizer: {e}"))?;
    let mut tok = tokenizers::Tokenizer::new(bpe);
    let byte_level = ByteLevel::new(false, false, false);
    tok.with_pre_tokenizer(Some(byte_level));
    tok.with_decoder(Some(byte_level));
    tok.to_string(false).map_err(|e| anyhow::anyhow!("cannot serialise the byte tokenizer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Tokenizer;
    use crate::data::tokenizer::byte_char;

    /// GPT-2's published alphabet: `!` → `!`, space (32) → `Ġ` (U+0120), newline → `Ċ`
    /// (U+010A), byte 0 → `Ā` (U+0100), 0xAD → `ĭ`... and all 256 distinct.
    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        assert_eq!(byte_char(b'!'), '!');
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(0), 'Ā');
        let all: std::collections::BTreeSet<char> = (0..=255).map(byte_char).collect();
        assert_eq!(all.len(), 256);
        let theirs = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet();
        assert!(all.iter().all(|c| theirs.contains(c)));
    }

    /// The exported byte tokenizer gives every text its UTF-8 bytes and decodes them back.
    #[test]
    fn the_byte_tokenizer_json_encodes_to_utf8_bytes() {
        let tok = Tokenizer::bpe_from_json(byte_tokenizer_json().unwrap().as_bytes(), "byte").unwrap();
        for text in ["Fellow citizens, 1790!", "  two  spaces\nand é, ß, 東京"] {
            let ids = tok.encode(text).unwrap();
            assert_eq!(ids, text.bytes().map(u32::from).collect::<Vec<_>>(), "{text}");
            assert_eq!(tok.decode(&ids).unwrap(), text);
        }
    }
}
