//! Each statistic against a direct computation on a small known tensor, and the papers'
//! init-time pictures on a 16-layer model. (Probes during training are tested with the
//! trainer, in `train/tests.rs`.)

use super::fit::{fit, ranks};
use super::grads::GradTracker;
use super::snapshot::forward_probe;
use super::stats::{Spread, angular_distance, cosines, hidden_summary, spread, token_alignment};
use crate::init::ParamSource;
use crate::model::base::names::sublayer_of;
use crate::model::{ModelConfig, Transformer};
use crate::recipe::RecipeConfig;
use crate::testutil::cpu;
use burn::tensor::{Int, Tensor, TensorData};

fn t3(v: &[f32], shape: [usize; 3]) -> Tensor<3> {
    Tensor::from_data(TensorData::new(v.to_vec(), shape), &cpu())
}

fn vals(t: Tensor<1>) -> Vec<f64> {
    t.into_data().convert::<f64>().try_into_vec::<f64>().unwrap()
}

#[test]
fn hidden_summary_by_hand() {
    // Token 1: mean −0.5, deviations ±1.5, ±3.5 → variance (2·2.25 + 2·12.25)/4 = 7.25.
    // Token 2: all zero → variance 0. Mean over tokens: 3.625. Mean |x| = 10/8.
    let x = t3(&[1., -2., 3., -4., 0., 0., 0., 0.], [1, 2, 4]);
    let v = vals(hidden_summary(x, 3));
    // |x| sorted: 0 0 0 0 1 2 3 4 → lower median 0; top 4, 3, 2 at (row 0, token 0, channels 3, 2, 1).
    let want = [3.625, 1.25, 0.0, 4.0, 3.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 2.0, 1.0];
    assert_eq!(v.len(), want.len(), "{v:?}");
    for (a, b) in v.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{v:?}");
    }
    let z = t3(&[1., -2., 3., -4.], [1, 1, 4]);
    assert!((vals(spread(z.clone(), Spread::Std, 0.0))[0] - 7.25f64.sqrt()).abs() < 1e-6);
    assert!((vals(spread(z, Spread::Rms, 0.0))[0] - 7.5f64.sqrt()).abs() < 1e-6, "√(30/4)");
}

/// A massive activation planted at (row 1, token 2, channel 5) of `[2, 3, 8]` values around 1:
/// found at its place, with its ratio to the median |x| (the lower median, as PyTorch's).
#[test]
fn massive_activation_is_located_and_measured_against_the_median() {
    let (b, t, d) = (2, 3, 8);
    let mut v: Vec<f32> =
        (0..b * t * d).map(|i| if i % 2 == 0 { 1.0 + i as f32 / 100.0 } else { -(1.0 + i as f32 / 100.0) }).collect();
    let spike = (t * d) + 2 * d + 5;
    v[spike] = -500.0;
    let mut sorted: Vec<f64> = v.iter().map(|x| x.abs() as f64).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[(sorted.len() - 1) / 2];
    let h = super::stats::HiddenSummary::read(&vals(hidden_summary(t3(&v, [b, t, d]), 2)));
    assert_eq!(h.top_at[0], [1, 2, 5]);
    assert!((h.top_abs[0] - 500.0).abs() < 1e-4 && (h.median_abs - median).abs() < 1e-6, "{h:?}");
    // The runner-up is the largest of the rest: the last entry, 1 + 47/100, at (1, 2, 7).
    assert_eq!(h.top_at[1], [1, 2, 7]);
    assert!((h.top_abs[1] - 1.47).abs() < 1e-6);
}

#[test]
fn token_alignment_is_one_for_identical_and_zero_for_orthogonal_tokens() {
    let same = t3(&[0.3, -1.0, 2.0, 0.3, -1.0, 2.0, 0.3, -1.0, 2.0], [1, 3, 3]);
    assert!((vals(token_alignment(same))[0] - 1.0).abs() < 1e-6);
    let basis = t3(&[1., 0., 0., 0., 1., 0., 0., 0., 1.], [1, 3, 3]);
    assert!(vals(token_alignment(basis))[0].abs() < 1e-7);
    // Two batches in which token 2 is +token 1 and −token 1: E⟨x1,x2⟩ = (1 − 1)/2 = 0 → τ = 0.
    let mixed = t3(&[1., 0., 1., 0., 1., 0., -1., 0.], [2, 2, 2]);
    assert!(vals(token_alignment(mixed))[0].abs() < 1e-7);
    let opposite = t3(&[1., 2., -1., -2.], [1, 2, 2]);
    assert!((vals(token_alignment(opposite))[0] + 1.0).abs() < 1e-6);
}

#[test]
fn token_alignment_by_hand() {
    // Tokens (1, 0), (1, 1), (0, 2): ρ₁₂ = 1/√2, ρ₁₃ = 0, ρ₂₃ = 2/(√2·2) = 1/√2;
    // τ = (2 · (1/√2 + 0 + 1/√2)) / (3 · 2) = √2/3.
    let x = t3(&[1., 0., 1., 1., 0., 2.], [1, 3, 2]);
    assert!((vals(token_alignment(x))[0] - 2f64.sqrt() / 3.0).abs() < 1e-6);
    // Two batch rows, tokens (1, 0), (1, 0) and (0, 2), (0, 3): E_b⟨x₁, x₂⟩ = (1 + 6)/2 = 3.5,
    // E‖x₁‖² = (1 + 4)/2 = 2.5, E‖x₂‖² = (1 + 9)/2 = 5 → ρ = 3.5/√12.5 (eq. 5's expectation
    // over the batch, not a mean of per-row cosines, which would be 1).
    let x = t3(&[1., 0., 1., 0., 0., 2., 0., 3.], [2, 2, 2]);
    assert!((vals(token_alignment(x))[0] - 3.5 / 12.5f64.sqrt()).abs() < 1e-6);
}

#[test]
fn tau_after_the_sum_is_the_next_input_tau_exactly_where_no_outer_norm_sits_between() {
    // Pre-norm and Peri-LN: X_{l+1} = z_l, so τ(z_l) = τ(X_{l+1}).
    for recipe in ["pre", "peri"] {
        let p = init_probe(recipe, 3);
        for w in p.sublayers.windows(2) {
            assert!((w[0].tau_sum - w[1].tau).abs() < 1e-5, "{recipe} l = {}: {w:?}", w[0].l);
        }
        assert!((p.sublayers.last().unwrap().tau_sum - p.final_tau).abs() < 1e-5, "{recipe}: last z is the last X");
    }
    // Post-norm: X_{l+1} = LN(z_l) re-centres every token, which moves τ.
    let p = init_probe("post", 3);
    let gap = p.sublayers.windows(2).map(|w| (w[0].tau_sum - w[1].tau).abs()).fold(0.0, f64::max);
    assert!(gap > 1e-4, "post: τ(z_l) and τ(LN(z_l)) differ ({gap})");
}

#[test]
fn angular_distance_of_x_and_minus_x_is_one() {
    let x = t3(&[1., 2., 3., -1., 0.5, 2.], [1, 2, 3]);
    let neg = t3(&[-1., -2., -3., 1., -0.5, -2.], [1, 2, 3]);
    // f32 cosines: acos near −1 turns a rounding of 6e-8 into ≈1e-4.
    assert!((angular_distance(&vals(cosines(x.clone(), neg))) - 1.0).abs() < 1e-3);
    assert!(angular_distance(&vals(cosines(x.clone(), x))).abs() < 1e-3);
    let a = t3(&[1., 0.], [1, 1, 2]);
    let b = t3(&[0., 5.], [1, 1, 2]);
    assert!((angular_distance(&vals(cosines(a, b))) - 0.5).abs() < 1e-7);
}

#[test]
fn fit_statistics_by_hand() {
    let f = fit(&[1.0, 2.0, 4.0], &[1.0, 2.0, 3.0]);
    // SS_res = 1, SS_tot = 2 → R² = 0.5; RMSE = √(1/3).
    assert!((f.r2 - 0.5).abs() < 1e-12 && (f.rmse - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
    assert!((f.spearman - 1.0).abs() < 1e-12, "monotone");
    // Pearson of (1,2,4) and (1,2,3): deviations (−4/3, −1/3, 5/3) and (−1, 0, 1), so
    // Σ products = 3, Σ squares = 42/9 and 2: r = 3 / √(84/9) = 0.98198….
    assert!((f.pearson - 0.981_980_506_061_965_7).abs() < 1e-12, "{}", f.pearson);
    assert_eq!(ranks(&[10.0, 20.0, 20.0, 30.0]), [1.0, 2.5, 2.5, 4.0]);
    let p = fit(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]);
    assert!(p.rmse == 0.0 && p.r2 == 1.0 && (p.pearson - 1.0).abs() < 1e-12);
}

#[test]
fn gradient_grouping_cv_and_spikes() {
    assert_eq!(sublayer_of("layers.3.attn.f.wq"), Some(6));
    assert_eq!(sublayer_of("layers.3.ffn.output_norm.gain"), Some(7));
    assert_eq!(sublayer_of("tok_emb"), None);
    assert_eq!(sublayer_of("final_norm.gain"), None);
    let mut tr = GradTracker::new(2, 3, 128, 6.0);
    for x in [1.0, 2.0, 3.0] {
        tr.observe(0, x, &[("layers.0.attn.f.wq".into(), x)]);
    }
    // [1, 2, 3]: mean 2, population std √(2/3) → CV 0.4082.
    assert!((tr.sublayers[0].cv_run() - (2.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-12);
    assert!((tr.sublayers[0].cv_window() - tr.sublayers[0].cv_run()).abs() < 1e-12);
    let mut tr = GradTracker::new(2, 10, 128, 6.0);
    for i in 0..40 {
        assert_eq!(tr.observe(i, if i % 2 == 0 { 1.0 } else { 1.1 }, &[]), None, "no spike while the history builds");
    }
    // History mean 1.05, std 0.05 → threshold 1.35.
    assert_eq!(tr.observe(40, 1.3, &[]), None);
    let sp = tr.observe(41, 5.0, &[]).expect("a spike");
    let mut hist: Vec<f64> = (0..40).map(|i| if i % 2 == 0 { 1.0 } else { 1.1 }).collect();
    hist.push(1.3);
    let m = hist.iter().sum::<f64>() / 41.0;
    let sd = (hist.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 41.0).sqrt();
    assert!((sp.threshold - (m + 6.0 * sd)).abs() < 1e-12, "mean + 6σ of the previous values");
    assert_eq!(tr.spikes.len(), 1);
}

fn init_probe(recipe: &str, layers: usize) -> super::ForwardProbe {
    let cfg = ModelConfig {
        d_model: 64,
        n_layers: layers,
        n_heads: 4,
        recipe: RecipeConfig::Preset(recipe.into()),
        ..Default::default()
    };
    let model = Transformer::new(&cfg, ParamSource::Seeded(7), &cpu()).unwrap();
    let mut rng = crate::rng::SplitMix64::new(1);
    let toks: Vec<i64> = (0..8 * 64).map(|_| (rng.next_u64() % 256) as i64).collect();
    forward_probe(&model, Tensor::<2, Int>::from_data(TensorData::new(toks, [8, 64]), &cpu()), 4)
}

#[test]
fn at_initialisation_post_is_flat_and_pre_grows_with_depth() {
    // The Peri-LN paper's §3.2: post-norm re-normalises every sublayer, so Var(X_l) stays ≈ 1 (γ = 1);
    // pre-norm adds a branch of roughly constant variance per sublayer, so Var(X_l) grows
    // about linearly in l.
    let post = init_probe("post", 16);
    let v: Vec<f64> = post.sublayers.iter().skip(1).map(|p| p.x.var).collect();
    assert!(v.iter().all(|&x| (x - 1.0).abs() < 0.01), "post: {v:?}");
    let pre = init_probe("pre", 16);
    let v: Vec<f64> = pre.sublayers.iter().map(|p| p.x.var).collect();
    let l: Vec<f64> = (1..=v.len()).map(|i| i as f64).collect();
    let per_layer: Vec<f64> = v.iter().step_by(2).copied().collect();
    assert!(per_layer.windows(2).all(|w| w[1] > w[0]), "pre increases layer by layer: {v:?}");
    assert!(super::fit::pearson(&l, &v) > 0.98, "pre ≈ linear in l: {v:?}");
    assert!(v[31] > 10.0 * v[1], "{v:?}");
    // The Jacobian bound exists exactly where a norm sits on the residual path.
    assert!(post.sublayers.iter().all(|p| p.jacobian_bound.is_some()));
    assert!(pre.sublayers.iter().all(|p| p.jacobian_bound.is_none()));
    // Post: γ = 1, so the bound is the mean of 1/σ(z_l) over tokens.
    let b = post.sublayers[5].jacobian_bound.unwrap();
    assert!(b > 0.0 && (b - 1.0 / post.sublayers[5].z.var.sqrt()).abs() < 0.2 * b, "{b}");
    assert!(
        post.sublayers
            .iter()
            .filter(|p| p.branch == crate::recipe::Branch::Attn)
            .all(|p| p.attn_entropy.unwrap() > 0.0)
    );
}

#[test]
fn bhyt_approximation_is_compared_with_the_exact_statistic() {
    let p = init_probe("bhyt", 4);
    let f = p.variance_fit.expect("bhyt probes its variance approximation");
    assert_eq!(f.n, 4 * 8 * 64, "one value per token in each FFN sublayer");
    assert!(p.sublayers.iter().filter(|s| s.branch == crate::recipe::Branch::Ffn).all(|s| s.variance_fit.is_some()));
    assert!(f.pearson > 0.5, "{f:?}");
    assert!(init_probe("pre", 2).variance_fit.is_none());
}
