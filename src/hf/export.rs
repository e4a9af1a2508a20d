//! `normlab export RUN_DIR --hf OUT_DIR`: a run as a checkpoint directory `transformers` loads.
//! A recipe with a Hugging Face equivalent (pre-norm RMSNorm: Llama, with biases Qwen2, with
//! per-head QK-norm Qwen3; OLMo 2's output-norm layout; with `[model.moe]` Mixtral, Qwen3-MoE
//! and OLMoE) is written in that family's layout: `config.json`, `model.safetensors` (f32,
//! Hugging Face names and orientation) and `tokenizer.json`. Every other dense recipe is
//! written with its own PyTorch implementation ([`super::remote`]): `config.json` with
//! `auto_map`, `modeling_normlab.py` and normlab's tensors, loaded with
//! `trust_remote_code=True`; a MoE run without a family layout is refused, naming why.

use super::config::{Family, HfConfig, recipe_for};
use super::moe::unexpressible;
use super::remote;
use super::special::{self, ConfigIds};
use super::weights::{mappings, to_hf};
use crate::io::{tensors, write_atomic};
use crate::model::ModelConfig;
use crate::run::saved::SavedRun;
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How a run is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A `transformers` family's own layout.
    Native(Family),
    /// normlab's `modeling_normlab.py`, loaded with `trust_remote_code=True`.
    RemoteCode,
}

impl Layout {
    pub fn describe(self) -> String {
        match self {
            Layout::Native(f) => format!("a {} checkpoint", f.model_type()),
            Layout::RemoteCode => "a normlab checkpoint with modeling_normlab.py (trust_remote_code=True)".into(),
        }
    }
}

/// The family whose layout `m` is, if any: its recipe's, and for a MoE run one whose MoE block
/// holds `m`'s ([`super::moe::unexpressible`]).
pub fn family_of(m: &ModelConfig) -> anyhow::Result<Option<Family>> {
    Ok(match recipe_family(m)? {
        Some(f) if m.moe.is_some() => m.moe.as_ref().filter(|moe| unexpressible(f, m, moe).is_none()).map(|_| f),
        found => found,
    })
}

/// The family whose recipe `m`'s is (dense, or MoE when `m` has `[model.moe]`).
fn recipe_family(m: &ModelConfig) -> anyhow::Result<Option<Family>> {
    let (_, ours) = m.validate()?;
    let candidates = match m.moe {
        None => [Family::Llama, Family::Qwen3, Family::Olmo2],
        Some(_) => [Family::Mixtral, Family::Qwen3Moe, Family::Olmoe],
    };
    for f in candidates {
        let theirs = ModelConfig { recipe: recipe_for(f, None)?, ..m.clone() }.validate()?.1;
        // QK-clip acts on the weights after a step, not on the forward: a clipped Llama is a Llama.
        let forward = |a: &crate::recipe::Attention| crate::recipe::Attention { qk_clip: None, ..*a };
        if ours.sublayers == theirs.sublayers
            && forward(&ours.attention) == theirs.attention
            && ours.residual == theirs.residual
            && ours.init == theirs.init
            && ours.embedding == theirs.embedding
            && ours.logits == theirs.logits
        {
            return Ok(Some(if f == Family::Llama && m.attn_bias { Family::Qwen2 } else { f }));
        }
    }
    Ok(None)
}

/// Refuses a MoE run without a family layout, saying which layouts exist and what this run has
/// that they do not (`modeling_normlab.py` runs dense models only).
fn check_moe_layout(m: &ModelConfig, run: &Path) -> anyhow::Result<()> {
    let Some(moe) = &m.moe else { return Ok(()) };
    if family_of(m)?.is_some() {
        return Ok(());
    }
    let why = match recipe_family(m)? {
        Some(f) => unexpressible(f, m, moe).unwrap_or_default(),
        None => "its recipe is none of theirs (Llama's, Qwen3's or OLMoE's pre-norm RMSNorm)".into(),
    };
    anyhow::bail!(
        "{} is a mixture-of-experts run whose Hugging Face export needs a Mixtral, Qwen3-MoE or OLMoE layout, and \
         {why}; use its checkpoint with normlab's own commands (generate, evaluate, serve)",
        run.display()
    )
}

fn architecture(f: Family) -> &'static str {
    match f {
        Family::Llama => "LlamaForCausalLM",
        Family::Qwen2 => "Qwen2ForCausalLM",
        Family::Qwen3 => "Qwen3ForCausalLM",
        Family::Olmo2 => "Olmo2ForCausalLM",
        Family::Mixtral => "MixtralForCausalLM",
        Family::Qwen3Moe => "Qwen3MoeForCausalLM",
        Family::Olmoe => "OlmoeForCausalLM",
    }
}

/// `config.json` for `m` as family `f`.
pub(crate) fn config_json(
    m: &ModelConfig,
    f: Family,
    max_positions: usize,
    ids: ConfigIds,
) -> anyhow::Result<serde_json::Value> {
    let hf = HfConfig {
        model_type: f.model_type().into(),
        hidden_size: m.d_model,
        intermediate_size: m.d_ff(),
        num_hidden_layers: m.n_layers,
        num_attention_heads: m.n_heads,
        num_key_value_heads: Some(m.kv_heads()),
        head_dim: Some(m.head_dim()),
        vocab_size: m.vocab_size,
        rms_norm_eps: m.norm_eps,
        rope_theta: Some(m.rope_base),
        rope_parameters: Some(serde_json::json!({"rope_theta": m.rope_base, "rope_type": "default"})),
        tie_word_embeddings: m.tie_embeddings,
        attention_bias: m.attn_bias && f != Family::Qwen2,
        mlp_bias: false,
        hidden_act: "silu".into(),
        rope_scaling: None,
        moe: Default::default(),
    };
    let mut v = serde_json::to_value(hf)?;
    let o = v.as_object_mut().expect("a struct is an object");
    if let Some(moe) = &m.moe {
        o.extend(super::moe::config_keys(f, m, moe));
    }
    o.insert("architectures".into(), serde_json::json!([architecture(f)]));
    o.insert("max_position_embeddings".into(), serde_json::json!(max_positions));
    o.insert("torch_dtype".into(), serde_json::json!("float32"));
    // Always written (`null` included): otherwise `transformers` fills in its family's defaults
    // (OLMo 2's eos_token_id 50279 lies outside a small vocabulary).
    o.insert("bos_token_id".into(), serde_json::json!(ids.bos));
    o.insert("eos_token_id".into(), serde_json::json!(ids.eos));
    o.insert("pad_token_id".into(), serde_json::Value::Null);
    o.remove("rope_scaling");
    Ok(v)
}

/// The run's tokenizer as `tokenizer.json`: its BPE, or for byte runs an equivalent byte-level
/// tokenizer (id = byte value).
fn tokenizer_json(saved: &SavedRun, run: &Path) -> anyhow::Result<String> {
    match &saved.tokenizer {
        crate::data::Tokenizer::Byte => remote::byte_tokenizer_json(),
        t => t.to_json()?.with_context(|| {
            let (name, hub) = match t.kind() {
                crate::data::TokenizerKind::Cl100k => ("tiktoken's cl100k_base", "Xenova/gpt-4"),
                _ => ("GPT-2's", "gpt2"),
            };
            format!(
                "{} uses {name} tokenizer, which normlab cannot write as tokenizer.json; load it in transformers \
                 with AutoTokenizer.from_pretrained(\"{hub}\")",
                run.display()
            )
        }),
    }
}

/// Refuses to write where an export would destroy what it did not make: into a run directory
/// (the exported run's own included), onto a file, or into a directory that holds files unless
/// `force` (which replaces only the files an export writes).
fn check_out(run: &Path, out: &Path, force: bool, flag: &str) -> anyhow::Result<()> {
    let same =
        |a: &Path, b: &Path| std::fs::canonicalize(a).ok().is_some_and(|a| std::fs::canonicalize(b).ok() == Some(a));
    anyhow::ensure!(
        !(crate::run::layout::holds_run(out) || same(run, out)),
        "{} is a normlab run directory; export writes beside it: give {flag} a new directory",
        out.display()
    );
    anyhow::ensure!(!out.exists() || out.is_dir(), "{} is a file; give {flag} a directory", out.display());
    let first = out.is_dir().then(|| std::fs::read_dir(out).ok()?.flatten().next()).flatten();
    if let (Some(f), false) = (first, force) {
        anyhow::bail!(
            "{} already holds files ({} among them); export into a new or empty directory, or pass --force to replace \
             the files an export writes there",
            out.display(),
            f.file_name().to_string_lossy()
        );
    }
    Ok(())
}

/// `m`'s LoRA settings, when its adapters have a `peft` form: it has adapters, trained nothing
/// beside them, and adapts no expert of a mixture of experts.
fn peft_adapters<'a>(run: &Path, m: &'a ModelConfig) -> anyhow::Result<&'a crate::model::base::lora::LoraConfig> {
    let l = m.lora.as_ref().with_context(|| {
        format!("{} has no LoRA adapters ([model.lora]); export its whole model with --hf", run.display())
    })?;
    anyhow::ensure!(
        !l.train_norms,
        "{} trained its norms beside the adapters (model.lora.train_norms), which a LoRA adapter does not carry; \
         export the merged model with --hf",
        run.display()
    );
    anyhow::ensure!(
        m.moe.is_none() || !l.plan()?.targets.iter().any(|t| t.is_ffn()),
        "{} adapts the feed-forward projections of a mixture of experts, whose per-expert adapters have no peft form \
         (transformers holds a MoE family's experts fused); export the merged model with --hf, or adapt attention \
         only (model.lora.targets = [\"attention\"])",
        run.display()
    );
    Ok(l)
}

/// Writes a LoRA run's adapters as a `peft` adapter directory for the parent run's own export:
/// on the family's `nn.Linear` modules ([`super::lora::peft_adapter`]), or on
/// `modeling_normlab.py`'s projection parameters ([`super::lora::peft_adapter_params`]).
/// `adapter_config.json`'s `base_model_name_or_path` names that export by its absolute path, so
/// that `AutoPeftModelForCausalLM.from_pretrained(OUT)` finds it: `base` (the parent's `--hf`
/// export, checked to hold the parent's model), else the parent exported into `OUT/base`.
/// Returns the base's path.
pub fn export_peft(run: &Path, out: &Path, force: bool, base: Option<&Path>) -> anyhow::Result<PathBuf> {
    check_out(run, out, force, "--peft")?;
    let saved = SavedRun::open(run)?;
    let m = &saved.cfg.model;
    let l = peft_adapters(run, m)?;
    let plain = ModelConfig { lora: None, ..m.clone() };
    let file = tensors::read(&saved.weights)?;
    crate::run::checkpoint::check_finite(&file, &saved.weights)?;
    let base_dir = match base {
        Some(b) => check_base(b, &plain)?,
        None => {
            let parent = saved.cfg.finetune.as_ref().map(|ft| ft.parent.clone()).with_context(|| {
                format!(
                    "{} has no parent run (it was not fine-tuned), so there is no base to export; give --base, the \
                     --hf export of the model its adapters were trained on",
                    run.display()
                )
            })?;
            let dir = out.join("base");
            export(&parent, &dir, force).with_context(|| format!("exporting the parent {}", parent.display()))?;
            dir
        }
    };
    let base_dir = std::path::absolute(&base_dir).unwrap_or(base_dir);
    let base = base_dir.display().to_string();
    let (adapter, config) = match family_of(&plain)? {
        Some(f) => {
            let maps = mappings(f, m);
            super::lora::peft_adapter(&file.tensors, l, &maps, &base)?
        }
        None => super::lora::peft_adapter_params(&file.tensors, l, &base)?,
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    write_atomic(&out.join("adapter_config.json"), serde_json::to_string_pretty(&config)?.as_bytes())?;
    let meta = BTreeMap::from([("format".into(), "pt".into())]);
    tensors::write(&out.join("adapter_model.safetensors"), &adapter, &meta)?;
    Ok(base_dir)
}

/// `base` as a LoRA run's base: a `--hf` export (its `config.json`'s `normlab.model`) of the
/// run's model without its adapters.
fn check_base(base: &Path, plain: &ModelConfig) -> anyhow::Result<PathBuf> {
    let cfg = base.join("config.json");
    let text = std::fs::read_to_string(&cfg).with_context(|| {
        format!("--base {} holds no config.json; give the parent run's --hf export", base.display())
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", cfg.display()))?;
    let theirs: Option<ModelConfig> = serde_json::from_value(v["normlab"]["model"].clone()).ok();
    let same = theirs.is_some_and(|t| {
        ModelConfig { kernels: Default::default(), ..t } == ModelConfig { kernels: Default::default(), ..plain.clone() }
    });
    anyhow::ensure!(
        same,
        "--base {} is not an export of this run's model (its config.json's normlab.model differs); give the parent \
         run's --hf export",
        base.display()
    );
    Ok(base.to_path_buf())
}

/// The chat template as the export carries it: the run's, rendering `bos_token` and `eos_token`
/// as the run rendered them (the template's own, from its `tokenizer_config.json`, or empty),
/// not as the export's tokenizer names its boundary. Top-level `set`s shadow the tokenizer's
/// values in Jinja; under `trim_blocks` the newline right after them is dropped, so a template
/// that starts with one gets one more.
pub fn exported_template(t: &crate::data::chat::template::ChatTemplate) -> String {
    let literal = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let newline = if t.source.starts_with('\n') { "\n" } else { "" };
    format!(
        "{{% set bos_token = {} %}}{{% set eos_token = {} %}}{newline}{}",
        literal(&t.bos_token),
        literal(&t.eos_token),
        t.source
    )
}

/// Writes the Hugging Face directory; returns the layout it was written in.
pub fn export(run: &Path, out: &Path, force: bool) -> anyhow::Result<Layout> {
    check_out(run, out, force, "--hf")?;
    let saved = SavedRun::open(run)?;
    check_moe_layout(&saved.cfg.model, run)?;
    let tok = tokenizer_json(&saved, run)?;
    let file = tensors::read(&saved.weights)?;
    crate::run::checkpoint::check_finite(&file, &saved.weights)?;
    let mut ours = file.tensors;
    // A LoRA run is written as the plain model its adapters describe.
    let m = &ModelConfig { lora: None, ..saved.cfg.model.clone() };
    if let Some(l) = &saved.cfg.model.lora {
        super::lora::merge(&mut ours, l)?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let seq_len = saved.cfg.train.seq_len;
    let boundary = crate::data::boundary::boundary(&saved.tokenizer, saved.cfg.data.task)?;
    let ids = special::config_ids(&boundary);
    let meta = BTreeMap::from([("format".into(), "pt".into())]);
    let layout = match family_of(m)? {
        Some(f) => {
            let hf = to_hf(&ours, &mappings(f, m))?;
            let mut cfg = config_json(m, f, seq_len, ids)?;
            // normlab's own description, from which the model is rebuilt exactly.
            cfg["normlab"] = serde_json::json!({"model": m, "seq_len": seq_len});
            let cfg = serde_json::to_string_pretty(&cfg)?;
            write_atomic(&out.join("config.json"), cfg.as_bytes())?;
            tensors::write(&out.join("model.safetensors"), &hf, &meta)?;
            Layout::Native(f)
        }
        None => {
            let cfg = serde_json::to_string_pretty(&remote::config_json(m, saved.cfg.recipe(), seq_len, ids))?;
            write_atomic(&out.join(remote::MODELING_FILE), remote::MODELING.as_bytes())?;
            write_atomic(&out.join("config.json"), cfg.as_bytes())?;
            tensors::write(&out.join("model.safetensors"), &ours, &meta)?;
            Layout::RemoteCode
        }
    };
    write_atomic(&out.join("tokenizer.json"), tok.as_bytes())?;
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v);
    let mut tok_cfg = special::tokenizer_config(&boundary, seq_len)?;
    if let Some(t) = saved.chat_template() {
        tok_cfg["chat_template"] = serde_json::Value::String(exported_template(&t));
    }
    write_atomic(&out.join("tokenizer_config.json"), pretty(tok_cfg)?.as_bytes())?;
    write_atomic(&out.join("special_tokens_map.json"), pretty(special::special_tokens_map(&boundary)?)?.as_bytes())?;
    Ok(layout)
}

#[cfg(test)]
mod moe_layout_tests {
    use super::*;

    /// DeepSeek's block (a shared expert, the sigmoid router) on Llama's recipe is refused,
    /// naming both; Mixtral's is written as Mixtral.
    #[test]
    fn a_moe_run_without_a_family_layout_is_refused_naming_why() {
        let moe = |extra: &str| Some(toml::from_str(&format!("experts = 4\ntop_k = 2\n{extra}")).unwrap());
        let recipe = recipe_for(Family::Llama, None).unwrap();
        let ds = ModelConfig {
            recipe: recipe.clone(),
            moe: moe("shared = 1\nrouter = { kind = \"sigmoid\" }"),
            ..Default::default()
        };
        let e = check_moe_layout(&ds, Path::new("runs/ds")).unwrap_err().to_string();
        assert!(e.contains("shared experts") && e.contains("sigmoid router"), "{e}");
        let mixtral = ModelConfig { recipe, moe: moe("router = { kind = \"topk-softmax\" }"), ..Default::default() };
        assert_eq!(family_of(&mixtral).unwrap(), Some(Family::Mixtral));
    }
}
