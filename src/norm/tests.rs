//! Norm layers against independent truth: the LayerNorm tutorial's worked numbers, the formulas computed by
//! hand in plain f64, and central finite differences of every input and parameter gradient.

use super::*;
use crate::testutil::*;
use burn::tensor::Tensor;

fn t1(v: &[f64]) -> Tensor<1> {
    f64_tensor(v, [v.len()], false)
}

#[test]
fn layer_norm_matches_the_layernorm_tutorials_worked_example() {
    // The LayerNorm tutorial: LayerNorm([3, 1, −1, 5]) = [0.45, −0.45, −1.34, 1.34] (mean 2, variance 5).
    let x = f64_tensor(&[3.0, 1.0, -1.0, 5.0], [1, 4], false);
    let y = values(layer_norm(x, None, None, 0.0));
    for (got, want) in y.iter().zip([0.45, -0.45, -1.34, 1.34]) {
        assert!((got - want).abs() < 0.005, "{got} vs {want}");
    }
    // Exact values: (x − 2)/√5.
    for (got, x) in y.iter().zip([3.0, 1.0, -1.0, 5.0]) {
        assert!((got - (x - 2.0) / 5f64.sqrt()).abs() < 1e-12);
    }
}

#[test]
fn rms_norm_matches_the_layernorm_tutorials_worked_example() {
    // The LayerNorm tutorial: RMSNorm([3, 1, −1, 5]) = [1.0, 0.333, −0.333, 1.667] (RMS = √9 = 3).
    let x = f64_tensor(&[3.0, 1.0, -1.0, 5.0], [1, 4], false);
    let y = values(rms_norm(x, None, 0.0));
    for (got, want) in y.iter().zip([1.0, 1.0 / 3.0, -1.0 / 3.0, 5.0 / 3.0]) {
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
}

#[test]
fn gain_shift_and_eps_enter_as_in_the_formula() {
    let x = [3.0, 1.0, -1.0, 5.0];
    let g = [0.5, 2.0, -1.0, 1.5];
    let b = [0.1, 0.2, 0.3, 0.4];
    let eps = 0.25;
    let y = values(layer_norm(f64_tensor(&x, [1, 4], false), Some(t1(&g)), Some(t1(&b)), eps));
    for i in 0..4 {
        let want = g[i] * (x[i] - 2.0) / (5.0f64 + eps).sqrt() + b[i];
        assert!((y[i] - want).abs() < 1e-12);
    }
    // Scalarised LayerNorm: one γ′ and β′ for all features (KiteNorm eq. 4).
    let y = values(layer_norm(f64_tensor(&x, [1, 4], false), Some(t1(&[3.0])), Some(t1(&[-1.0])), 0.0));
    for i in 0..4 {
        assert!((y[i] - (3.0 * (x[i] - 2.0) / 5f64.sqrt() - 1.0)).abs() < 1e-12);
    }
    let y = values(rms_norm(f64_tensor(&x, [1, 4], false), Some(t1(&g)), eps));
    for i in 0..4 {
        assert!((y[i] - g[i] * x[i] / (9.0f64 + eps).sqrt()).abs() < 1e-12);
    }
}

#[test]
fn dyt_and_bhyt_match_their_formulas() {
    let x = [3.0, 1.0, -1.0, 5.0];
    let g = [0.5, 2.0, -1.0, 1.5];
    let b = [0.1, 0.2, 0.3, 0.4];
    let y = values(dyt(f64_tensor(&x, [1, 4], false), t1(&[0.5]), Some(t1(&g)), Some(t1(&b))));
    for i in 0..4 {
        assert!((y[i] - (g[i] * (0.5 * x[i]).tanh() + b[i])).abs() < 1e-12);
    }
    // BHyT*, eq. 1 with p = 0.99 → κ = 10: μ = 2, s = √5.
    assert!((kappa(0.99) - 10.0).abs() < 1e-9);
    let xt = f64_tensor(&x, [1, 4], false);
    let denom = bhyt_std_denominator(xt.clone(), 10.0, 0.0);
    let y = values(bhyt_star(xt.clone(), t1(&[2.0]), Some(t1(&g)), denom));
    for i in 0..4 {
        let want = g[i] * (2.0 * x[i] / (10.0 * 5f64.sqrt() + 2.0)).tanh();
        assert!((y[i] - want).abs() < 1e-12);
    }
    // RMS denominator (authors' code): κ √(mean x²) = 10·3.
    let denom = bhyt_rms_denominator(xt.clone(), 10.0, 0.0);
    let y = values(bhyt_star(xt, t1(&[2.0]), None, denom));
    for i in 0..4 {
        assert!((y[i] - (2.0 * x[i] / 30.0).tanh()).abs() < 1e-12);
    }
}

/// The BHyT paper's Proposition 3.1: |λx/(κ s + |μ|)| ≤ λ for at least a fraction p of the entries.
#[test]
fn bhyt_star_input_stays_within_lambda_with_probability_p() {
    let n = 4000;
    let x: Vec<f64> = pseudo_random(n, 3).iter().map(|u| 5.0 + 40.0 * u.powi(9)).collect(); // heavy-tailed, shifted
    let xt = f64_tensor(&x, [1, n], false);
    let lambda = 1.5;
    let scaled = values(xt.clone() * lambda / bhyt_std_denominator(xt, kappa(0.99), 0.0));
    let inside = scaled.iter().filter(|v| v.abs() <= lambda).count() as f64 / n as f64;
    assert!(inside >= 0.99, "fraction inside (−λ, λ): {inside}");
}

type NormFn = dyn Fn(Tensor<2>, &[Tensor<1>]) -> Tensor<2>;

/// Checks d/d(input) and d/d(every parameter) of `sum(w ⊙ norm(x))` against central differences
/// in f64.
fn check_grads(name: &str, param_values: &[Vec<f64>], f: &NormFn) {
    let (rows, d) = (3, 6);
    let x: Vec<f64> = pseudo_random(rows * d, 11).iter().map(|v| 2.0 * v + 0.3).collect();
    let w = pseudo_random(rows * d, 12);
    let mut inputs = vec![x];
    inputs.extend(param_values.iter().cloned());
    let eval = |vals: &[Vec<f64>], grad: bool| -> (Tensor<1>, Vec<Tensor<2>>, Vec<Tensor<1>>) {
        let x = f64_tensor(&vals[0], [rows, d], grad);
        let params: Vec<Tensor<1>> = vals[1..].iter().map(|p| f64_tensor(p, [p.len()], grad)).collect();
        let y = f(x.clone(), &params);
        let wt = f64_tensor(&w, [rows, d], false);
        let wt = if grad { wt.autodiff() } else { wt };
        ((y * wt).sum(), vec![x], params)
    };
    let (loss, xs, params) = eval(&inputs, true);
    let grads = loss.backward();
    let mut analytic = vec![values(xs[0].grad(&grads).expect("input grad"))];
    for p in &params {
        analytic.push(values(p.grad(&grads).expect("param grad")));
    }
    let scalar = |vals: &[Vec<f64>]| values(eval(vals, false).0)[0];
    for (i, a) in analytic.iter().enumerate() {
        let numeric = finite_diff(&inputs, i, 1e-6, &scalar);
        let err = rel_err(a, &numeric, 1e-8);
        let what = if i == 0 { "input".to_string() } else { format!("param {}", i - 1) };
        assert!(
            err < 1e-6,
            "{name}: gradient of {what} differs from finite differences: rel err {err:.2e}\n analytic {a:?}\n numeric \
                {numeric:?}"
        );
    }
}

#[test]
fn layer_norm_gradients_match_finite_differences() {
    let g = pseudo_random(6, 21).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>();
    let b = pseudo_random(6, 22);
    check_grads("LayerNorm", &[g, b], &|x, p| layer_norm(x, Some(p[0].clone()), Some(p[1].clone()), 1e-5));
    check_grads("scalarised LayerNorm", &[vec![1.3], vec![-0.2]], &|x, p| {
        layer_norm(x, Some(p[0].clone()), Some(p[1].clone()), 1e-5)
    });
}

#[test]
fn rms_norm_gradients_match_finite_differences() {
    let g = pseudo_random(6, 23).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>();
    check_grads("RMSNorm", &[g], &|x, p| rms_norm(x, Some(p[0].clone()), 1e-5));
}

#[test]
fn rms_norm_approx_matches_its_formula_and_finite_differences() {
    // The BHyT paper's Table 5's RMSNorm-Approx divides by a given variance instead of mean(x²):
    // x = [3, 1, −1, 5] with s² = 4 (mean(x²) would be 9), ε = 0.25, γ = [0.5, 2, −1, 1.5].
    let (x, g) = ([3.0, 1.0, -1.0, 5.0], [0.5, 2.0, -1.0, 1.5]);
    let y =
        values(rms_with_variance(f64_tensor(&x, [1, 4], false), f64_tensor(&[4.0], [1, 1], false), Some(t1(&g)), 0.25));
    for i in 0..4 {
        assert!((y[i] - g[i] * x[i] / 4.25f64.sqrt()).abs() < 1e-12, "{y:?}");
    }
    // With s² = mean(x²) it is RMSNorm exactly.
    let exact = values(rms_norm(f64_tensor(&x, [1, 4], false), Some(t1(&g)), 0.25));
    let given =
        values(rms_with_variance(f64_tensor(&x, [1, 4], false), f64_tensor(&[9.0], [1, 1], false), Some(t1(&g)), 0.25));
    assert!(exact.iter().zip(&given).all(|(a, b)| (a - b).abs() < 1e-12));
    let g = pseudo_random(6, 27).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>();
    check_grads("RMSNorm-Approx (given variance)", &[g, vec![0.8, 1.7, 2.5]], &|x, p| {
        rms_with_variance(x, p[1].clone().reshape([3, 1]), Some(p[0].clone()), 1e-5)
    });
}

#[test]
fn dyt_gradients_match_finite_differences() {
    let g = pseudo_random(6, 24).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>();
    let b = pseudo_random(6, 25);
    check_grads("DyT", &[vec![0.7], g, b], &|x, p| dyt(x, p[0].clone(), Some(p[1].clone()), Some(p[2].clone())));
}

#[test]
fn bhyt_gradients_match_finite_differences() {
    let g = pseudo_random(6, 26).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>();
    check_grads("BHyT* (std)", &[vec![2.0], g.clone()], &|x, p| {
        let denom = bhyt_std_denominator(x.clone(), 10.0, 1e-5);
        bhyt_star(x, p[0].clone(), Some(p[1].clone()), denom)
    });
    check_grads("BHyT* (rms)", &[vec![2.0], g.clone()], &|x, p| {
        let denom = bhyt_rms_denominator(x.clone(), 10.0, 1e-5);
        bhyt_star(x, p[0].clone(), Some(p[1].clone()), denom)
    });
    // With a supplied variance (the approximation path), the variance is a differentiable input.
    check_grads("BHyT (given variance)", &[vec![1.0], g, vec![0.8, 1.7, 2.5]], &|x, p| {
        let var = p[2].clone().reshape([3, 1]);
        bhyt_with_variance(x, var, p[0].clone(), Some(p[1].clone()), 10.0, 1e-5)
    });
}

/// RMSNorm-Approx's FFN-input norm, `γ ⊙ x/√(ŝ² + ε)` with a given ŝ², on its fused kernel
/// against its composite path (`model.kernels = "composite"`), in f32 over 70 rows × 37
/// channels (three parallel tasks of the kernel): the output and the gradients of x, γ and ŝ².
#[test]
fn rms_with_given_variance_fused_equals_composite() {
    use crate::kernels::Kernels;
    use burn::module::Param;
    use burn::tensor::TensorData;
    let (rows, d) = (70, 37);
    let x: Vec<f32> = pseudo_random(rows * d, 48).iter().map(|v| (2.0 * v) as f32).collect();
    let g: Vec<f32> = pseudo_random(d, 49).iter().map(|v| (1.0 + v) as f32).collect();
    let v: Vec<f32> = pseudo_random(rows, 50).iter().map(|a| (a.abs() + 0.2) as f32).collect();
    let w: Vec<f32> = pseudo_random(rows * d, 51).iter().map(|a| *a as f32).collect();
    let device = cpu().autodiff();
    let run = |k: Kernels| {
        let leaf = |vals: &[f32], shape: Vec<usize>| {
            Tensor::<2>::from_data(TensorData::new(vals.to_vec(), shape), &device).require_grad()
        };
        let (xt, vt) = (leaf(&x, vec![rows, d]), leaf(&v, vec![rows, 1]));
        let gain = Param::from_tensor(Tensor::<1>::from_data(TensorData::new(g.clone(), [d]), &device).require_grad());
        let n = RmsNorm { gain: Some(gain), eps: 1e-6 };
        let y = n.forward_with_variance(xt.clone(), vt.clone(), k);
        let wt = Tensor::<2>::from_data(TensorData::new(w.clone(), [rows, d]), &device);
        let grads = (y.clone() * wt).sum().backward();
        let dg = n.gain.as_ref().unwrap().val().grad(&grads).map(values).expect("∂γ");
        [values(y), values(xt.grad(&grads).expect("∂x")), dg, values(vt.grad(&grads).expect("∂v"))]
    };
    let (fused, composite) = (run(Kernels::Fused), run(Kernels::Composite));
    for (what, (a, b)) in ["y", "∂x", "∂γ", "∂v"].iter().zip(fused.iter().zip(&composite)) {
        let err = rel_err(a, b, 1e-3);
        assert!(err < 1e-5, "{what}: fused and composite differ by {err:e}");
    }
}

#[test]
fn seednorm_matches_its_formula_by_hand_and_finite_differences() {
    // x = [3, 1, −1, 5]: mean(x²) = 9, ε = 0.25 → x/√9.25; x·β with β = [0.1, 0, 0.2, −0.1] is
    // 0.3 − 0.2 − 0.5 = −0.4, tanh(−0.4) = −0.379949; gain = −0.379949·α + γ.
    let (x, g, a, b) = ([3.0, 1.0, -1.0, 5.0], [0.5, 2.0, -1.0, 1.5], [1.0, 0.5, 2.0, -1.0], [0.1, 0.0, 0.2, -0.1]);
    let y = values(seednorm(f64_tensor(&x, [1, 4], false), t1(&g), t1(&a), t1(&b), 0.25));
    let t = (-0.4f64).tanh();
    for i in 0..4 {
        let want = (t * a[i] + g[i]) * x[i] / 9.25f64.sqrt();
        assert!((y[i] - want).abs() < 1e-12, "{i}: {} vs {want}", y[i]);
    }
    // β = 0: RMSNorm whatever α.
    let rms = values(rms_norm(f64_tensor(&x, [1, 4], false), Some(t1(&g)), 0.25));
    let zero = values(seednorm(f64_tensor(&x, [1, 4], false), t1(&g), t1(&a), t1(&[0.0; 4]), 0.25));
    assert!(rms.iter().zip(&zero).all(|(p, q)| (p - q).abs() < 1e-12));
    let gamma = pseudo_random(6, 28).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>();
    let alpha = pseudo_random(6, 29).iter().map(|v| 1.0 + 0.3 * v).collect::<Vec<_>>();
    let beta = pseudo_random(6, 30).iter().map(|v| 0.2 * v).collect::<Vec<_>>();
    check_grads("SeeDNorm", &[gamma, alpha, beta], &|x, p| seednorm(x, p[0].clone(), p[1].clone(), p[2].clone(), 1e-5));
}
