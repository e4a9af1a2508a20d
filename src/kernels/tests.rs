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
fn add_norm_matches_the_formula_by_hand() {
    // z = a·x + c·b row by row, then the affine norm of z.
    let (rows, d, [a, c]) = (3, 5, [0.7, 1.9]);
    let x = pseudo_random(rows * d, 21).iter().map(|v| 3.0 * v + 0.5).collect::<Vec<_>>();
    let br = pseudo_random(rows * d, 22);
    let (g, sh) = (pseudo_random(d, 23), pseudo_random(d, 24));
    for centred in [true, false] {
        let t = |v: &[f64], s: [usize; 2]| f64_tensor(v, s, false);
        let y = values(add_norm(
            t(&x, [rows, d]),
            t(&br, [rows, d]),
            [a, c],
            Some(f64_tensor(&g, [d], false)),
            Some(f64_tensor(&sh, [d], false)),
            0.1,
            centred,
        ));
        for r in 0..rows {
            let z: Vec<f64> = (0..d).map(|j| a * x[r * d + j] + c * br[r * d + j]).collect();
            let mu = if centred { z.iter().sum::<f64>() / d as f64 } else { 0.0 };
            let var = z.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d as f64;
            for j in 0..d {
                let want = g[j] * (z[j] - mu) / (var + 0.1).sqrt() + sh[j];
                assert!((y[r * d + j] - want).abs() < 1e-13, "centred={centred} row {r} col {j}");
            }
        }
    }
}

#[test]
fn add_norm_gradients_match_finite_differences() {
    // Both terms, vector and scalar parameters, with the scales at 1 (post) and not (KEEL).
    let (rows, d) = (4, 6);
    let x = pseudo_random(rows * d, 25).iter().map(|v| 2.0 * v + 0.3).collect::<Vec<_>>();
    let br = pseudo_random(rows * d, 26);
    for (centred, len, scales) in [(true, d, [1.0, 1.0]), (true, 1, [0.6, 1.7]), (false, d, [2.0, 0.5])] {
        let p = |seed| pseudo_random(len, seed).iter().map(|v| v + 1.0).collect::<Vec<_>>();
        let inputs = [x.clone(), br.clone(), p(27), p(28)];
        let shapes = [vec![rows, d], vec![rows, d], vec![len], vec![len]];
        check_grads::<2>(&inputs, &shapes, &|t: Vec<Tensor<2>>| {
            let [x, b, g, sh]: [Tensor<2>; 4] = t.try_into().unwrap();
            let (g, sh) = (Some(g.reshape([len])), Some(sh.reshape([len])));
            weighted(add_norm(x, b, scales, g, sh, 1e-2, centred), 29)
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

/// `D` of one row by hand, as the module table of [`super::tanh_norm`] states it.
fn denominator_by_hand(row: &[f64], v: f64, n: TanhNorm) -> f64 {
    let d = row.len() as f64;
    let mu = row.iter().sum::<f64>() / d;
    match n.denominator {
        Denominator::One => 1.0,
        Denominator::Std => n.kappa * (row.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / d + n.eps).sqrt() + mu.abs(),
        Denominator::Rms => n.kappa * (row.iter().map(|x| x * x).sum::<f64>() / d + n.eps).sqrt(),
        Denominator::Given => n.kappa * (v + n.eps).sqrt(),
    }
}

const TANH_CASES: [Denominator; 4] = [Denominator::One, Denominator::Std, Denominator::Rms, Denominator::Given];

#[test]
fn tanh_norm_matches_its_formula_by_hand() {
    let (rows, d) = (3, 5);
    let x = pseudo_random(rows * d, 21).iter().map(|v| 3.0 * v + 0.4).collect::<Vec<_>>();
    let (g, b) = (pseudo_random(d, 22), pseudo_random(d, 23));
    let v: Vec<f64> = pseudo_random(rows, 24).iter().map(|a| a.abs() + 0.5).collect();
    for den in TANH_CASES {
        let n = TanhNorm { denominator: den, kappa: 2.5, eps: 0.1 };
        let given = (den == Denominator::Given).then(|| f64_tensor(&v, [rows, 1], false));
        let y = values(tanh_norm(
            f64_tensor(&x, [rows, d], false),
            f64_tensor(&[0.7], [1], false),
            Some(f64_tensor(&g, [d], false)),
            Some(f64_tensor(&b, [d], false)),
            given,
            n,
        ));
        for r in 0..rows {
            let row = &x[r * d..(r + 1) * d];
            let den_r = denominator_by_hand(row, v[r], n);
            for j in 0..d {
                let want = g[j] * (0.7 * row[j] / den_r).tanh() + b[j];
                assert!((y[r * d + j] - want).abs() < 1e-14, "{den:?} row {r} col {j}: {} vs {want}", y[r * d + j]);
            }
        }
    }
}

#[test]
fn tanh_norm_gradients_match_finite_differences() {
    let (rows, d) = (3, 6);
    // A row with a negative mean, so that sign(μ) enters both ways.
    let x = pseudo_random(rows * d, 25)
        .iter()
        .enumerate()
        .map(|(i, v)| 2.0 * v + if i < d { -0.8 } else { 0.5 })
        .collect::<Vec<_>>();
    let v: Vec<f64> = pseudo_random(rows, 26).iter().map(|a| a.abs() + 0.3).collect();
    for den in TANH_CASES {
        let n = TanhNorm { denominator: den, kappa: 1.7, eps: 0.05 };
        let mut inputs = vec![x.clone(), vec![1.3], pseudo_random(d, 27), pseudo_random(d, 28)];
        let mut shapes = vec![vec![rows, d], vec![1], vec![d], vec![d]];
        if den == Denominator::Given {
            inputs.push(v.clone());
            shapes.push(vec![rows, 1]);
        }
        check_grads::<2>(&inputs, &shapes, &|t: Vec<Tensor<2>>| {
            let one = |t: &Tensor<2>, n: usize| t.clone().reshape([n]);
            let given = t.get(4).cloned();
            weighted(tanh_norm(t[0].clone(), one(&t[1], 1), Some(one(&t[2], d)), Some(one(&t[3], d)), given, n), 29)
        });
    }
}

#[test]
fn tanh_f32_and_its_derivative_are_accurate_across_their_range() {
    let (mut abs, mut rel_small, mut rel_sech2) = (0f64, 0f64, 0f64);
    for i in -30_000..30_000 {
        let z = i as f32 * 1e-3 + 1.3e-4;
        let (t, s) = super::simd::tanh_sech2_f32(z);
        let want = (z as f64).tanh();
        let want_s = 1.0 / (z as f64).cosh().powi(2);
        abs = abs.max((t as f64 - want).abs());
        if z.abs() < 0.0625 {
            rel_small = rel_small.max((t as f64 - want).abs() / want.abs());
        }
        if want_s > 1e-30 {
            rel_sech2 = rel_sech2.max((s as f64 - want_s).abs() / want_s);
        }
    }
    assert!(abs < 2e-7, "tanh: worst absolute error {abs:e}");
    assert!(rel_small < 1e-6, "tanh: worst relative error near 0: {rel_small:e}");
    assert!(rel_sech2 < 1e-6, "1 − tanh²: worst relative error {rel_sech2:e}");
}

#[test]
fn matmul_matches_the_definition_on_transposed_and_narrowed_views() {
    // A batch of 2: A = the first 3 rows of a [2, 4, 5] tensor, B = a [2, 2, 5] tensor read
    // transposed (the Q Kᵀ of a causal block); C_bij = Σ_l A_bil B_blj by hand.
    let (a, b) = (pseudo_random(2 * 4 * 5, 13), pseudo_random(2 * 2 * 5, 14));
    let at = f64_tensor(&a, [2, 4, 5], false).narrow(1, 0, 3);
    let bt = f64_tensor(&b, [2, 2, 5], false).swap_dims(1, 2);
    let c = values(matmul(at, bt));
    for (bi, i, j) in (0..2).flat_map(|bi| (0..3).flat_map(move |i| (0..2).map(move |j| (bi, i, j)))) {
        let want: f64 = (0..5).map(|l| a[bi * 20 + i * 5 + l] * b[bi * 10 + j * 5 + l]).sum();
        assert!((c[bi * 6 + i * 2 + j] - want).abs() < 1e-14, "[{bi}, {i}, {j}]");
    }
}

#[test]
fn matmul_gradients_match_finite_differences() {
    // 2-D (a projection) and batched with the right operand a transposed view.
    let (a, b) = (pseudo_random(12, 15), pseudo_random(20, 16));
    check_grads::<2>(&[a, b], &[vec![3, 4], vec![4, 5]], &|t: Vec<Tensor<2>>| {
        weighted(matmul(t[0].clone(), t[1].clone()), 17)
    });
    let (q, k) = (pseudo_random(2 * 3 * 4, 18), pseudo_random(2 * 5 * 4, 19));
    check_grads::<3>(&[q, k], &[vec![2, 3, 4], vec![2, 5, 4]], &|t: Vec<Tensor<3>>| {
        weighted(matmul(t[0].clone(), t[1].clone().swap_dims(1, 2)), 20)
    });
}

#[test]
fn matmul_gradient_reaches_only_tracked_operands() {
    // ∂(Σ W ⊙ XC)/∂C = Xᵀ W with X a constant: computed, and X gets none.
    let (x, c) = (pseudo_random(6, 21), pseudo_random(6, 22));
    let xt = f64_tensor(&x, [2, 3], false);
    let ct = f64_tensor(&c, [3, 2], true);
    let grads = matmul(xt.clone(), ct.clone()).sum().backward();
    assert!(xt.grad(&grads).is_none());
    let g = values(ct.grad(&grads).expect("C is tracked"));
    for (l, j) in (0..3).flat_map(|l| (0..2).map(move |j| (l, j))) {
        assert!((g[l * 2 + j] - (x[l] + x[3 + l])).abs() < 1e-14, "[{l}, {j}]");
    }
}

/// `softmax(s·q kᵀ + M) v` for one (batch, head) by the definition in f64: `q` `t × h`, `k`,
/// `v` `s × h` row-major, the first `s − t` keys cached (seen by every query).
fn attention_by_hand(q: &[f64], k: &[f64], v: &[f64], t: usize, s: usize, h: usize, scale: f64) -> Vec<f64> {
    let mut o = vec![0.0; t * h];
    for r in 0..t {
        let n = s - t + r + 1;
        let logits: Vec<f64> =
            (0..n).map(|j| scale * (0..h).map(|c| q[r * h + c] * k[j * h + c]).sum::<f64>()).collect();
        let m = logits.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        let z: f64 = logits.iter().map(|l| (l - m).exp()).sum();
        for (j, l) in logits.iter().enumerate() {
            for c in 0..h {
                o[r * h + c] += (l - m).exp() / z * v[j * h + c];
            }
        }
    }
    o
}

#[test]
fn causal_attention_matches_the_definition_over_blocks_and_cached_keys() {
    // 2 batch × 3 heads, T = 2 blocks + 7 queries after 5 cached keys, h = 3; the queries are
    // given in [B, T, H, h] storage (a strided view), as the model passes them.
    use super::attention::BLOCK;
    let (b, n, t, h, scale) = (2, 3, 2 * BLOCK + 7, 3, 0.8);
    let s = t + 5;
    let (q, k, v) =
        (pseudo_random(b * t * n * h, 21), pseudo_random(b * n * s * h, 22), pseudo_random(b * n * s * h, 23));
    let qt = f64_tensor(&q, [b, t, n, h], false).swap_dims(1, 2);
    let o =
        values(causal_attention(qt, f64_tensor(&k, [b, n, s, h], false), f64_tensor(&v, [b, n, s, h], false), scale));
    for (bi, hi) in (0..b).flat_map(|bi| (0..n).map(move |hi| (bi, hi))) {
        let qp: Vec<f64> =
            (0..t).flat_map(|r| (0..h).map(move |c| ((bi * t + r) * n + hi) * h + c)).map(|i| q[i]).collect();
        let kv = |x: &[f64]| x[(bi * n + hi) * s * h..][..s * h].to_vec();
        let want = attention_by_hand(&qp, &kv(&k), &kv(&v), t, s, h, scale);
        for r in 0..t {
            for c in 0..h {
                let got = o[((bi * n + hi) * t + r) * h + c];
                assert!(
                    (got - want[r * h + c]).abs() < 1e-13,
                    "pair ({bi}, {hi}) query {r}: {got} vs {}",
                    want[r * h + c]
                );
            }
        }
    }
}

#[test]
fn causal_attention_gradients_match_finite_differences() {
    // Two query blocks (the second partial) after 2 cached keys, q and v given transposed.
    use super::attention::BLOCK;
    let (b, n, t, h, scale) = (1, 2, BLOCK + 5, 2, 0.9);
    let s = t + 2;
    let inputs = [(24, t), (25, s), (26, s)].map(|(seed, rows)| pseudo_random(b * rows * n * h, seed)).to_vec();
    let shapes = vec![vec![b, t, n, h], vec![b, n, s, h], vec![b, s, n, h]];
    check_grads::<4>(&inputs, &shapes, &|x: Vec<Tensor<4>>| {
        let (q, v) = (x[0].clone().swap_dims(1, 2), x[2].clone().swap_dims(1, 2));
        weighted(causal_attention(q, x[1].clone(), v, scale), 27)
    });
}

#[test]
fn f32_causal_attention_agrees_with_f64() {
    // The f32 path (the AVX2 kernel's products, polynomial exp) against f64, forward and every
    // gradient, at the reference model's head width over 3 blocks.
    let (b, n, t, h) = (2, 2, 150, 64);
    let x: Vec<Vec<f64>> =
        (0..3).map(|i| pseudo_random(b * n * t * h, 30 + i).iter().map(|v| 2.0 * v).collect()).collect();
    let run = |dtype: DType| {
        let device = cpu().autodiff();
        let leaves: Vec<Tensor<4>> = x
            .iter()
            .map(|v| {
                Tensor::<4>::from_data(TensorData::new(v.clone(), [b, n, t, h]), (&device, DType::F64))
                    .cast(dtype)
                    .require_grad()
            })
            .collect();
        let o = causal_attention(leaves[0].clone(), leaves[1].clone(), leaves[2].clone(), 0.125);
        let grads = weighted(o.clone().cast(DType::F64), 33).backward();
        let mut out = vec![values(o)];
        out.extend(leaves.iter().map(|l| values(l.grad(&grads).expect("a gradient"))));
        out
    };
    for (i, (lo, hi)) in run(DType::F32).iter().zip(run(DType::F64)).enumerate() {
        let err = rel_err(lo, &hi, 1e-3);
        assert!(err < 2e-5, "output {i} (o, ∂q, ∂k, ∂v): f32 off by {err:e}");
    }
}

#[test]
fn rms_given_matches_its_formula_by_hand() {
    let (rows, d) = (3, 5);
    let x = pseudo_random(rows * d, 41).iter().map(|v| 3.0 * v + 0.4).collect::<Vec<_>>();
    let g = pseudo_random(d, 42);
    let v: Vec<f64> = pseudo_random(rows, 43).iter().map(|a| a.abs() + 0.5).collect();
    let y = values(rms_given(
        f64_tensor(&x, [rows, d], false),
        Some(f64_tensor(&g, [d], false)),
        f64_tensor(&v, [rows, 1], false),
        0.1,
    ));
    for r in 0..rows {
        for j in 0..d {
            let want = g[j] * x[r * d + j] / (v[r] + 0.1).sqrt();
            assert!((y[r * d + j] - want).abs() < 1e-14, "row {r} col {j}: {} vs {want}", y[r * d + j]);
        }
    }
}

#[test]
fn rms_given_gradients_match_finite_differences() {
    let (rows, d) = (4, 6);
    let x = pseudo_random(rows * d, 44).iter().map(|v| 2.0 * v + 0.3).collect::<Vec<_>>();
    let v: Vec<f64> = pseudo_random(rows, 45).iter().map(|a| a.abs() + 0.3).collect();
    let inputs = [x, pseudo_random(d, 46), v];
    let shapes = [vec![rows, d], vec![d], vec![rows, 1]];
    check_grads::<2>(&inputs, &shapes, &|t: Vec<Tensor<2>>| {
        weighted(rms_given(t[0].clone(), Some(t[1].clone().reshape([d])), t[2].clone(), 0.05), 47)
    });
}
