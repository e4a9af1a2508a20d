//! Every norm kind's fused GPU kernel (`kernels::gpu`) against its composite formula, on the
//! same GPU device in f32: the output and the gradient of every input (x, γ, β, λ, v) of
//! `Σ w ⊙ y` for fixed positive pseudo-random `w`, the composite's gradients by burn's autodiff
//! of the formula. Rows 6; widths 48 (fewer features than a cube's 64 units) and 300 (more than its
//! 256: each unit strides).

use burn::tensor::{Device, Tensor, TensorData};
use normlab::kernels::{self, Denominator, Kernels, TanhNorm};
use normlab::norm;

/// Pseudo-random values in [−1, 1) (xorshift; fixed by `seed`).
pub fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// `n` values around `centre` with spread `spread`.
pub fn around(n: usize, seed: u64, centre: f32, spread: f32) -> Vec<f32> {
    noise(n, seed).into_iter().map(|v| centre + spread * v).collect()
}

type NormFn = dyn Fn(Vec<Tensor<1>>) -> Tensor<3>;

/// The output and every input's gradient of `Σ w ⊙ f(inputs)`, flattened.
fn outputs(device: &Device, inputs: &[Vec<f32>], f: &NormFn) -> Vec<Vec<f32>> {
    let leaves: Vec<Tensor<1>> = inputs
        .iter()
        .map(|v| Tensor::<1>::from_data(TensorData::new(v.clone(), [v.len()]), device).require_grad())
        .collect();
    let y = f(leaves.clone());
    let n = y.shape().num_elements();
    // Positive weights: the scalar parameters' gradients are sums over every element, which
    // weights of both signs would cancel down to f32's rounding of the terms.
    let w = Tensor::<1>::from_data(TensorData::new(around(n, 99, 1.0, 0.5), [n]), device);
    let grads = (y.clone().reshape([n]) * w).sum().backward();
    let flat = |t: Tensor<1>| t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
    let mut out = vec![flat(y.reshape([n]))];
    for leaf in &leaves {
        out.push(flat(leaf.grad(&grads).expect("every input receives a gradient")));
    }
    out
}

/// Largest difference relative to the largest reference magnitude.
pub fn gap(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs())) / scale
}

fn agree(name: &str, device: &Device, inputs: &[Vec<f32>], fused: &NormFn, composite: &NormFn) {
    let (got, want) = (outputs(device, inputs, fused), outputs(device, inputs, composite));
    let mut worst = [0f32; 2];
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let what = if i == 0 { "output".to_string() } else { format!("gradient of input {}", i - 1) };
        let e = gap(g, w);
        // f32 summed in another order: ≈2e-7 on the outputs and ≈1e-6 on most gradients; a
        // scalar parameter's gradient sums all 1 800 elements' terms, which cancel (x̂ has
        // mean 0 in each row): up to 1.8e-5 for scalar LayerNorm's γ at d = 300 on lavapipe.
        let bound = if i == 0 { 2e-6 } else { 1e-4 };
        assert!(e < bound, "{name}: fused {what} leaves the composite by {e:.1e}");
        worst[usize::from(i > 0)] = worst[usize::from(i > 0)].max(e);
    }
    let n = got.len() - 1;
    eprintln!("{name}: fused = composite, output within {:.1e}, {n} gradients within {:.1e}", worst[0], worst[1]);
}

/// One norm kind: its name, its inputs after `x` (lengths and values), the fused call and
/// the composite formula, both given `x` as `[2, 3, d]` and the parameters as `[len]`.
struct Case {
    name: &'static str,
    params: Vec<Vec<f32>>,
    fused: Box<NormFn>,
    composite: Box<NormFn>,
}

fn vector(d: usize, seed: u64, centre: f32) -> Vec<f32> {
    around(d, seed, centre, 0.5)
}

/// The affine norms: LayerNorm and RMSNorm, vector and scalar, and LayerNorm without
/// parameters (Peri-LN's output norm with a frozen gain).
fn affine_cases(d: usize) -> Vec<Case> {
    let eps = 1e-5;
    let ln = move |t: Vec<Tensor<1>>, fused: bool| {
        let mut it = t.into_iter();
        let x = it.next().unwrap().reshape([2, 3, d]);
        let (g, b) = (it.next(), it.next());
        if fused { kernels::norm_affine(x, g, b, eps, true) } else { norm::layer_norm(x, g, b, eps) }
    };
    let rms = move |t: Vec<Tensor<1>>, fused: bool| {
        let mut it = t.into_iter();
        let x = it.next().unwrap().reshape([2, 3, d]);
        let g = it.next();
        if fused { kernels::norm_affine(x, g, None, eps, false) } else { norm::rms_norm(x, g, eps) }
    };
    vec![
        Case {
            name: "LayerNorm",
            params: vec![vector(d, 2, 1.0), vector(d, 3, 0.0)],
            fused: Box::new(move |t| ln(t, true)),
            composite: Box::new(move |t| ln(t, false)),
        },
        Case {
            name: "scalar LayerNorm",
            params: vec![vec![1.3], vec![-0.2]],
            fused: Box::new(move |t| ln(t, true)),
            composite: Box::new(move |t| ln(t, false)),
        },
        Case {
            name: "LayerNorm without parameters",
            params: vec![],
            fused: Box::new(move |t| ln(t, true)),
            composite: Box::new(move |t| ln(t, false)),
        },
        Case {
            name: "RMSNorm",
            params: vec![vector(d, 4, 1.0)],
            fused: Box::new(move |t| rms(t, true)),
            composite: Box::new(move |t| rms(t, false)),
        },
        Case {
            name: "scalar RMSNorm",
            params: vec![vec![0.8]],
            fused: Box::new(move |t| rms(t, true)),
            composite: Box::new(move |t| rms(t, false)),
        },
    ]
}

/// The tanh norms (DyT; BHyT with each denominator) and RMSNorm with a given second moment.
fn tanh_and_given_cases(d: usize) -> Vec<Case> {
    let (kappa, eps) = (1.7, 1e-5);
    let tanh = move |t: Vec<Tensor<1>>, denominator: Denominator| {
        let mut it = t.into_iter();
        let x = it.next().unwrap().reshape([2, 3, d]);
        let (lambda, g) = (it.next().unwrap(), it.next());
        let n = TanhNorm { denominator, kappa, eps };
        match denominator {
            Denominator::One => kernels::tanh_norm(x, lambda, g, it.next(), None, n),
            Denominator::Given => {
                let v = it.next().unwrap().reshape([2, 3, 1]);
                kernels::tanh_norm(x, lambda, g, None, Some(v), n)
            }
            _ => kernels::tanh_norm(x, lambda, g, None, None, n),
        }
    };
    let formula = move |t: Vec<Tensor<1>>, denominator: Denominator| {
        let mut it = t.into_iter();
        let x = it.next().unwrap().reshape([2, 3, d]);
        let (lambda, g) = (it.next().unwrap(), it.next());
        match denominator {
            Denominator::One => norm::dyt(x, lambda, g, it.next()),
            Denominator::Std => norm::bhyt_star(x.clone(), lambda, g, norm::bhyt_std_denominator(x, kappa, eps)),
            Denominator::Rms => norm::bhyt_star(x.clone(), lambda, g, norm::bhyt_rms_denominator(x, kappa, eps)),
            Denominator::Given => {
                let v = it.next().unwrap().reshape([2, 3, 1]);
                norm::bhyt_with_variance(x, v, lambda, g, kappa, eps)
            }
        }
    };
    let given_rms = move |t: Vec<Tensor<1>>, fused: bool| {
        let mut it = t.into_iter();
        let x = it.next().unwrap().reshape([2, 3, d]);
        let (g, v) = (it.next(), it.next().unwrap().reshape([2, 3, 1]));
        if fused { kernels::rms_given(x, g, v, eps) } else { norm::rms_with_variance(x, v, g, eps) }
    };
    let tanh_case = move |name, denominator, params| Case {
        name,
        params,
        fused: Box::new(move |t| tanh(t, denominator)),
        composite: Box::new(move |t| formula(t, denominator)),
    };
    let variance = around(6, 8, 1.5, 0.5);
    vec![
        tanh_case("DyT", Denominator::One, vec![vec![0.7], vector(d, 5, 1.0), vector(d, 6, 0.0)]),
        tanh_case("BHyT* (std and |mean|)", Denominator::Std, vec![vec![1.2], vector(d, 7, 1.0)]),
        tanh_case("BHyT (exact RMS)", Denominator::Rms, vec![vec![1.2], vector(d, 9, 1.0)]),
        tanh_case("BHyT (given variance)", Denominator::Given, vec![vec![1.2], vector(d, 10, 1.0), variance.clone()]),
        Case {
            name: "RMSNorm with a given variance",
            params: vec![vector(d, 11, 1.0), variance],
            fused: Box::new(move |t| given_rms(t, true)),
            composite: Box::new(move |t| given_rms(t, false)),
        },
    ]
}

/// Runs every case at width `d` on `device` (an autodiff GPU device).
pub fn check_every_kind(device: &Device, d: usize) {
    // Rows with means of either sign (BHyT*'s |μ| and its subgradient).
    let offsets = [-1.0, 0.8, -0.3, 1.5, 0.2, -2.0];
    let x: Vec<f32> = around(6 * d, 1, 0.0, 2.0).iter().enumerate().map(|(i, v)| v + offsets[i / d]).collect();
    let probe = Tensor::<1>::from_data(TensorData::new(x.clone(), [x.len()]), device);
    assert!(Kernels::Fused.fuse_norm(&probe), "the fused norms must run on this GPU device");
    for case in affine_cases(d).into_iter().chain(tanh_and_given_cases(d)) {
        let mut inputs = vec![x.clone()];
        inputs.extend(case.params);
        agree(&format!("{} (d = {d})", case.name), device, &inputs, &*case.fused, &*case.composite);
    }
}
