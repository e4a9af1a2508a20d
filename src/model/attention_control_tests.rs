//! Gated attention and attention sinks against hand-computed values and their special cases:
//! a sink's softmax on numbers worked by hand, the first-key mass and entropy the probes report,
//! a zero gate (σ(0) = ½ halves every head's output, which is `W_O` halved), a sink at −∞ (the
//! plain softmax), the initial spread of `W_θ` and the sink logits, and value residual with
//! `λ = (1, 0)` (pre-norm).

use super::*;
use crate::init::ParamSource;
use crate::model::attention::self_attention::{attn_stats, softmax_with_sink};
use crate::model::base::params::named_values;
use crate::model::tests::{tiny, tokens};
use crate::recipe::RecipeConfig;
use crate::testutil::{cpu, values};
use burn::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

/// Scores `[0, ln 2]` with a sink logit 0: weights `e⁰, 2, e⁰` over (key 1, key 2, sink), so
/// the keys get ¼ and ½ and the row sums to ¾.
#[test]
fn a_sink_takes_its_share_of_the_softmax() {
    let scores = Tensor::<4>::from_data(TensorData::new(vec![0.0f32, 2f32.ln()], [1, 1, 1, 2]), &cpu());
    let sink = Tensor::<1>::from_data(TensorData::new(vec![0.0f32], [1]), &cpu());
    let p = values(softmax_with_sink(scores.clone(), Some(sink)));
    assert!(close(&p, &[0.25, 0.5], 1e-7), "{p:?}");
    // Without a sink the row is the plain softmax: 1/3 and 2/3.
    let p = values(softmax_with_sink(scores, None));
    assert!(close(&p, &[1.0 / 3.0, 2.0 / 3.0], 1e-7), "{p:?}");
}

/// Two causal rows, scores `[[0, −∞], [0, ln 3]]`. Without a sink row 2 puts ¼ on the first key
/// (row 1, which sees only it, is not counted); entropies 0 and H(¼, ¾). With a sink logit 0:
/// row 1 gives ½ to key 1 and ½ to the sink (entropy ln 2), row 2 (1, 3, 1)/5.
#[test]
fn probes_report_the_first_key_mass_and_the_entropy_with_the_sink() {
    let inf = f32::NEG_INFINITY;
    let scores = Tensor::<4>::from_data(TensorData::new(vec![0.0f32, inf, 0.0, 3f32.ln()], [1, 1, 2, 2]), &cpu());
    let h = |p: &[f64]| -p.iter().map(|x| x * x.ln()).sum::<f64>();
    let plain = attn_stats(scores.clone(), None);
    assert!(close(&values(plain.first_key_mass), &[0.25], 1e-7));
    assert!(close(&values(plain.entropy), &[(0.0 + h(&[0.25, 0.75])) / 2.0], 1e-6));
    assert!(close(&values(plain.max_logit), &[3f64.ln()], 1e-6));
    let sink = Tensor::<1>::from_data(TensorData::new(vec![0.0f32], [1]), &cpu());
    let sunk = attn_stats(scores, Some(sink));
    assert!(close(&values(sunk.first_key_mass), &[0.2], 1e-7));
    let want = (2f64.ln() + h(&[0.2, 0.6, 0.2])) / 2.0;
    let entropy = values(sunk.entropy);
    assert!(close(&entropy, &[want], 1e-6), "{entropy:?} vs {want}");
}

/// The logits of `recipe` (`tiny`, 2 layers) with `set` written over its seeded weights.
fn logits_with(recipe: &str, set: &dyn Fn(&str, &TensorData) -> Option<TensorData>) -> Vec<f64> {
    let cfg = tiny(RecipeConfig::Preset(recipe.into()), 2);
    let device = cpu();
    let seeded = named_values(&Transformer::new(&cfg, ParamSource::Seeded(5), &device).unwrap());
    let weights: BTreeMap<String, TensorData> =
        seeded.into_iter().map(|(n, v)| (n.clone(), set(&n, &v).unwrap_or(v))).collect();
    let model = Transformer::new(&cfg, ParamSource::Loaded(weights), &device).unwrap();
    let (x, _) = tokens(&device, 4);
    values(model.forward(x, Keep::LOGITS).logits)
}

fn filled(v: &TensorData, value: f32) -> TensorData {
    TensorData::new(vec![value; v.num_elements()], v.shape().clone())
}

fn scaled(v: &TensorData, by: f32) -> TensorData {
    let x: Vec<f32> = v.clone().convert::<f32>().try_into_vec().unwrap();
    TensorData::new(x.into_iter().map(|a| a * by).collect(), v.shape().clone())
}

/// `W_θ = 0` gates every head at σ(0) = ½, which is `pre-rms` with `W_O` halved; the same for
/// the headwise gate.
#[test]
fn a_zero_gate_halves_every_heads_output() {
    let halved = logits_with("pre-rms", &|n, v| n.ends_with(".wo").then(|| scaled(v, 0.5)));
    let gated = logits_with("gated-attn", &|n, v| n.ends_with(".w_gate").then(|| filled(v, 0.0)));
    assert!(close(&gated, &halved, 1e-6));
    let cfg = tiny(RecipeConfig::Preset("gated-attn".into()), 2);
    let o: crate::recipe::RecipeOverlay = toml::from_str("preset = \"gated-attn\"\nattn_gate = \"headwise\"").unwrap();
    let headwise = ModelConfig { recipe: RecipeConfig::Custom(Box::new(o)), ..cfg };
    let model = Transformer::new(&headwise, ParamSource::Seeded(5), &cpu()).unwrap();
    let shapes: Vec<Vec<usize>> = named_values(&model)
        .into_iter()
        .filter(|(n, _)| n.ends_with(".w_gate"))
        .map(|(_, v)| v.shape().to_vec())
        .collect();
    assert_eq!(shapes, vec![vec![16, 2]; 2], "headwise: one column per head");
}

/// A sink logit far below every score takes no share: the plain softmax of `pre-rms` (which
/// runs the fused attention kernel, hence rounding-level differences).
#[test]
fn a_sink_at_minus_infinity_is_the_plain_softmax() {
    let plain = logits_with("pre-rms", &|_, _| None);
    let sunk = logits_with("attn-sink", &|n, v| n.ends_with(".sinks").then(|| filled(v, -1e30)));
    assert!(close(&sunk, &plain, 1e-6), "a sink at −1e30 must change nothing");
    let weighed = logits_with("attn-sink", &|_, _| None);
    assert!(!close(&weighed, &plain, 1e-3), "sinks at their initial values take a share");
}

/// `W_θ` is drawn like `W_Q` (N(0, σ²), the authors' widened `q_proj`), the sink logits
/// N(0, σ²) as HF's gpt-oss `_init_weights`: sample standard deviations near σ = 0.02.
#[test]
fn gates_and_sinks_start_at_their_papers_spread() {
    let cfg = ModelConfig { d_model: 128, n_heads: 64, ..tiny(RecipeConfig::Preset("gated-attn".into()), 2) };
    let sd = |v: &TensorData| {
        let x: Vec<f64> = v.clone().convert::<f64>().try_into_vec().unwrap();
        let m = x.iter().sum::<f64>() / x.len() as f64;
        (x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / x.len() as f64).sqrt()
    };
    for (recipe, leaf) in [("gated-attn", ".w_gate"), ("attn-sink", ".sinks")] {
        let cfg = ModelConfig { recipe: RecipeConfig::Preset(recipe.into()), ..cfg.clone() };
        let model = Transformer::new(&cfg, ParamSource::Seeded(5), &cpu()).unwrap();
        let all: Vec<TensorData> =
            named_values(&model).into_iter().filter(|(n, _)| n.ends_with(leaf)).map(|(_, v)| v).collect();
        assert_eq!(all.len(), 2, "{recipe}: one per layer");
        for v in &all {
            let s = sd(v);
            // 64 sink logits: the sample sd lies within ±35 % of σ with overwhelming probability.
            assert!((s - 0.02).abs() < 0.35 * 0.02, "{recipe}{leaf}: sd {s}");
        }
    }
}

/// Value residual with `λ = (1, 0)` in every later layer is `pre-rms`; with its initial
/// `(0.5, 0.5)` it is not; the first layer has no `λ`.
#[test]
fn value_residual_with_unit_lambda_is_pre_norm() {
    let lambda = |v: &TensorData| TensorData::new(vec![1.0f32, 0.0], v.shape().clone());
    let plain = logits_with("pre-rms", &|_, _| None);
    let unit = logits_with("value-residual", &|n, v| n.ends_with(".value_lambda").then(|| lambda(v)));
    assert!(close(&unit, &plain, 1e-6), "λ = (1, 0) leaves every layer's own values");
    let mixed = logits_with("value-residual", &|_, _| None);
    assert!(!close(&mixed, &plain, 1e-3), "λ = (0.5, 0.5) mixes layer 1's values in");
    let cfg = tiny(RecipeConfig::Preset("value-residual".into()), 2);
    let names: Vec<String> = named_values(&Transformer::new(&cfg, ParamSource::Seeded(5), &cpu()).unwrap())
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.ends_with(".value_lambda"))
        .collect();
    assert_eq!(names, vec!["layers.1.attn.f.value_lambda".to_string()]);
}
