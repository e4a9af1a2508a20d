//! Every recipe against the PyTorch reference (tools/make_reference_fixtures.py, float64):
//! same weights and tokens → logits within 1e-5 relative, every parameter gradient of
//! CE (+ λ·R for recipes with the variance regulariser) within 1e-4 relative.

use burn::tensor::{Device, Int, Tensor, TensorData};
use normlab::init::ParamSource;
use normlab::io::tensors;
use normlab::model::params::named_grads;
use normlab::model::{ModelConfig, Transformer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LOGIT_TOL: f64 = 1e-5;
const GRAD_TOL: f64 = 1e-4;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference")
}

fn floats(d: &TensorData) -> Vec<f64> {
    d.clone().convert::<f64>().as_slice::<f64>().unwrap().to_vec()
}

/// max |a − b| / scale.
fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn check_case(path: &Path) -> Result<(), String> {
    let case = path.file_stem().unwrap().to_string_lossy().to_string();
    let file = tensors::read(path).map_err(|e| e.to_string())?;
    let cfg: ModelConfig = serde_json::from_str(&file.metadata["config"]).map_err(|e| format!("{case}: {e}"))?;
    let mut weights = BTreeMap::new();
    let mut ref_grads = BTreeMap::new();
    for (k, v) in &file.tensors {
        if let Some(n) = k.strip_prefix("param/") {
            weights.insert(n.to_string(), v.clone());
        } else if let Some(n) = k.strip_prefix("grad/") {
            ref_grads.insert(n.to_string(), floats(v));
        }
    }
    let device = Device::flex().autodiff();
    let model = Transformer::new(&cfg, ParamSource::Loaded(weights), &device).map_err(|e| format!("{case}: {e:#}"))?;
    let tok = |k: &str| Tensor::<2, Int>::from_data(file.tensors[k].clone(), &device);
    let logits = model.forward(tok("input/tokens"), false, false).logits;
    let want = floats(&file.tensors["out/logits"]);
    let got = floats(&logits.into_data());
    let logit_err = max_diff(&got, &want) / max_abs(&want);
    let mut problems = Vec::new();
    if logit_err > LOGIT_TOL {
        problems.push(format!("logits rel err {logit_err:.2e}"));
    }
    let (loss, _, _) = model.loss(tok("input/tokens"), tok("input/targets"));
    let loss_v = floats(&loss.clone().into_data())[0];
    let want_loss = floats(&file.tensors["out/loss"])[0];
    if ((loss_v - want_loss) / want_loss).abs() > LOGIT_TOL {
        problems.push(format!("loss {loss_v} vs {want_loss}"));
    }
    let grads = loss.backward();
    let ours: BTreeMap<String, Option<TensorData>> = named_grads(&model, &grads).into_iter().collect();
    let global = ref_grads.values().map(|g| max_abs(g)).fold(0.0, f64::max);
    let mut worst = (0.0, String::new());
    for (name, want) in &ref_grads {
        let got = match ours.get(name) {
            Some(Some(g)) => floats(g),
            Some(None) => vec![0.0; want.len()],
            None => {
                problems.push(format!("parameter {name} missing in the Rust model"));
                continue;
            }
        };
        // Per-tensor relative error; tensors whose true gradient is ~0 (provably dead
        // parameters) are measured against 1e-3 of the largest gradient instead.
        let err = max_diff(&got, want) / max_abs(want).max(1e-3 * global);
        if err > worst.0 {
            worst = (err, name.clone());
        }
        if err > GRAD_TOL {
            problems.push(format!("grad {name} rel err {err:.2e}"));
        }
    }
    eprintln!("{case:20} logits rel err {logit_err:.1e}, worst grad rel err {:.1e} ({})", worst.0, worst.1);
    if problems.is_empty() { Ok(()) } else { Err(format!("{case}: {}", problems.join("; "))) }
}

#[test]
fn every_recipe_matches_the_pytorch_reference() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixtures present")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 16, "expected a fixture per preset, found {}", paths.len());
    let failures: Vec<String> = paths.iter().filter_map(|p| check_case(p).err()).collect();
    assert!(failures.is_empty(), "mismatches against PyTorch:\n{}", failures.join("\n"));
}

#[test]
fn every_preset_has_a_fixture() {
    for name in normlab::recipe::PRESET_NAMES {
        assert!(fixture_dir().join(format!("{name}.safetensors")).exists(), "no PyTorch fixture for preset `{name}`");
    }
}
