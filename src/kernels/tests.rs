//! Each fused op against its formula evaluated by hand in plain f64, and every gradient
//! against central finite differences (f64, through the autodiff backend).

use super::*;
use crate::testutil::*;
use burn::tensor::{DType, TensorData};

/// `Σ w ⊙ y` for fixed pseudo-random weights: a scalar whose gradient reaches every output.
fn weighted<const D: usize>(y: Tensor<D>, seed: u64) -> Tensor<1> {
    let n = y.shape().num_elements();
    let w = Tensor::<1>::from_data(TensorData::new(pseudo_random(n, seed), [n]), (&y.device(), DType::F64));
    (y.reshape([n]) * w).sum()
}

fn scalar(t: Tensor<1>) -> f64 {
    values(t)[0]
}

/// Checks the autodiff gradient of `f` in each input against finite differences.
fn check_grads<const D: usize>(inputs: &[Vec<f64>], shapes: &[Vec<usize>], f: &dyn Fn(Vec<Tensor<D>>) -> Tensor<1>) {
    let make = |vals: &[Vec<f64>], grad: bool| -> Vec<Tensor<D>> {
        vals.iter().zip(shapes).map(|(v, s)| tensor_nd::<D>(v, s, grad)).collect()
    };
    let leaves = make(inputs, true);
    let grads = f(leaves.clone()).backward();
    for (i, leaf) in leaves.iter().enumerate() {
        let got = values(leaf.grad(&grads).expect("every input receives a gradient"));
        let want = finite_diff(inputs, i, 1e-6, &|v| scalar(f(make(v, false))));
        let err = rel_err(&got, &want, 1e-3);
        assert!(err < 1e-7, "input {i}: gradient off by {err:e}: {got:?} vs {want:?}");
    }
}

/// An f64 tensor of rank `D` with any shape (a lower-rank shape is padded with leading 1s).
fn tensor_nd<const D: usize>(v: &[f64], shape: &[usize], grad: bool) -> Tensor<D> {
    let mut dims = [1usize; D];
    dims[D - shape.len()..].copy_from_slice(shape);
    f64_tensor(v, dims, grad)
}

#[test]
fn norm_forward_matches_the_formula_by_hand() {
    let (rows, d) = (3, 5);
    let x = pseudo_random(rows * d, 1).iter().map(|v| 3.0 * v + 0.5).collect::<Vec<_>>();
    let g = pseudo_random(d, 2);
    let b = pseudo_random(d, 3);
    for centred in [true, false] {
        let y = values(norm_affine(
            f64_tensor(&x, [rows, d], false),
            Some(f64_tensor(&g, [d], false)),
            Some(f64_tensor(&b, [d], false)),
            0.1,
            centred,
        ));
        for r in 0..rows {
            let row = &x[r * d..(r + 1) * d];
            let mu = if centred { row.iter().sum::<f64>() / d as f64 } else { 0.0 };
            let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d as f64;
            for j in 0..d {
                let want = g[j] * (row[j] - mu) / (var + 0.1).sqrt() + b[j];
                assert!((y[r * d + j] - want).abs() < 1e-13, "centred={centred} row {r} col {j}");
            }
        }
    }
}

#[test]
fn norm_gradients_match_finite_differences() {
    let (rows, d) = (4, 6);
    let x = pseudo_random(rows * d, 4).iter().map(|v| 2.0 * v + 0.3).collect::<Vec<_>>();
    for (centred, glen, blen) in [(true, d, d), (false, d, 0), (true, 1, 1), (false, 1, 0), (true, 0, 0)] {
        let mut inputs = vec![x.clone()];
        let mut shapes = vec![vec![rows, d]];
        for (len, seed) in [(glen, 5), (blen, 6)] {
            if len > 0 {
                inputs.push(pseudo_random(len, seed).iter().map(|v| v + 1.0).collect());
                shapes.push(vec![len]);
            }
        }
        check_grads::<2>(&inputs, &shapes, &|t: Vec<Tensor<2>>| {
            let mut it = t.into_iter();
            let x = it.next().unwrap();
            let g = (glen > 0).then(|| it.next().unwrap().reshape([glen]));
            let b = (blen > 0).then(|| it.next().unwrap().reshape([blen]));
            weighted(norm_affine(x, g, b, 1e-2, centred), 7)
        });
    }
}

#[test]
fn swiglu_matches_its_formula_and_finite_differences() {
    let a = pseudo_random(12, 8).iter().map(|v| 4.0 * v).collect::<Vec<_>>();
    let b = pseudo_random(12, 9);
    let y = values(swiglu(f64_tensor(&a, [3, 4], false), f64_tensor(&b, [3, 4], false)));
    for i in 0..12 {
        let want = a[i] / (1.0 + (-a[i]).exp()) * b[i];
        assert!((y[i] - want).abs() < 1e-14);
    }
    check_grads::<2>(&[a, b], &[vec![3, 4], vec![3, 4]], &|t: Vec<Tensor<2>>| {
        weighted(swiglu(t[0].clone(), t[1].clone()), 10)
    });
}

#[test]
fn causal_softmax_matches_its_formula_and_finite_differences() {
    // T = 3 queries over S = 5 keys: 2 cached keys before the queries.
    let (t, s, scale) = (3, 5, 0.7);
    let x = pseudo_random(2 * t * s, 11).iter().map(|v| 3.0 * v).collect::<Vec<_>>();
    let p = values(causal_softmax(f64_tensor(&x, [2, t, s], false), scale));
    for r in 0..2 * t {
        let n = r % t + 1 + (s - t);
        let row = &x[r * s..(r + 1) * s];
        let z: f64 = row[..n].iter().map(|v| (scale * v).exp()).sum();
        for j in 0..s {
            let want = if j < n { (scale * row[j]).exp() / z } else { 0.0 };
            assert!((p[r * s + j] - want).abs() < 1e-15, "row {r} key {j}");
        }
    }
    check_grads::<3>(&[x], &[vec![2, t, s]], &|v: Vec<Tensor<3>>| weighted(causal_softmax(v[0].clone(), scale), 12));
}

#[test]
fn rope_rotates_each_half_pair_and_its_gradient_is_the_inverse_rotation() {
    let (b, t, n, h) = (2, 3, 2, 4);
    let x = pseudo_random(b * t * n * h, 13);
    let angles: Vec<f64> = (0..t * h / 2).map(|i| 0.3 * i as f64 + 0.1).collect();
    let cos: Vec<f64> = angles.iter().map(|a| a.cos()).collect();
    let sin: Vec<f64> = angles.iter().map(|a| a.sin()).collect();
    let tables = |v: &[f64]| f64_tensor(v, [t, h / 2], false);
    let y = values(rope(f64_tensor(&x, [b, t, n, h], false), tables(&cos), tables(&sin)));
    for i in 0..b * t * n {
        let pos = (i / n) % t;
        for k in 0..h / 2 {
            let (c, s) = (cos[pos * h / 2 + k], sin[pos * h / 2 + k]);
            let (x1, x2) = (x[i * h + k], x[i * h + h / 2 + k]);
            assert!((y[i * h + k] - (x1 * c - x2 * s)).abs() < 1e-15);
            assert!((y[i * h + h / 2 + k] - (x2 * c + x1 * s)).abs() < 1e-15);
        }
    }
    let (cs, sn) = (cos.clone(), sin.clone());
    check_grads::<4>(&[x], &[vec![b, t, n, h]], &move |v: Vec<Tensor<4>>| {
        let device = v[0].device();
        let table = |vals: &[f64]| {
            Tensor::<2>::from_data(TensorData::new(vals.to_vec(), [t, h / 2]), (&device.clone().inner(), DType::F64))
        };
        weighted(rope(v[0].clone(), table(&cs), table(&sn)), 14)
    });
}

#[test]
fn f32_kernels_agree_with_f64() {
    // The f32 path (lane sums, polynomial exp) against the same op in f64.
    let x = pseudo_random(8 * 64, 15).iter().map(|v| 5.0 * v).collect::<Vec<_>>();
    let f32_of = |v: &[f64], shape: [usize; 2]| {
        Tensor::<2>::from_data(TensorData::new(v.iter().map(|&a| a as f32).collect::<Vec<_>>(), shape), &cpu())
    };
    let pairs = [
        (
            values(norm_affine(f32_of(&x, [8, 64]), None, None, 1e-5, true)),
            values(norm_affine(f64_tensor(&x, [8, 64], false), None, None, 1e-5, true)),
        ),
        (
            values(swiglu(f32_of(&x, [8, 64]), f32_of(&x, [8, 64]))),
            values(swiglu(f64_tensor(&x, [8, 64], false), f64_tensor(&x, [8, 64], false))),
        ),
        (values(causal_softmax(f32_of(&x, [8, 64]), 0.5)), values(causal_softmax(f64_tensor(&x, [8, 64], false), 0.5))),
    ];
    for (i, (lo, hi)) in pairs.iter().enumerate() {
        let err = rel_err(lo, hi, 1e-6);
        assert!(err < 2e-6, "op {i}: f32 off by {err:e}");
    }
}
