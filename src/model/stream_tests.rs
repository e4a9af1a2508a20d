//! Residual streams against their special cases and hand-computed values: one stream of
//! Hyper-Connections at its initial values is pre-norm exactly; four streams at their initial
//! values are pre-norm up to the final norm's ε (the streams stay identical and sum to 4·X);
//! HC's static connections start as pre-norm's; the permutation basis of mHC-lite; Sinkhorn's
//! projection on a matrix worked by hand; the residual mixing the probes read is doubly
//! stochastic for mHC and mHC-lite.

use super::*;
use crate::init::ParamSource;
use crate::model::residual::stream_mix::{permutation_basis, sinkhorn};
use crate::model::tests::{tiny, tokens};
use crate::recipe::RecipeConfig;
use crate::testutil::{cpu, values};
use burn::tensor::{Tensor, TensorData};

fn logits(cfg: &ModelConfig) -> Vec<f64> {
    let model = Transformer::new(cfg, ParamSource::Seeded(9), &cpu()).unwrap();
    let (x, _) = tokens(&cpu(), 2);
    values(model.forward(x, Keep::LOGITS).logits)
}

fn overlay(toml: &str) -> ModelConfig {
    let o: crate::recipe::RecipeOverlay = toml::from_str(toml).unwrap();
    tiny(RecipeConfig::Custom(Box::new(o)), 2)
}

fn max_gap(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

#[test]
fn one_stream_of_hyper_connections_is_pre_norm() {
    let pre = logits(&tiny(RecipeConfig::Preset("pre-rms".into()), 2));
    for dynamic in [true, false] {
        let hc =
            logits(&overlay(&format!("preset = \"hc\"\nstreams = {{ n = 1, mixing = \"hc\", dynamic = {dynamic} }}")));
        assert!(max_gap(&hc, &pre) < 1e-6, "dynamic {dynamic}: {}", max_gap(&hc, &pre));
    }
}

#[test]
fn four_streams_at_their_initial_values_are_pre_norm() {
    // X_{2L+1} = 4·X, and RMSNorm of 4x is that of x but for ε: compared at ε = 1e-12.
    let eps = |cfg: ModelConfig| ModelConfig { norm_eps: 1e-12, ..cfg };
    let pre = logits(&eps(tiny(RecipeConfig::Preset("pre-rms".into()), 2)));
    let hc = logits(&eps(tiny(RecipeConfig::Preset("hc".into()), 2)));
    assert!(max_gap(&hc, &pre) < 1e-5, "{}", max_gap(&hc, &pre));
    let static_hc = logits(&eps(overlay("preset = \"hc\"\nstreams = { mixing = \"hc\", dynamic = false }")));
    assert!(max_gap(&static_hc, &hc) < 1e-6, "at init the dynamic terms are 0");
}

#[test]
fn static_connections_start_as_pre_norm() {
    let model = Transformer::new(&tiny(RecipeConfig::Preset("hc".into()), 2), ParamSource::Seeded(9), &cpu()).unwrap();
    let w: std::collections::BTreeMap<_, _> = crate::model::base::params::named_values(&model).into_iter().collect();
    // Sublayer l = 3 (layer 1's FFN) reads stream 3 mod 4 = 3; every stream keeps itself.
    let a: Vec<f32> = w["layers.1.ffn.hc.static_alpha"].clone().convert::<f32>().try_into_vec().unwrap();
    #[rustfmt::skip]
    let want = [0., 1., 0., 0., 0.,
                0., 0., 1., 0., 0.,
                0., 0., 0., 1., 0.,
                1., 0., 0., 0., 1.];
    assert_eq!(a, want);
}

#[test]
fn the_permutation_basis_is_lexicographic() {
    let b = permutation_basis(3);
    assert_eq!(b.shape().to_vec(), vec![6, 9]);
    let v: Vec<f32> = b.convert::<f32>().try_into_vec().unwrap();
    // (0 1 2) the identity first, (0 2 1) next, (2 1 0) the anti-diagonal last.
    assert_eq!(&v[..9], &[1., 0., 0., 0., 1., 0., 0., 0., 1.]);
    assert_eq!(&v[9..18], &[1., 0., 0., 0., 0., 1., 0., 1., 0.]);
    assert_eq!(&v[45..], &[0., 0., 1., 0., 1., 0., 1., 0., 0.]);
}

/// Row-softmaxed `[[1/4, 3/4], [1/2, 1/2]]`: one column step gives `[[1/3, 3/5], [2/3, 2/5]]`;
/// the fixed point of a 2×2 Sinkhorn from it is doubly stochastic, `[[a, 1−a], [1−a, a]]`.
#[test]
fn sinkhorn_normalises_columns_then_rows_and_columns() {
    let m = Tensor::<3>::from_data(TensorData::new(vec![0.25f32, 0.75, 0.5, 0.5], [1, 2, 2]), &cpu());
    let one = values(sinkhorn(m.clone(), 1));
    let want = [1.0 / 3.0, 3.0 / 5.0, 2.0 / 3.0, 2.0 / 5.0];
    assert!(max_gap(&one, &want) < 1e-5, "{one:?}");
    let many = values(sinkhorn(m, 50));
    for (r, c) in [(0, 1), (2, 3)].into_iter().zip([(0, 2), (1, 3)]) {
        assert!((many[r.0] + many[r.1] - 1.0).abs() < 1e-5 && (many[c.0] + many[c.1] - 1.0).abs() < 1e-5);
    }
    assert!((many[0] - many[3]).abs() < 1e-5, "{many:?}");
}

#[test]
fn the_residual_mixing_of_mhc_is_doubly_stochastic() {
    for recipe in ["mhc", "mhc-lite"] {
        let cfg = ModelConfig { init_std: 0.2, ..tiny(RecipeConfig::Preset(recipe.into()), 2) };
        let model = Transformer::new(&cfg, ParamSource::Seeded(9), &cpu()).unwrap();
        let (x, _) = tokens(&cpu(), 2);
        for t in model.trace(x).traces {
            let r = t.streams.expect("a stream recipe traces its streams").residual;
            let [_, _, n, _] = r.dims();
            // Sinkhorn ends on a column step (sums 1 but for its ε); 20 iterations leave the
            // rows of a peaked matrix (σ = 0.2 here) within ~1e-3; the permutation mixture is
            // exact.
            let rows_tol = if recipe == "mhc" { 2e-3 } else { 1e-5 };
            for (axis, what, tol) in [(3, "rows", rows_tol), (2, "columns", 1e-5)] {
                let sums = values(r.clone().sum_dim(axis));
                let worst = sums.iter().map(|s| (s - 1.0).abs()).fold(0.0, f64::max);
                assert!(worst < tol, "{recipe}: {what} sum off by {worst:e} (n = {n})");
            }
        }
    }
}
