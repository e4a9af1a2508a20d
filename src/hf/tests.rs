//! Import and export against checkpoints written by `transformers` itself
//! (`tools/make_hf_fixtures.py`): tiny random Llama (bf16, untied), Qwen2 (biases, tied
//! embeddings, sharded), Qwen3 (per-head QK-norm, head size ≠ d/H) and OLMo-2 (output norms,
//! full-width QK-norm), Mixtral (4 experts, top 2), Qwen3-MoE (a dense layer 0, then 4
//! experts of width 48, top 2 renormalised) and OLMoE (8 experts, top 2, not renormalised),
//! all with grouped-query attention (4 query heads, 2 key/value heads) and 320 embedding rows
//! for a 300-token tokenizer.

use super::export::export;
use super::import::import;
use super::weights::read_checkpoint;
use crate::io::tensors;
use crate::run::saved::SavedRun;
use crate::testutil::{cpu, temp_dir};
use burn::tensor::{Int, Tensor};
use std::path::{Path, PathBuf};

const CASES: [&str; 7] = ["llama", "qwen2", "qwen3", "olmo2", "mixtral", "qwen3_moe", "olmoe"];

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf").join(case)
}

fn quiet(_: &str) {}

/// Settings that keep an import's data preparation small: a local corpus, a private cache.
fn sets(root: &Path) -> Vec<String> {
    let corpus = root.join("corpus.txt");
    if !corpus.exists() {
        crate::testutil::write_tiny_corpus(&corpus, 2000);
    }
    vec![
        format!("data.corpus={}", corpus.display()),
        format!("data.cache_dir={}", root.join("cache").display()),
        "train.seq_len=32".into(),
        "train.batch_size=2".into(),
        "train.steps=2".into(),
        "run.eval_windows=2".into(),
    ]
}

fn f32s(t: &burn::tensor::TensorData) -> Vec<f32> {
    t.clone().convert::<f32>().as_slice::<f32>().unwrap().to_vec()
}

/// Each family imports under its own recipe with nothing added or removed, its tokenizer
/// encodes as in Python, and its logits on fixed tokens equal `transformers`' within 1e-4
/// (relative to the largest logit).
#[test]
fn every_family_imports_and_matches_the_transformers_logits() {
    let root = temp_dir("hf-import");
    for case in CASES {
        let run = root.join(case);
        let rec = import(&fixture(case), &run, None, &sets(&root), false, &quiet).unwrap();
        assert!(rec.added.is_empty() && rec.removed.is_empty(), "{case}: {rec:?}");
        let saved = SavedRun::open(&run).unwrap();
        let model = saved.model(&cpu()).unwrap();
        let want = tensors::read(&fixture(case).join("expected.safetensors")).unwrap().tensors;
        let tokens = Tensor::<2, Int>::from_data(want["tokens"].clone(), &cpu());
        let got = f32s(&model.forward(tokens, crate::model::Keep::LOGITS).logits.into_data());
        let exp = f32s(&want["logits"]);
        assert_eq!(got.len(), exp.len(), "{case}");
        let scale = exp.iter().fold(0f32, |m, v| m.max(v.abs()));
        let err = got.iter().zip(&exp).fold(0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
        eprintln!("{case}: relative logit error {err:e}");
        assert!(err < 1e-4, "{case}: relative logit error {err:e}");
        let encoded: Vec<i64> = want["encoded"].clone().convert::<i64>().try_to_vec::<i64>().unwrap();
        let ours: Vec<i64> =
            saved.tokenizer.encode("Fellow citizens, 2021").unwrap().iter().map(|&t| t as i64).collect();
        assert_eq!(ours, encoded, "{case}: tokenizer");
    }
}

/// The MoE keys of the three families' `config.json` (absent in the dense ones).
const MOE_KEYS: [&str; 7] = [
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "norm_topk_prob",
    "mlp_only_layers",
    "router_aux_loss_coef",
];

/// Export writes back exactly the checkpoint it was imported from: every tensor under its
/// name with the same values (the bf16 one widened to f32), and the same model settings.
#[test]
fn export_writes_back_the_imported_checkpoint() {
    let root = temp_dir("hf-export");
    for case in CASES {
        let (run, out) = (root.join(case), root.join(format!("{case}-hf")));
        import(&fixture(case), &run, None, &sets(&root), false, &quiet).unwrap();
        export(&run, &out, false).unwrap();
        let (orig, back) = (read_checkpoint(&fixture(case)).unwrap(), read_checkpoint(&out).unwrap());
        assert_eq!(orig.keys().collect::<Vec<_>>(), back.keys().collect::<Vec<_>>(), "{case}: tensor names");
        for (k, v) in &orig {
            assert_eq!(f32s(v), f32s(&back[k]), "{case}: {k}");
        }
        let read = |p: &Path| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(p.join("config.json")).unwrap()).unwrap()
        };
        let (a, b) = (read(&fixture(case)), read(&out));
        for key in [
            "model_type",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "vocab_size",
            "rms_norm_eps",
            "tie_word_embeddings",
        ] {
            assert_eq!(a[key], b[key], "{case}: {key}");
        }
        for key in MOE_KEYS {
            assert_eq!(a.get(key), b.get(key), "{case}: {key}");
        }
        assert_eq!(a["head_dim"].as_u64().unwrap_or(16), b["head_dim"].as_u64().unwrap(), "{case}: head_dim");
        assert_eq!(a["rope_parameters"]["rope_theta"], b["rope_parameters"]["rope_theta"], "{case}: θ");
    }
}

/// The Normalization chapter's three variants are three imports of one checkpoint: Peri-LN adds the output
/// norms (gain 1), Post-LN replaces the input norms by outer norms; projections are kept, and
/// the imported run fine-tunes with `train --resume`.
#[test]
fn a_placement_change_lists_what_it_added_and_removed_and_fine_tunes() {
    let root = temp_dir("hf-recipe");
    let peri = import(&fixture("llama"), &root.join("peri"), Some("peri"), &sets(&root), false, &quiet).unwrap();
    assert!(peri.removed.is_empty(), "{peri:?}");
    // Peri-LN normalises the embedding too, and adds an output norm to each of the 4 sublayers.
    assert_eq!(peri.added.len(), 5, "{peri:?}");
    assert!(peri.added.iter().all(|n| n.ends_with("output_norm.gain") || n == "emb_norm.gain"));
    let post = import(&fixture("llama"), &root.join("post"), Some("post"), &sets(&root), false, &quiet).unwrap();
    assert_eq!(post.removed.len(), 5, "4 input norms and the final norm: {post:?}");
    assert!(post.added.iter().all(|n| n.contains("outer_norm")), "{post:?}");
    let a = tensors::read(&SavedRun::open(&root.join("peri")).unwrap().weights).unwrap().tensors;
    let b = tensors::read(&SavedRun::open(&root.join("post")).unwrap().weights).unwrap().tensors;
    assert_eq!(a["layers.1.attn.f.wq"], b["layers.1.attn.f.wq"], "the projections are the checkpoint's");
    assert_eq!(f32s(&a["layers.0.attn.output_norm.gain"]), vec![1.0; 64], "a new gain starts at 1");
    let crate::train::Resumed::Trainer(mut t) = crate::train::resume(&root.join("peri"), &quiet).unwrap() else {
        panic!("an imported run is at step 0")
    };
    assert_eq!(t.state.step, 0);
    let o = t.run(&mut crate::train::progress::Progress::new(2, 0, true)).unwrap();
    assert!(matches!(o, crate::train::Outcome::Finished { .. }), "{o:?}");
}

/// A MoE checkpoint (Qwen3-MoE: layer 0 dense, layer 1 four experts) imports under Peri-LN,
/// which adds the embedding norm and an output norm on each sublayer, the MoE block's
/// included; the run fine-tunes, and the router and the experts' matrices move.
#[test]
fn a_moe_checkpoint_imports_under_another_placement_and_fine_tunes() {
    let root = temp_dir("hf-moe");
    let run = root.join("peri");
    let rec = import(&fixture("qwen3_moe"), &run, Some("peri"), &sets(&root), false, &quiet).unwrap();
    assert!(rec.removed.is_empty(), "{rec:?}");
    assert_eq!(rec.added.len(), 5, "{rec:?}");
    assert!(rec.added.contains(&"layers.1.ffn.output_norm.gain".to_string()), "{rec:?}");
    let before = tensors::read(&SavedRun::open(&run).unwrap().weights).unwrap().tensors;
    let crate::train::Resumed::Trainer(mut t) = crate::train::resume(&run, &quiet).unwrap() else {
        panic!("an imported run is at step 0")
    };
    let o = t.run(&mut crate::train::progress::Progress::new(2, 0, true)).unwrap();
    assert!(matches!(o, crate::train::Outcome::Finished { .. }), "{o:?}");
    let after = tensors::read(&SavedRun::open(&run).unwrap().weights).unwrap().tensors;
    let moved = |k: &str| f32s(&before[k]) != f32s(&after[k]);
    assert!(moved("layers.1.ffn.f.router") && moved("layers.0.ffn.f.w1"), "router and dense FFN train");
    let experts = (0..4).filter(|e| moved(&format!("layers.1.ffn.f.experts.{e}.w1"))).count();
    assert!(experts >= 2, "only {experts} of 4 experts moved");
}

#[test]
fn unsupported_or_incomplete_checkpoints_are_refused_clearly() {
    let root = temp_dir("hf-bad");
    let d = root.join("gpt2");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.json"), r#"{"model_type": "gpt2", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10}"#).unwrap();
    let e = format!("{:#}", import(&d, &root.join("r1"), None, &[], false, &quiet).unwrap_err());
    assert!(e.contains("model_type `gpt2` is not supported"), "{e}");
    let d = root.join("notok");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(fixture("llama").join("config.json"), d.join("config.json")).unwrap();
    let e = format!("{:#}", import(&d, &root.join("r2"), None, &[], false, &quiet).unwrap_err());
    assert!(e.contains("no tokenizer.json"), "{e}");
    assert!(!root.join("r1").exists() && !root.join("r2").exists(), "no run directory is left behind");
}

/// The MoE export fixtures and the family each must be written as.
const MOE_EXPORTS: [(&str, super::config::Family); 3] = [
    ("moe-mixtral", super::config::Family::Mixtral),
    ("moe-qwen3-moe", super::config::Family::Qwen3Moe),
    ("moe-olmoe", super::config::Family::Olmoe),
];

/// Every preset's export and the MoE runs' (`moe-mixtral`, `moe-qwen3-moe`, `moe-olmoe`), as
/// `transformers` ran them (`tools/make_export_fixtures.py`: through `modeling_normlab.py` with
/// `trust_remote_code=True`, or the family's own class): rebuilt in normlab from the exported
/// files, their logits on the fixture's tokens equal `transformers'` within 1e-5 (relative to
/// the largest); today's export writes the same config.json; and the modeling file that
/// produced the logits is the one export ships.
#[test]
fn every_preset_exports_and_transformers_gives_normlabs_logits() {
    use super::export::family_of;
    use crate::init::ParamSource;
    use crate::model::{ModelConfig, Transformer};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export");
    let moe = MOE_EXPORTS.iter().map(|(n, _)| *n);
    for name in crate::recipe::PRESET_NAMES.iter().copied().chain(moe) {
        let dir = root.join(name);
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        let m: ModelConfig = serde_json::from_value(config["normlab"]["model"].clone()).unwrap();
        let seq_len = config["normlab"]["seq_len"].as_u64().unwrap() as usize;
        let recipe = m.validate().unwrap().1;
        let expected = tensors::read(&dir.join("expected.safetensors")).unwrap();
        if let Some((_, f)) = MOE_EXPORTS.iter().find(|(n, _)| *n == name) {
            assert_eq!(family_of(&m).unwrap(), Some(*f), "{name}");
        }
        let weights = exported_weights(name, &dir, &config, &m, &expected.metadata);
        let model = Transformer::with_recipe(&m, &recipe, ParamSource::Loaded(weights), &cpu()).unwrap();
        let tokens = Tensor::<2, Int>::from_data(expected.tensors["tokens"].clone(), &cpu());
        let ours = f32s(&model.forward_masked(tokens, &[0], seq_len).into_data());
        let theirs = f32s(&expected.tensors["logits"]);
        let scale = theirs.iter().fold(0f32, |a, x| a.max(x.abs()));
        let err = ours.iter().zip(&theirs).fold(0f32, |a, (x, y)| a.max((x - y).abs())) / scale;
        assert!(err < 1e-5, "{name}: relative logit error {err:.2e}");
    }
}

/// An export fixture's weights under normlab's names, after checking that today's export
/// writes its config.json (and, through modeling_normlab.py, that file's hash).
fn exported_weights(
    name: &str,
    dir: &Path,
    config: &serde_json::Value,
    m: &crate::model::ModelConfig,
    metadata: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, burn::tensor::TensorData> {
    use super::weights::{mappings, to_normlab};
    let raw = read_checkpoint(dir).unwrap();
    let seq_len = config["normlab"]["seq_len"].as_u64().unwrap() as usize;
    // Byte runs: the boundary is "\n" (10), half the document separator "\n\n".
    let ids = super::special::ConfigIds { bos: 10, eos: None };
    match super::export::family_of(m).unwrap() {
        Some(f) => {
            let mut want = super::export::config_json(m, f, seq_len, ids).unwrap();
            want["normlab"] = serde_json::json!({"model": m, "seq_len": seq_len});
            assert_eq!(config, &want, "{name}: export now writes another config.json");
            to_normlab(&raw, &mappings(f, m)).unwrap().0
        }
        None => {
            let sha = crate::data::cache::sha256_hex(super::remote::MODELING.as_bytes());
            assert_eq!(metadata["modeling_sha256"], sha, "{name}: modeling_normlab.py changed; rerun the tool");
            let want = super::remote::config_json(m, &m.validate().unwrap().1, seq_len, ids);
            assert_eq!(config, &want, "{name}: export now writes another config.json");
            raw
        }
    }
}
