//! The MoE block against transformers' own modules (tools/make_moe_fixtures.py, float64):
//! `OlmoeSparseMoeBlock`, `Qwen3MoeSparseMoeBlock`, `MixtralSparseMoeBlock` and `DeepseekV3MoE`
//! with their routers, from the same weights and input — the chosen experts exactly, the output
//! within 1e-5 relative, and every gradient (input, router, experts, shared expert) of
//! `Σ out·r + 0.01·balance + 0.001·router_z` within 1e-4 relative, the balancing loss being
//! transformers' `load_balancing_loss_func`. Then DeepSeek V3's bias update over six steps
//! against the fixture's, written from the technical report. normlab's parameters are f32, so
//! the tolerances are f32's against float64.

use super::compute::Compute;
use super::ffn::FfnShape;
use super::ffn_kinds::FfnKind;
use super::moe::{Moe, MoeShape};
use super::moe_balance::{RouterRecord, balance_loss, router_z_loss, update_bias};
use super::moe_router::Router;
use super::params::named_grads;
use crate::init::{ParamBuilder, ParamSource};
use crate::io::tensors;
use crate::kernels::Kernels;
use crate::testutil::cpu;
use burn::tensor::{DType, Tensor, TensorData};
use std::cell::RefCell;
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
        let record = RefCell::new(Vec::new());
        let compute = Compute::for_device(Kernels::default(), &device);
        let out = moe.forward(x.clone(), &compute, Some(&record));
        let records = record.into_inner();
        let objective = (out.clone() * tensor::<3>(&f["r"], &device)).sum()
            + balance_loss(&records) * 0.01
            + router_z_loss(&records) * 0.001;
        let want = |k: &str| floats(&f[k]);
        // As sets per token: DeepSeek's weights rank the chosen by σ(l), its selection by σ(l) + b.
        let sets = |v: Vec<usize>| v.chunks(2).map(|c| [c[0].min(c[1]), c[0].max(c[1])]).collect::<Vec<_>>();
        assert_eq!(sets(records[0].chosen.clone()), sets(chosen(&f, "topk_indices")), "{case}: chosen experts");
        let b = floats(&balance_loss(&records).into_data());
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

/// transformers' function over two layers adds their counts and probabilities over all rows
/// before the product: not the mean of the two layers' losses.
#[test]
fn balancing_over_layers_matches_transformers() {
    let (f, _) = fixture("olmoe.safetensors");
    let device = cpu();
    let router = Router::SoftmaxTopk { normalize: false };
    let record = |key: &str| {
        let host = floats(&f[key]);
        let logits = tensor::<2>(&f[key], &device);
        let routing = router.route(&host, router.scores(logits.clone()), &[], 2);
        RouterRecord::new(logits, &host, routing, 8, 2)
    };
    let loss = balance_loss(&[record("aux2.logits_a"), record("aux2.logits_b")]);
    let e = rel(&floats(&loss.into_data()), &floats(&f["aux2.loss"]));
    assert!(e < 1e-6, "two-layer balancing loss off by {e:e}");
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
        let record = RefCell::new(Vec::new());
        moe.forward(x, &compute, Some(&record));
        let load = record.into_inner().remove(0).load;
        assert_eq!(load, floats(&steps[&format!("steps.{s}.counts")]), "step {s}: load");
        let bias = moe.selection_bias.take().unwrap();
        moe.selection_bias = Some(bias.map(|b| update_bias(b, &load, gamma)));
        let ours = floats(&moe.selection_bias.as_ref().unwrap().val().into_data());
        let e = rel(&ours, &floats(&steps[&format!("steps.{s}.bias")]));
        assert!(e < 1e-6, "step {s}: bias off by {e:e}");
    }
}

/// Under a capacity factor, by the fixture: Mixtral's 10 tokens × top 2 over 8 experts at
/// c = 0.5 leave each expert ⌈0.5·20/8⌉ = 2 pairs; a token none of whose pairs was dropped has
/// transformers' output, one whose pairs were both dropped has 0, and a factor that drops
/// nothing gives the dropless output exactly.
#[test]
fn capacity_drops_the_later_pairs_of_a_full_expert() {
    let (f, c) = fixture("mixtral.safetensors");
    let device = cpu();
    let compute = Compute::for_device(Kernels::default(), &device);
    let x = tensor::<3>(&f["x"], &device);
    let run = |capacity: Option<f64>| {
        let moe = Moe { capacity, ..block(&f, &c, &device) };
        let record = RefCell::new(Vec::new());
        let out = floats(&moe.forward(x.clone(), &compute, Some(&record)).into_data());
        (out, record.into_inner().remove(0))
    };
    let (dropless, _) = run(None);
    assert_eq!(run(Some(100.0)).0, dropless);
    let (out, record) = run(Some(0.5));
    let chosen = chosen(&f, "topk_indices");
    let mut seen = [0usize; 8];
    let mut kept = [0usize; 10];
    for (p, &e) in chosen.iter().enumerate() {
        // The later pairs in token order are the ones dropped.
        if seen[e] < 2 {
            kept[p / 2] += 1;
        }
        seen[e] += 1;
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
