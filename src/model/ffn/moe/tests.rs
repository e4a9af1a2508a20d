//! The MoE block against transformers' own modules (tools/make_moe_fixtures.py, float64):
//! `OlmoeSparseMoeBlock`, `Qwen3MoeSparseMoeBlock`, `MixtralSparseMoeBlock` and `DeepseekV3MoE`
//! with their routers, from the same weights and input — the chosen experts exactly, the output
//! within 1e-5 relative, and every gradient (input, router, experts, shared expert) of
//! `Σ out·r + 0.01·balance + 0.001·router_z` within 1e-4 relative, the balancing loss being
//! transformers' `load_balancing_loss_func`. Then DeepSeek V3's bias update over six steps
//! against the fixture's, written from the technical report. normlab's parameters are f32, so
//! the tolerances are f32's against float64.

use crate::init::{ParamBuilder, ParamSource};
use crate::io::tensors;
use crate::kernels::Kernels;
use crate::model::base::compute::Compute;
use crate::model::base::params::named_grads;
use crate::model::base::records::Records;
use crate::model::ffn::dense::FfnShape;
use crate::model::ffn::kinds::FfnKind;
use crate::model::ffn::moe::balance::{AuxForm, ROUTING, RouterRecord, balance_loss, router_z_loss, update_bias};
use crate::model::ffn::moe::block::{Moe, MoeShape};
use crate::model::ffn::moe::router::Router;
use crate::testutil::cpu;
use burn::tensor::{DType, Tensor, TensorData};
use std::collections::BTreeMap;

type Fixture = BTreeMap<String, TensorData>;

fn fixture(name: &str) -> (Fixture, serde_json::Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/moe").join(name);
    let file = tensors::read(&path).unwrap();
    let config = serde_json::from_str(&file.metadata["config"]).unwrap();
    (file.tensors, config)
}

fn floats(d: &TensorData) -> Vec<f64> {
    d.clone().convert::<f64>().try_to_vec::<f64>().unwrap()
}

/// max |a − b| over max |b|.
fn rel(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale
}

/// The router a fixture's config names.
fn router_of(c: &serde_json::Value) -> Router {
    let normalize = c["normalize_top_k"].as_bool().unwrap();
    match c["router"].as_str().unwrap() {
        "softmax-topk" => Router::SoftmaxTopk { normalize },
        "topk-softmax" => Router::TopkSoftmax,
        "sigmoid" => Router::Sigmoid {
            groups: c["groups"].as_u64().unwrap() as usize,
            top_groups: c["top_groups"].as_u64().unwrap() as usize,
            normalize,
            scale: c["routed_scale"].as_f64().unwrap(),
            bias_update: 0.0,
        },
        other => panic!("unknown router {other}"),
    }
}

/// The block of a fixture's config, its weights loaded (the fixture's `router.bias` is
/// DeepSeek's `e_score_correction_bias`, normlab's `selection_bias`).
fn block(f: &Fixture, c: &serde_json::Value, device: &burn::tensor::Device) -> Moe {
    let (experts, shared) = (c["experts"].as_u64().unwrap() as usize, c["shared"].as_u64().unwrap_or(0) as usize);
    let names = |n: &String| n.starts_with("router.") || n.starts_with("experts.") || n.starts_with("shared.");
    let mut weights: Fixture =
        f.iter().filter(|(n, _)| names(n)).map(|(n, d)| (format!("moe.{n}"), d.clone())).collect();
    if let Some(b) = weights.remove("moe.router.bias") {
        weights.insert("moe.selection_bias".into(), b);
    }
    if let Some(w) = weights.remove("moe.router.weight") {
        weights.insert("moe.router".into(), w);
    }
    let d = f["x"].shape()[2];
    let expert = FfnShape {
        kind: FfnKind::Glu,
        d_model: d,
        d_ff: c["d_expert"].as_u64().unwrap() as usize,
        std: 0.02,
        init_in: 1.0,
        init_out: 1.0,
        suv: None,
        lora: None,
    };
    let shape = MoeShape {
        expert,
        experts,
        top_k: c["top_k"].as_u64().unwrap() as usize,
        shared,
        router: router_of(c),
        norms: Default::default(),
        capacity: None,
    };
    let mut b = ParamBuilder::new(device, ParamSource::Loaded(weights));
    let moe = Moe::new(shape, &mut b, "moe").unwrap();
    b.finish().unwrap();
    moe
}

fn tensor<const D: usize>(d: &TensorData, device: &burn::tensor::Device) -> Tensor<D> {
    Tensor::from_data(d.clone(), (device, DType::F32))
}

fn chosen(f: &Fixture, key: &str) -> Vec<usize> {
    f[key].clone().convert::<i64>().try_to_vec::<i64>().unwrap().into_iter().map(|i| i as usize).collect()
}

#[test]
fn moe_blocks_match_transformers() {
    for case in ["olmoe", "qwen3-moe", "mixtral", "deepseek-v3"] {
        let (f, c) = fixture(&format!("{case}.safetensors"));
        let device = cpu().autodiff();
        let moe = block(&f, &c, &device);
        let x = tensor::<3>(&f["x"], &device).require_grad();
        let routing = routing_records();
        let compute = Compute::for_device(Kernels::default(), &device);
        let out = moe.forward(x.clone(), &compute, &routing);
        let records = routing.take(ROUTING);
        // A fixture without `aux_form` holds transformers' `load_balancing_loss_func` (pooled).
        let form: AuxForm = serde_json::from_value(c.get("aux_form").cloned().unwrap_or("pooled".into())).unwrap();
        let objective = (out.clone() * tensor::<3>(&f["r"], &device)).sum()
            + balance_loss(&records, form) * 0.01
            + router_z_loss(&records) * 0.001;
        let want = |k: &str| floats(&f[k]);
        // As sets per token: DeepSeek's weights rank the chosen by σ(l), its selection by σ(l) + b.
        let sets = |v: Vec<usize>| v.chunks(2).map(|c| [c[0].min(c[1]), c[0].max(c[1])]).collect::<Vec<_>>();
        assert_eq!(sets(records[0].chosen.clone()), sets(chosen(&f, "topk_indices")), "{case}: chosen experts");
        let b = floats(&balance_loss(&records, form).into_data());
        assert!(rel(&b, &want("aux_loss")) < 1e-6, "{case}: balancing loss {b:?} vs {:?}", want("aux_loss"));
        let z = floats(&router_z_loss(&records).into_data());
        assert!(rel(&z, &want("z_loss")) < 1e-6, "{case}: router z {z:?} vs {:?}", want("z_loss"));
        let e = rel(&floats(&out.into_data()), &want("out"));
        assert!(e < 1e-5, "{case}: output off by {e:e}");
        let grads = objective.backward();
        let mut worst = 0.0f64;
        let gx = rel(&floats(&x.grad(&grads).unwrap().into_data()), &want("grad.x"));
        assert!(gx < 1e-4, "{case}: input gradient off by {gx:e}");
        for (name, g) in named_grads(&moe, &grads) {
            if name == "selection_bias" {
                assert!(g.is_none(), "{case}: the selection bias took a gradient");
                continue;
            }
            let key = if name == "router" { "grad.router.weight".to_string() } else { format!("grad.{name}") };
            let ours = g.map(|g| floats(&g)).unwrap_or_else(|| vec![0.0; want(&key).len()]);
            let err = rel(&ours, &want(&key));
            worst = worst.max(err);
            let unused = want(&key).iter().all(|v| *v == 0.0) && ours.iter().all(|v| *v == 0.0);
            assert!(err < 1e-4 || unused, "{case}: {name} off by {err:e}");
        }
        eprintln!("{case:12} output {e:.1e}  input gradient {gx:.1e}  worst parameter gradient {worst:.1e}");
    }
}

/// Two layers' balancing in each form against its source: transformers' function adds their
/// counts and probabilities over all rows before the product (pooled), megablocks'
/// `batched_load_balancing_loss` averages the layers' own losses (per-layer), and DeepSeek
/// V3's sequence-wise form (with softmax probabilities) averages over sequences and layers.
#[test]
fn balancing_over_layers_matches_each_source() {
    let (f, c) = fixture("olmoe.safetensors");
    let device = cpu();
    let router = Router::SoftmaxTopk { normalize: false };
    let t = c["seq"].as_u64().unwrap() as usize;
    let record = |key: &str| {
        let host = floats(&f[key]);
        let logits = tensor::<2>(&f[key], &device);
        let routing = router.route(&host, router.scores(logits.clone()), &[], 2);
        RouterRecord::new(logits.clone(), router.probabilities(logits), &host, routing, t)
    };
    let records = [record("aux2.logits_a"), record("aux2.logits_b")];
    for (form, key) in
        [(AuxForm::Pooled, "aux2.loss"), (AuxForm::PerLayer, "aux2.per_layer"), (AuxForm::Sequence, "aux2.sequence")]
    {
        let e = rel(&floats(&balance_loss(&records, form).into_data()), &floats(&f[key]));
        assert!(e < 1e-6, "two-layer {} balancing loss off by {e:e}", form.name());
    }
}

/// By hand, the per-layer and sequence forms at the extremes: 2 sequences of 2 tokens, 2
/// experts, top 1. Every token to expert 0 with probabilities (1, 0): per layer E/(N·k)·c₀·P₀ =
/// 2/4 · 4 · 1 = 2 (the most imbalanced load gives E); an even load with uniform
/// probabilities gives 1 in both forms. Sequence by sequence: sequence 0 all to expert 0,
/// sequence 1 all to expert 1, with probabilities equal to the choices: each sequence 2, so 2,
/// while over the whole batch (per layer) the load is even and the loss 1.
#[test]
fn per_layer_and_sequence_forms_by_hand() {
    // The logits feed only the record's statistics, not these losses.
    let record = |probs: [f64; 8], chosen: Vec<usize>| {
        let p = crate::testutil::f64_tensor(&probs, [4, 2], false);
        let routing = crate::model::ffn::moe::router::Routing { chosen, weights: p.clone().narrow(1, 0, 1) };
        RouterRecord::new(p.zeros_like(), p, &[0.0; 8], routing, 2)
    };
    let loss = |r: &RouterRecord, form| floats(&balance_loss(std::slice::from_ref(r), form).into_data())[0];
    let all_to_0 = record([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], vec![0, 0, 0, 0]);
    assert!((loss(&all_to_0, AuxForm::PerLayer) - 2.0).abs() < 1e-12);
    let even = record([0.5; 8], vec![0, 1, 0, 1]);
    for form in [AuxForm::PerLayer, AuxForm::Sequence] {
        assert!((loss(&even, form) - 1.0).abs() < 1e-12, "{}", form.name());
    }
    let split = record([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0], vec![0, 0, 1, 1]);
    assert!((loss(&split, AuxForm::Sequence) - 2.0).abs() < 1e-12);
    assert!((loss(&split, AuxForm::PerLayer) - 1.0).abs() < 1e-12);
}

/// The sigmoid router's balancing reads DeepSeek V3's normalised scores `σ(l)/Σσ(l)`, which
/// sum to 1 however low the logits: at logits 60 below a case's (every σ < 1e-20, where an ε of
/// 1e-20 in the denominator would shrink the loss towards 0), the loss is the one computed by
/// hand in f64 from the shifted logits, and a row's probabilities still sum to 1.
#[test]
fn sigmoid_balancing_cannot_be_lowered_by_pushing_scores_to_zero() {
    let router = Router::Sigmoid { groups: 1, top_groups: 1, normalize: true, scale: 1.0, bias_update: 0.0 };
    let base = [0.3, -1.2, 2.0, 0.1, -0.4, 0.9, 1.5, -2.2];
    let (e, n, k) = (4, 2, 2);
    for shift in [0.0, -60.0, -120.0] {
        let l: Vec<f64> = base.iter().map(|v| v + shift).collect();
        let logits = crate::testutil::f64_tensor(&l, [n, e], false);
        let routing = router.route(&l, router.scores(logits.clone()), &[0.0; 4], k);
        let chosen = routing.chosen.clone();
        let r = RouterRecord::new(logits.clone(), router.probabilities(logits), &l, routing, n);
        // By hand: s' = σ(l)/Σσ(l) per row, from log σ(x) in f64.
        let lsig = |x: f64| if x > 0.0 { -(-x).exp().ln_1p() } else { x - x.exp().ln_1p() };
        let mut p = vec![0.0; e];
        for row in l.chunks(e) {
            let m = row.iter().map(|&x| lsig(x)).fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = row.iter().map(|&x| (lsig(x) - m).exp()).sum();
            row.iter().enumerate().for_each(|(i, &x)| p[i] += (lsig(x) - m).exp() / z / n as f64);
        }
        let mut c = vec![0.0; e];
        chosen.iter().for_each(|&i| c[i] += 1.0);
        let want = e as f64 / (n * k) as f64 * c.iter().zip(&p).map(|(a, b)| a * b).sum::<f64>();
        let got = floats(&balance_loss(&[r], AuxForm::PerLayer).into_data())[0];
        assert!((got - want).abs() < 1e-9 && want > 0.5, "shift {shift}: {got} vs {want}");
    }
}

/// DeepSeek V3's aux-loss-free balancing: six steps, each routing its own input with the bias
/// so far, its load and the bias after the update as the fixture's.
#[test]
fn bias_update_follows_deepseek_v3() {
    let (steps, _) = fixture("bias-update.safetensors");
    let (f, c) = fixture("deepseek-v3.safetensors");
    let device = cpu();
    let mut moe = block(&f, &c, &device);
    moe.router = moe.router.map(|_| tensor::<2>(&steps["router.weight"], &device));
    moe.selection_bias = moe.selection_bias.map(|b| b.map(|_| tensor::<1>(&steps["bias0"], &device)));
    let gamma = floats(&steps["gamma"])[0];
    let compute = Compute::for_device(Kernels::default(), &device);
    for s in 0..6 {
        let x = tensor::<2>(&steps[&format!("steps.{s}.x")], &device).unsqueeze::<3>();
        let routing = routing_records();
        moe.forward(x, &compute, &routing);
        let load = routing.take(ROUTING).remove(0).load;
        assert_eq!(load, floats(&steps[&format!("steps.{s}.counts")]), "step {s}: load");
        let bias = moe.selection_bias.take().unwrap();
        moe.selection_bias = Some(bias.map(|b| update_bias(b, &load, gamma)));
        let ours = floats(&moe.selection_bias.as_ref().unwrap().val().into_data());
        let e = rel(&ours, &floats(&steps[&format!("steps.{s}.bias")]));
        assert!(e < 1e-6, "step {s}: bias off by {e:e}");
    }
}

/// Under a capacity factor, by the fixture: Mixtral's 10 tokens × top 2 over 8 experts at
/// c = 0.5 leave each expert ⌈0.5·20/8⌉ = 2 pairs in a training forward, first choices before
/// second ones (GShard's priority); a token none of whose pairs was dropped has transformers'
/// output, one whose pairs were both dropped has 0, and a factor that drops nothing gives the
/// dropless output exactly. Without autodiff (evaluation, decoding) nothing is dropped.
#[test]
fn capacity_drops_the_lower_priority_pairs_of_a_full_expert_in_training_only() {
    let (f, c) = fixture("mixtral.safetensors");
    let run = |capacity: Option<f64>, device: &burn::tensor::Device| {
        let compute = Compute::for_device(Kernels::default(), device);
        let moe = Moe { capacity, ..block(&f, &c, device) };
        let routing = routing_records();
        let out = floats(&moe.forward(tensor::<3>(&f["x"], device), &compute, &routing).into_data());
        (out, routing.take(ROUTING).remove(0))
    };
    let training = cpu().autodiff();
    let (dropless, _) = run(None, &training);
    assert_eq!(run(Some(100.0), &training).0, dropless);
    let (evaluated, record) = run(Some(0.5), &cpu());
    assert_eq!((evaluated, record.dropped), (run(None, &cpu()).0, 0), "an evaluation forward drops nothing");
    let (out, record) = run(Some(0.5), &training);
    let chosen = chosen(&f, "topk_indices");
    // By GShard's priority: all first choices (slot 0) in token order, then all second ones.
    let mut seen = [0usize; 8];
    let mut kept = [0usize; 10];
    for p in (0..20).map(|i| (i % 10) * 2 + i / 10) {
        if seen[chosen[p]] < 2 {
            kept[p / 2] += 1;
        }
        seen[chosen[p]] += 1;
    }
    assert_eq!(record.dropped, kept.iter().map(|k| 2 - k).sum::<usize>());
    assert!(record.dropped > 0, "the case drops something");
    let want = floats(&f["out"]);
    for (t, &k) in kept.iter().enumerate() {
        let (ours, theirs) = (&out[t * 16..(t + 1) * 16], &want[t * 16..(t + 1) * 16]);
        match k {
            2 => assert!(rel(ours, theirs) < 1e-5, "token {t}"),
            0 => assert!(ours.iter().all(|v| *v == 0.0), "token {t}"),
            _ => {}
        }
    }
}

/// Records that collect every MoE layer's routing.
fn routing_records() -> Records {
    let mut r = Records::default();
    r.collect(ROUTING);
    r
}
