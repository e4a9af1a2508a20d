//! Entry points for the fuzz targets: each takes arbitrary bytes, runs one parser or loader of
//! normlab's inputs on them, and must return — an error is the right answer to bad bytes, a
//! panic is a bug. `fuzz/` drives them with AFL++ (`tools/fuzz.sh`, coverage-guided, stable
//! Rust); the tests below replay the seed inputs, every input that ever crashed a target, and
//! seeded random mutations, so CI runs a short smoke of each.

use crate::data::{TokenFile, Tokenizer, corpus};
use crate::init::ParamSource;
use crate::model::{ModelConfig, Transformer};
use crate::recipe::expr;
use crate::run::{RunConfig, checkpoint};
use std::collections::BTreeMap;

/// A target: its name (the seed and regression folder under `fuzz/`) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: [Target; 18] = [
    ("run_config", run_config),
    ("set_edits", set_edits),
    ("recipe", recipe),
    ("scale_expr", scale_expr),
    ("safetensors", safetensors),
    ("checkpoint_state", checkpoint_state),
    ("latest_json", latest_json),
    ("token_file", token_file),
    ("tokenizer_json", tokenizer_json),
    ("jsonl_corpus", jsonl_corpus),
    ("pair_files", pair_files),
    ("metrics_jsonl", metrics_jsonl),
    ("probes_jsonl", probes_jsonl),
    ("results_jsonl", results_jsonl),
    ("sweep_file", sweep_file),
    ("completion_request", completion_request),
    ("normalize_request", normalize_request),
    ("hf_config", hf_config),
];

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A run config file, validated.
pub fn run_config(data: &[u8]) {
    if let Some(t) = text(data) {
        let _ = RunConfig::from_text(t, "fuzz", &[]).and_then(|c| c.check());
    }
}

/// `--set` edits, one per line, on the defaults.
pub fn set_edits(data: &[u8]) {
    if let Some(t) = text(data) {
        let sets: Vec<String> = t.lines().map(String::from).collect();
        let _ = RunConfig::from_text("", "fuzz", &sets).and_then(|c| c.check());
    }
}

/// A pair file in each format, and its pairs scored against themselves.
pub fn pair_files(data: &[u8]) {
    use crate::data::pairs::{PairFormat, metrics, parse};
    let Some(t) = text(data) else { return };
    let jsonl = PairFormat::from_name("x.jsonl");
    for format in [PairFormat::Tsv, PairFormat::Arrow, jsonl] {
        if let Ok(pairs) = parse(t, &format, "fuzz", None) {
            let _ = metrics::score(pairs.iter().map(|p| (p.source.as_str(), p.target.as_str())));
        }
    }
}

/// A `[model.recipe]` table, resolved at several depths.
pub fn recipe(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(cfg) = RunConfig::from_text(&format!("[model.recipe]\n{t}"), "fuzz", &[]) else { return };
    let Ok(spec) = cfg.model.recipe.spec() else { return };
    for layers in [1, 2, 3, 12] {
        let _ = crate::recipe::resolve(&spec, crate::recipe::Dims { n_layers: layers, d_model: 64 }, 1e-5);
    }
}

/// A scale expression in `L`, `k`, `l` and a parameter.
pub fn scale_expr(data: &[u8]) {
    if let Some(t) = text(data) {
        let vars: BTreeMap<String, f64> =
            [("L", 12.0), ("k", 3.0), ("l", 5.0), ("ratio", 0.25)].iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let _ = expr::eval(t, &vars);
    }
}

/// Weights: parsed, then loaded into a small model of every recipe slot kind.
pub fn safetensors(data: &[u8]) {
    let Ok(file) = crate::io::tensors::parse(data, "fuzz") else { return };
    let cfg =
        ModelConfig { vocab_size: 256, d_model: 4, n_layers: 1, n_heads: 1, d_glu: Some(4), ..Default::default() };
    let _ = Transformer::new(&cfg, ParamSource::Loaded(file.tensors), &burn::tensor::Device::flex());
}

/// A checkpoint's `state.json`.
pub fn checkpoint_state(data: &[u8]) {
    let _ = checkpoint::parse_state(data);
}

/// `checkpoints/latest.json`.
pub fn latest_json(data: &[u8]) {
    let _ = checkpoint::parse_latest(data);
}

/// A token cache file: checked, then every token read.
pub fn token_file(data: &[u8]) {
    if let Ok(f) = TokenFile::from_bytes(data.to_vec(), "fuzz") {
        let mut out = Vec::new();
        f.extend_window(0, f.len(), &mut out);
    }
}

/// A `tokenizer.json`, then a round trip through it.
pub fn tokenizer_json(data: &[u8]) {
    if let Ok(t) = Tokenizer::bpe_from_json(data, "fuzz")
        && let Ok(ids) = t.encode("Fellow-Citizens of the Senate, 1790: ünïcödé")
    {
        let _ = t.decode(&ids);
        let _ = t.vocab_size();
    }
}

/// A JSONL corpus file.
pub fn jsonl_corpus(data: &[u8]) {
    if let Some(t) = text(data) {
        let _ = corpus::parse_jsonl(t, "text", "fuzz");
    }
}

/// The axes (ranges and ticks) of `points` as the report would plot them, on every axis kind.
fn plot_axes(points: Vec<(f64, f64)>) {
    use crate::report::plot::{Chart, Series, axes};
    let series = vec![Series { name: "s".into(), points, ..Default::default() }];
    for (log_x, log_y) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut c = Chart::new("fuzz", "x", "y", series.clone()).log(log_x, log_y);
        c.clip_outliers = true;
        let _ = axes(&c);
    }
}

/// A run's `metrics.jsonl` as the report reads it, and the axes of its curves.
pub fn metrics_jsonl(data: &[u8]) {
    use crate::run::metrics::{Metrics, MetricsRecord};
    let Some(t) = text(data) else { return };
    let Ok(records) = crate::io::jsonl::parse::<MetricsRecord>(t, "fuzz") else { return };
    let m = Metrics::from_records(records);
    plot_axes(m.train.iter().map(|r| (r.step as f64, r.loss)).collect());
    plot_axes(m.train.iter().map(|r| (r.lr, r.grad_norm)).collect());
    plot_axes(m.eval.iter().map(|r| (r.step as f64, r.val_loss)).collect());
}

/// A run's `probes.jsonl` as the report reads it, and the axes of its depth profiles.
pub fn probes_jsonl(data: &[u8]) {
    use crate::report::data::RunData;
    let Some(t) = text(data) else { return };
    let Ok(records) = crate::io::jsonl::parse::<crate::probe::ProbeRecord>(t, "fuzz") else { return };
    for p in &records {
        plot_axes(RunData::per_layer(p, |s| Some(s.z.max_abs)));
        plot_axes(RunData::per_layer(p, |s| s.grad_cv_run));
    }
}

/// A sweep's `results.jsonl`: aggregated per method, tabled and put into words.
pub fn results_jsonl(data: &[u8]) {
    use crate::sweep::aggregate::summarize;
    let Some(t) = text(data) else { return };
    let Ok(rows) = crate::io::jsonl::parse::<crate::sweep::results::RunResult>(t, "fuzz") else { return };
    let ms = summarize(&rows, &Default::default(), "optim.lr");
    let _ = crate::report::summary_table(&ms);
    let _ = crate::report::table_notes(&ms);
    let _ = crate::report::findings::findings(&ms, &[]);
    for m in &ms {
        plot_axes(m.curve.iter().filter_map(|p| Some((p.lr, p.val_loss?))).collect());
    }
}

/// A sweep file: parsed (every run's config validated) and its grid planned.
pub fn sweep_file(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(s) = crate::sweep::Sweep::parse(t, std::path::Path::new("fuzz.toml"), &[]) {
        let _ = s.to_toml();
    }
}

/// A `/v1/completions` body through every check the server makes before queueing it: the
/// request, its prompts (tokenised by the byte tokenizer), sampling, stops, `n`, `logprobs`
/// and `max_tokens` against a context of 64.
pub fn completion_request(data: &[u8]) {
    use crate::serve::api::{CompletionRequest, PromptIn, parse, prompts};
    let Ok(req) = parse::<CompletionRequest>(data) else { return };
    let _ = (req.sampling(), req.stops(), req.n(), req.logprobs());
    let Ok(ps) = prompts(&req.prompt) else { return };
    for p in ps {
        let len = match p {
            PromptIn::Text(t) => Tokenizer::Byte.encode(&t).map(|ids| ids.len()).unwrap_or(0),
            PromptIn::Tokens(ids) => ids.len(),
        };
        let _ = req.max_new(len, 64);
    }
}

/// A `/v1/normalize` body: the request and its prompt rendered as a pairs run renders it.
pub fn normalize_request(data: &[u8]) {
    use crate::serve::api::{NormalizeRequest, parse};
    if let Ok(req) = parse::<NormalizeRequest>(data) {
        let _ = crate::data::pairs::render::prompt(&Tokenizer::Byte, &req.input);
    }
}

/// A Hugging Face `config.json`: its family, the model it describes (validated) and the
/// check against a checkpoint of 2 layers with a 10 × 4 embedding.
pub fn hf_config(data: &[u8]) {
    use crate::hf::config::HfConfig;
    let Ok(hf) = serde_json::from_slice::<HfConfig>(data) else { return };
    let Ok(family) = hf.family() else { return };
    if let Ok(recipe) = crate::hf::config::recipe_for(family, None)
        && let Ok(m) = hf.model_config(family, recipe)
    {
        let _ = m.validate();
    }
    let embedding = burn::tensor::TensorData::new(vec![0f32; 40], vec![10, 4]);
    let one = burn::tensor::TensorData::new(vec![0f32; 1], vec![1]);
    let tensors = BTreeMap::from([
        ("model.embed_tokens.weight".to_string(), embedding),
        ("model.layers.0.input_layernorm.weight".to_string(), one.clone()),
        ("model.layers.1.input_layernorm.weight".to_string(), one),
    ]);
    let _ = crate::hf::shapes::check(&hf, &tensors);
}

#[cfg(test)]
mod tests {
    use super::TARGETS;
    use crate::rng::SplitMix64;
    use std::path::Path;

    /// The files under `fuzz/{seeds,regressions}/TARGET/`.
    fn inputs(target: &str) -> Vec<Vec<u8>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut out = Vec::new();
        for kind in ["seeds", "regressions"] {
            let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else { continue };
            out.extend(dir.flatten().filter_map(|e| std::fs::read(e.path()).ok()));
        }
        out
    }

    /// Byte flips, insertions, deletions and splices of a seed.
    fn mutate(seed: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + rng.next_u64() % 8 {
            let at = if v.is_empty() { 0 } else { (rng.next_u64() as usize) % v.len() };
            match rng.next_u64() % 4 {
                0 if !v.is_empty() => v[at] = rng.next_u64() as u8,
                1 => v.insert(at, b"{}[]\"=.,:0123456789eE-+\n\\"[(rng.next_u64() % 25) as usize]),
                2 if !v.is_empty() => {
                    v.remove(at);
                }
                _ => v.truncate(at),
            }
        }
        v
    }

    /// Runs `target` on `input`; a panic saves the input for a regression file and fails.
    fn survive(name: &str, target: fn(&[u8]), input: &[u8]) {
        if let Err(msg) = crate::guard::catch(|| target(input)) {
            let keep = std::env::temp_dir()
                .join(format!("normlab-fuzz-crash-{name}-{:016x}", crate::rng::fnv1a(&format!("{input:?}"))));
            std::fs::write(&keep, input).unwrap();
            panic!(
                "target {name} panicked ({msg}); the input is in {} — add it to fuzz/regressions/{name}/",
                keep.display()
            );
        }
    }

    #[test]
    fn every_target_survives_its_seeds_its_regressions_and_mutations() {
        let mut rng = SplitMix64::new(2026);
        for (name, target) in TARGETS {
            let inputs = inputs(name);
            assert!(!inputs.is_empty(), "fuzz/seeds/{name}/ has no seed");
            for input in &inputs {
                survive(name, target, input);
                for _ in 0..300 {
                    survive(name, target, &mutate(input, &mut rng));
                }
            }
        }
    }
}
