//! The files beside `tokenizer.json` that tools read for special tokens:
//! `tokenizer_config.json` (so `AutoTokenizer.from_pretrained(OUT)` loads the fast tokenizer
//! without custom code) and `special_tokens_map.json`, with the run's document boundary
//! ([`crate::data::boundary`]) as BOS and EOS; and the ids `config.json` names.
//!
//! There is no pad token, as Llama's checkpoints have none: every id of a normlab vocabulary is
//! a content token (the boundary of a byte run is the newline), and `generate(input_ids)`
//! without an attention mask infers one from the pad id, hiding every such token of the prompt.
//! Without a pad id the mask is all ones; a caller that pads a batch passes its own mask.
//!
//! The boundary is written by its vocabulary spelling ("ĊĊ" for "\n\n"), which real text never
//! contains, so registering it as a special token changes no tokenization. `config.json`'s
//! `eos_token_id`, where `generate()` stops, is the boundary only when it is a whole document
//! end (a pairs run's `<end>`, a BPE that encodes "\n\n" as one token); for a byte run, whose
//! boundary "\n" is half the separator, it is left `null`, so that `generate()` does not stop
//! at every line.

use crate::data::boundary::Boundary;
use serde_json::{Value, json};

/// The boundary ids `config.json` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigIds {
    pub bos: u32,
    /// Where `generate()` stops; `None` when the boundary is not a whole document end.
    pub eos: Option<u32>,
}

pub fn config_ids(b: &Boundary) -> ConfigIds {
    ConfigIds { bos: b.id, eos: b.whole.then_some(b.id) }
}

/// `tokenizer_config.json` for a tokenizer whose boundary is `b`, in a model of context
/// `context`.
pub fn tokenizer_config(b: &Boundary, context: usize) -> anyhow::Result<Value> {
    let token = spelling(b)?;
    Ok(json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token,
        "eos_token": token,
        "add_bos_token": false,
        "add_eos_token": false,
        "model_max_length": context,
        "padding_side": "left",
        "clean_up_tokenization_spaces": false,
    }))
}

/// `special_tokens_map.json`.
pub fn special_tokens_map(b: &Boundary) -> anyhow::Result<Value> {
    let token = spelling(b)?;
    Ok(json!({"bos_token": token, "eos_token": token}))
}

fn spelling(b: &Boundary) -> anyhow::Result<&str> {
    b.token.as_deref().ok_or_else(|| anyhow::anyhow!("token {} has no entry in the vocabulary", b.id))
}
