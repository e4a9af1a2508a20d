//! Model-level tests: gradient flow for every recipe, parameter names, trace invariance, the
//! variance regulariser and BHyT's approximation term by hand, and init scales.

use super::*;
use crate::init::ParamSource;
use crate::model::base::params::{named_grads, named_values};
use crate::model::regularizer::variance_penalty;
use crate::recipe::{PRESET_NAMES, RecipeConfig};
use crate::testutil::{cpu, f64_tensor, pseudo_random, rel_err, values};
use burn::tensor::{Device, Int, Tensor, TensorData};

pub(super) fn tiny(recipe: RecipeConfig, n_layers: usize) -> ModelConfig {
    ModelConfig { vocab_size: 32, d_model: 16, n_layers, n_heads: 2, d_glu: Some(24), recipe, ..Default::default() }
}

pub(super) fn tokens(device: &Device, seed: u64) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let ids: Vec<i64> = (0..2 * 9).map(|_| (rng.next_u64() % 32) as i64).collect();
    let all = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, 9]), device);
    (all.clone().narrow(1, 0, 8), all.narrow(1, 1, 8))
}

/// Parameters that provably cannot learn, with the reason; the test below checks these have a
/// zero gradient and every other parameter a non-zero one.
fn provably_dead(recipe: &str, name: &str, n_layers: usize) -> Option<&'static str> {
    let leaf = name.rsplit('.').next().unwrap_or(name);
    if crate::norm::TAPER_BUFFERS.contains(&leaf) {
        return Some("a TaperNorm buffer, set by the schedule and never by a gradient");
    }
    if leaf == crate::model::base::names::SELECTION_BIAS {
        return Some("DeepSeek V3's selection bias, moved by the balancing and never by a gradient");
    }
    if recipe == "tapernorm" && leaf == "taper_gain" {
        return Some("γ̃ is multiplied by 1 − g = 0 until the taper starts");
    }
    let last = format!("layers.{}.ffn.outer_norm.shift", n_layers - 1);
    let kitenorm_scalar = matches!(recipe, "kitenorm" | "kitenorm-no-reg");
    (kitenorm_scalar && name.ends_with("outer_norm.shift") && name != last).then_some(
        "scalar shift β′ of an outer norm feeding only mean-centring norms (next sublayer's inner and outer sLN)",
    )
}

/// The recipes the gradient test runs: every preset at 4 layers, some variants, and the
/// presets whose initial gates (ReZero, SkipInit) or β (SeeDNorm) leave a parameter without a
/// gradient for one step, moved off that point.
fn gradient_cases(n_layers: usize) -> Vec<(String, ModelConfig)> {
    // init_std 0.2: at 0.02 the un-normalised first layer of e.g. kitenorm-no-inner has
    // attention scores ~1e-6 and W_Q gradients ~1e-10 — alive, but not separable from rounding.
    let cfg = |r: &str| ModelConfig { init_std: 0.2, ..tiny(RecipeConfig::Preset(r.into()), n_layers) };
    let mut cases: Vec<(String, ModelConfig)> = PRESET_NAMES.iter().map(|n| (n.to_string(), cfg(n))).collect();
    cases.push(("pre-mlp".into(), ModelConfig { ffn: FfnKind::Mlp, d_mlp: Some(20), ..cfg("pre") }));
    let overlay = |toml: &str| {
        let o: crate::recipe::RecipeOverlay = toml::from_str(toml).unwrap();
        ModelConfig { recipe: RecipeConfig::Custom(Box::new(o)), ..cfg("pre") }
    };
    cases.push(("olmo2-head-qk".into(), overlay("preset = \"olmo2\"\nqk_norm = \"head\"")));
    cases.push(("kitenorm-scalar-rms".into(), overlay("preset = \"kitenorm\"\nnorm = \"rmsnorm\"")));
    // ReZero and SkipInit start with every gate at 0, where only the gates can learn (checked
    // by `zero_gates_pass_gradient_to_the_gates_alone`); here from a gate of 0.5.
    for (name, per) in [("rezero", "layer"), ("skipinit", "sublayer")] {
        let gate =
            format!("preset = \"{name}\"\n[sublayer]\ngate = {{ shape = \"scalar\", init = 0.5, per = \"{per}\" }}");
        let i = cases.iter().position(|(n, _)| n == name).unwrap();
        cases[i].1 = overlay(&gate);
    }
    // SeeDNorm starts at β = 0, where tanh(x·β) = 0 leaves α without gradient for one step
    // (β has one); here from β = 0.1.
    let seed = "preset = \"seednorm\"\nfinal_norm = { kind = \"seednorm\", beta = 0.1 }\n[sublayer]\ninput = { kind = \"seednorm\", beta = 0.1 }";
    let i = cases.iter().position(|(n, _)| n == "seednorm").unwrap();
    cases[i].1 = overlay(seed);
    // TaperNorm's γ̃ learns once the gate falls; here mid-taper, at g = ½.
    cases.push(("tapernorm-tapering".into(), cfg("tapernorm")));
    cases.extend(moe_cases(&cfg("pre")));
    cases
}

/// Mixtures of experts on a pre-norm model: OLMoE's router with both balancing losses, and
/// DeepSeek V3's (sigmoid scores, groups, a shared expert, a dense first layer). 16 tokens ×
/// top-2 over 4 experts reach every expert.
pub(super) fn moe_cases(base: &ModelConfig) -> Vec<(String, ModelConfig)> {
    let moe = |toml: &str| ModelConfig { moe: Some(toml::from_str(toml).unwrap()), ..base.clone() };
    vec![
        ("pre-moe-olmoe".into(), moe("experts = 4\ntop_k = 2\nd_expert = 8\naux_loss = 0.01\nz_loss = 0.001")),
        (
            "pre-moe-normed".into(),
            moe("experts = 4\ntop_k = 2\nd_expert = 8\nrouter_norm = \"rmsnorm\"\nexpert_norm = \"ln\"\n\
                 router = { kind = \"topk-softmax\" }"),
        ),
        (
            "pre-moe-deepseek".into(),
            moe("experts = 4\ntop_k = 2\nd_expert = 8\nshared = 1\nfirst_dense = 1\n\
                 router = { kind = \"sigmoid\", groups = 2, top_groups = 2, scale = 2.5, bias_update = 0.001 }"),
        ),
    ]
}

#[test]
fn every_parameter_of_every_recipe_receives_a_gradient() {
    let device = cpu().autodiff();
    let n_layers = 4;
    let cases = gradient_cases(n_layers);
    for (name, cfg) in cases {
        // Hyper-Connections' dynamic projections start at 0, where the stream norm's gain gets
        // no gradient for one step (W_α, W_β have one); here from 0.1.
        let source = match name.as_str() {
            "hc" => ParamSource::Overlay(hc_dynamic_at(0.1, n_layers), 7),
            "tapernorm-tapering" => ParamSource::Overlay(taper_gates_at(0.5, n_layers), 7),
            _ => ParamSource::Seeded(7),
        };
        let model = Transformer::new(&cfg, source, &device).unwrap();
        let (x, y) = tokens(&device, 3);
        let (loss, _, _) = model.loss(x, y, false);
        let grads = loss.backward();
        let all = named_grads(&model, &grads);
        let largest = all.iter().filter_map(|(_, g)| g.as_ref()).map(max_abs).fold(0.0, f64::max);
        assert!(largest > 0.0, "{name}: no gradient at all");
        let (mut min_live, mut max_dead) = (f64::INFINITY, 0.0f64);
        for (param, g) in &all {
            let g = g.as_ref().map(max_abs).unwrap_or(0.0) / largest;
            if provably_dead(&name, param, n_layers).is_some() {
                max_dead = max_dead.max(g)
            } else {
                min_live = min_live.min(g)
            }
        }
        eprintln!("{name:20} min live {min_live:.1e}  max dead {max_dead:.1e}");
        for (param, g) in all {
            let g = g.as_ref().map(max_abs).unwrap_or(0.0);
            match provably_dead(&name, &param, n_layers) {
                Some(why) => {
                    assert!(g <= 1e-6 * largest, "{name}: {param} should be dead ({why}) but has |grad| {g:e}")
                }
                None => assert!(g > 1e-5 * largest, "{name}: {param} receives no gradient (|grad| = {g:e})"),
            }
        }
    }
}

/// Every TaperNorm gate of a `n_layers`-layer `tapernorm` model at `value`.
fn taper_gates_at(value: f32, n_layers: usize) -> std::collections::BTreeMap<String, TensorData> {
    let names = (0..n_layers).flat_map(|i| ["attn", "ffn"].map(|s| format!("layers.{i}.{s}.input_norm.taper_gate")));
    names.map(|n| (n, TensorData::new(vec![value], [1]))).collect()
}

/// Every HC dynamic projection (`W_α` `[16, 5]`, `W_β` `[16]`, 4 streams, width 16) of a
/// `n_layers`-layer model at `value`.
fn hc_dynamic_at(value: f32, n_layers: usize) -> std::collections::BTreeMap<String, TensorData> {
    let mut m = std::collections::BTreeMap::new();
    for i in 0..n_layers {
        for s in ["attn", "ffn"] {
            m.insert(format!("layers.{i}.{s}.hc.dynamic_alpha"), TensorData::new(vec![value; 16 * 5], [16, 5]));
            m.insert(format!("layers.{i}.{s}.hc.dynamic_beta"), TensorData::new(vec![value; 16], [16]));
        }
    }
    m
}

/// ReZero's and SkipInit's defining property: with every gate at 0 each layer is the identity,
/// so the loss depends on the branch weights only through the gates. The first gradient
/// reaches the gates, the embedding and the output projection, and no branch parameter.
#[test]
fn zero_gates_pass_gradient_to_the_gates_alone() {
    let device = cpu().autodiff();
    for recipe in ["rezero", "skipinit"] {
        let cfg = ModelConfig { init_std: 0.2, ..tiny(RecipeConfig::Preset(recipe.into()), 3) };
        let model = Transformer::new(&cfg, ParamSource::Seeded(7), &device).unwrap();
        let (x, y) = tokens(&device, 3);
        let grads = model.loss(x, y, false).0.backward();
        for (param, g) in named_grads(&model, &grads) {
            let g = g.as_ref().map(max_abs).unwrap_or(0.0);
            let learns = param.ends_with(".gate") || param == "tok_emb" || param == "lm_head";
            assert_eq!(g > 0.0, learns, "{recipe}: {param} has |grad| {g:e}");
        }
    }
}

fn max_abs(d: &TensorData) -> f64 {
    d.clone().convert::<f64>().as_slice::<f64>().unwrap().iter().fold(0.0, |m, v| m.max(v.abs()))
}

#[test]
fn constructor_names_are_the_module_paths() {
    // Loading by the visitor's names (what checkpoints store) must supply exactly the names the
    // constructor asks for: `ParamBuilder::finish` rejects leftovers, lookups reject gaps.
    for name in ["peri", "olmo2", "bhyt", "keel", "dyt"] {
        let cfg = tiny(RecipeConfig::Preset(name.into()), 2);
        let device = cpu();
        let model = Transformer::new(&cfg, ParamSource::Seeded(1), &device).unwrap();
        let weights: std::collections::BTreeMap<_, _> = named_values(&model).into_iter().collect();
        assert!(
            weights.contains_key("layers.0.attn.f.wq")
                && weights.contains_key("tok_emb")
                && weights.contains_key("lm_head")
        );
        let reloaded = Transformer::new(&cfg, ParamSource::Loaded(weights.clone()), &device)
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let again: std::collections::BTreeMap<_, _> = named_values(&reloaded).into_iter().collect();
        assert_eq!(weights, again, "{name}: round trip by name");
    }
}

#[test]
fn loading_reports_missing_and_mismatched_tensors() {
    let device = cpu();
    let cfg = tiny(RecipeConfig::Preset("pre".into()), 2);
    let mut weights: std::collections::BTreeMap<_, _> =
        named_values(&Transformer::new(&cfg, ParamSource::Seeded(1), &device).unwrap()).into_iter().collect();
    let post = tiny(RecipeConfig::Preset("post".into()), 2);
    let e = format!("{:#}", Transformer::new(&post, ParamSource::Loaded(weights.clone()), &device).unwrap_err());
    assert!(e.contains("outer_norm") && e.contains("missing"), "{e}");
    let wide = ModelConfig { d_model: 32, ..cfg.clone() };
    let e = format!("{:#}", Transformer::new(&wide, ParamSource::Loaded(weights.clone()), &device).unwrap_err());
    assert!(e.contains("tok_emb") && e.contains("[32, 16]") && e.contains("[32, 32]"), "{e}");
    weights.insert("extra.weight".into(), TensorData::new(vec![0f32], [1]));
    let e = format!("{:#}", Transformer::new(&cfg, ParamSource::Loaded(weights), &device).unwrap_err());
    assert!(e.contains("extra.weight"), "{e}");
}

#[test]
fn tracing_does_not_change_the_logits() {
    let device = cpu();
    for name in ["peri", "bhyt", "kitenorm"] {
        let model =
            Transformer::new(&tiny(RecipeConfig::Preset(name.into()), 3), ParamSource::Seeded(5), &device).unwrap();
        let (x, _) = tokens(&device, 9);
        let plain = model.forward(x.clone(), super::Keep::LOGITS);
        let traced = model.forward(x, super::Keep { sums: true, traces: true });
        assert_eq!(plain.logits.into_data(), traced.logits.into_data(), "{name}");
        let traces = traced.traces;
        assert_eq!((traces.len(), traced.sums.len()), (6, 6));
        // X_{l+1} = N_outer(Z_l): for recipes without an outer norm, the next input is Z_l.
        if name == "peri" {
            assert_eq!(traces[1].input.clone().into_data(), traces[0].sum.clone().into_data());
        }
        assert_eq!(traces.iter().filter(|t| t.approx_variance.is_some()).count(), if name == "bhyt" { 3 } else { 0 });
    }
}

#[test]
fn variance_regulariser_matches_hand_computation() {
    // Sublayer 1: tokens [3, 1, −1, 5] (σ² = 5 → ReLU(4) = 4) and [1, 1, 1, 1] (σ² = 0 → 0):
    // mean 2. Sublayer 2: [2, 0, 2, 0] (σ² = 1 → 0) and [0, 4, 0, 0] (σ² = 3 → 2): mean 1.
    // R = (2 + 1) / 2 = 1.5.
    let z1 = f64_tensor(&[3.0, 1.0, -1.0, 5.0, 1.0, 1.0, 1.0, 1.0], [1, 2, 4], false);
    let z2 = f64_tensor(&[2.0, 0.0, 2.0, 0.0, 0.0, 4.0, 0.0, 0.0], [1, 2, 4], false);
    let r = values(variance_penalty(&[z1, z2]))[0];
    assert!((r - 1.5).abs() < 1e-12, "{r}");
}

#[test]
fn bhyt_approximation_uses_the_frobenius_norm_of_wv_wo() {
    // W_V = [[1, 2], [0, 1]], W_O = [[1, 0], [1, 1]]: W_V W_O = [[3, 2], [1, 1]], ‖·‖²_F = 15.
    let wv = f64_tensor(&[1.0, 2.0, 0.0, 1.0], [2, 2], false);
    let wo = f64_tensor(&[1.0, 0.0, 1.0, 1.0], [2, 2], false);
    let attn = attention::self_attention::Attention {
        wq: burn::module::Param::from_tensor(wv.clone()),
        wk: burn::module::Param::from_tensor(wv.clone()),
        wv: burn::module::Param::from_tensor(wv),
        wo: burn::module::Param::from_tensor(wo),
        bq: None,
        bk: None,
        bv: None,
        q_norm: None,
        k_norm: None,
        v_norm: None,
        n_heads: 1,
        n_kv_heads: 1,
        head_dim: 2,
        qk_full: false,
        v_full: false,
        qk_l2: None,
        softcap: None,
        sqk: None,
        sqk_factor: 1.0,
        w_gate: None,
        sinks: None,
        value_lambda: None,
        value_source: false,
        lora_wq: None,
        lora_wk: None,
        lora_wv: None,
        lora_wo: None,
    };
    assert_eq!(values(attn.value_output_frobenius_sq()), vec![15.0]);
    // Grouped-query attention, 2 query heads sharing 1 key/value head of size 1: W_V = [1, 2]ᵀ
    // serves both heads, [[1, 1], [2, 2]] · W_O = [[2, 1], [4, 2]], ‖·‖²_F = 25.
    let gqa = attention::self_attention::Attention {
        wv: burn::module::Param::from_tensor(f64_tensor(&[1.0, 2.0], [2, 1], false)),
        n_heads: 2,
        head_dim: 1,
        ..attn
    };
    assert_eq!(values(gqa.value_output_frobenius_sq()), vec![25.0]);
}

#[test]
fn rms_norm_approx_divides_the_ffn_input_by_the_block_statistic_plus_the_attention_term() {
    // The BHyT paper's Table 5 with Theorem 3.5: ŝ² = mean(x²) of the block input + ‖W_V W_O‖²_F/(T d),
    // computed here on the host from the model's own weights and hidden states.
    let device = cpu();
    let cfg = ModelConfig { init_std: 0.3, ..tiny(RecipeConfig::Preset("rmsnorm-approx".into()), 2) };
    let model = Transformer::new(&cfg, ParamSource::Seeded(5), &device).unwrap();
    let (x, _) = tokens(&device, 4);
    let out = model.forward(x, Keep::TRACES);
    let (t, d) = (8, 16);
    let weights = named_values(&model);
    let w = |name: &str| -> Vec<f64> {
        let data = &weights.iter().find(|(n, _)| n == name).unwrap().1;
        data.clone().convert::<f64>().try_into_vec::<f64>().unwrap()
    };
    for layer in 0..2 {
        let (wv, wo) = (w(&format!("layers.{layer}.attn.f.wv")), w(&format!("layers.{layer}.attn.f.wo")));
        let mut fro = 0.0;
        for i in 0..d {
            for j in 0..d {
                let v: f64 = (0..d).map(|m| wv[i * d + m] * wo[m * d + j]).sum();
                fro += v * v;
            }
        }
        let input = values(out.traces[2 * layer].input.clone());
        let approx = values(out.traces[2 * layer + 1].approx_variance.clone().expect("the FFN norm approximates"));
        for (row, got) in approx.iter().enumerate() {
            let ms = input[row * d..(row + 1) * d].iter().map(|v| v * v).sum::<f64>() / d as f64;
            let want = ms + fro / (t * d) as f64;
            assert!((got - want).abs() < 1e-5 * want, "layer {layer} token {row}: {got} vs {want}");
        }
        assert!(out.traces[2 * layer].approx_variance.is_none(), "the attention norm measures its input");
    }
}

#[test]
fn init_scales_reach_the_weights() {
    // Sample std of the initialised matrices against N(0, (0.02·scale)²).
    let device = cpu();
    let cfg = ModelConfig {
        d_model: 64,
        n_layers: 12,
        n_heads: 4,
        recipe: RecipeConfig::Preset("deepnorm".into()),
        ..Default::default()
    };
    let model = Transformer::new(&cfg, ParamSource::Seeded(7), &device).unwrap();
    let beta = 96f64.powf(-0.25);
    let std_of = |suffix: &str| {
        let vals: Vec<f64> = named_values(&model)
            .into_iter()
            .filter(|(n, _)| n.ends_with(suffix))
            .flat_map(|(_, d)| d.convert::<f64>().as_slice::<f64>().unwrap().to_vec())
            .collect();
        (vals.iter().map(|v| v * v).sum::<f64>() / vals.len() as f64).sqrt()
    };
    for (suffix, want) in [
        ("attn.f.wq", 0.02),
        ("attn.f.wv", 0.02 * beta),
        ("attn.f.wo", 0.02 * beta),
        ("ffn.f.w1", 0.02 * beta),
        ("ffn.f.w2", 0.02 * beta),
        ("tok_emb", 0.02),
    ] {
        let got = std_of(suffix);
        assert!((got / want - 1.0).abs() < 0.02, "{suffix}: std {got} vs {want}");
    }
    let gpt2 = ModelConfig { recipe: RecipeConfig::Preset("gpt2-pre".into()), ..cfg };
    let model = Transformer::new(&gpt2, ParamSource::Seeded(7), &device).unwrap();
    let wo: Vec<f64> = named_values(&model)
        .into_iter()
        .filter(|(n, _)| n.ends_with("f.wo") || n.ends_with("f.w2"))
        .flat_map(|(_, d)| d.convert::<f64>().as_slice::<f64>().unwrap().to_vec())
        .collect();
    let std = (wo.iter().map(|v| v * v).sum::<f64>() / wo.len() as f64).sqrt();
    assert!((std / (0.02 / 24f64.sqrt()) - 1.0).abs() < 0.02, "GPT-2 output projections: std {std}");
}

#[test]
fn same_seed_same_weights_across_recipes() {
    let device = cpu();
    let a = Transformer::new(&tiny(RecipeConfig::Preset("post".into()), 2), ParamSource::Seeded(7), &device).unwrap();
    let b = Transformer::new(&tiny(RecipeConfig::Preset("peri".into()), 2), ParamSource::Seeded(7), &device).unwrap();
    let get = |m: &Transformer| named_values(m).into_iter().find(|(n, _)| n == "layers.1.attn.f.wq").unwrap().1;
    assert_eq!(get(&a), get(&b), "matched init isolates the normalisation scheme");
}

/// The prompt-masked loss by hand: logits [1, 3, 2] with targets (−1, 1, 0) count positions 1
/// and 2 only: −(log softmax(0, 1)[1] + log softmax(2, −1)[0]) / 2 =
/// (ln(1 + e^−1) + ln(1 + e^−3)) / 2. Position 0 gets no gradient; changing its target (any
/// value below 0) or its logits changes nothing.
#[test]
fn masked_cross_entropy_counts_only_target_positions() {
    use crate::model::transformer::masked_cross_entropy;
    let logits = f64_tensor(&[5.0, -3.0, 0.0, 1.0, 2.0, -1.0], [1, 3, 2], true);
    let targets = |t0: i64| Tensor::<2, Int>::from_data(TensorData::new(vec![t0, 1, 0], [1, 3]), &cpu().autodiff());
    let (ce, n) = masked_cross_entropy(logits.clone(), targets(-1));
    let want = ((1.0 + (-1.0f64).exp()).ln() + (1.0 + (-3.0f64).exp()).ln()) / 2.0;
    assert!((values(ce.clone())[0] - want).abs() < 1e-12);
    assert_eq!(values(n)[0], 2.0);
    let grads = ce.backward();
    let g = values(logits.grad(&grads).expect("logit gradient"));
    assert_eq!(&g[..2], &[0.0, 0.0], "the prompt position has no gradient");
    // The same loss with the masked position's logits changed.
    let other = f64_tensor(&[-9.0, 9.0, 0.0, 1.0, 2.0, -1.0], [1, 3, 2], false);
    let same = masked_cross_entropy(other, Tensor::from_data(TensorData::new(vec![-1i64, 1, 0], [1, 3]), &cpu()));
    assert!((values(same.0)[0] - want).abs() < 1e-12);
}

/// Loss and both gradients equal the unchunked composite path for chunk sizes that divide
/// N and that do not, with masked targets, in f32 (≤ 1e-5 relative).
#[test]
fn every_chunk_size_gives_the_unchunked_loss_and_gradients() {
    let (n, d, v) = (11, 6, 13);
    let dev = cpu().autodiff();
    let hv = pseudo_random(n * d, 1);
    let wv = pseudo_random(d * v, 2).iter().map(|x| 3.0 * x).collect::<Vec<_>>();
    let t: Vec<i64> = (0..n as i64).map(|i| if i % 4 == 1 { -1 } else { (i * 5) % v as i64 }).collect();
    let leaf = |x: &[f64], s: [usize; 2]| {
        Tensor::<2>::from_data(TensorData::new(x.iter().map(|&a| a as f32).collect::<Vec<_>>(), s), &dev).require_grad()
    };
    let targets = || Tensor::<1, Int>::from_data(TensorData::new(t.clone(), [n]), &dev);
    // Plain logits, and soft-capped ones (c = 2 bites: these logits reach ±5), whose reference
    // is autodiff through `c·tanh(u/c)`.
    for cap in [None, Some(2.0)] {
        let (h, w) = (leaf(&hv, [n, d]), leaf(&wv, [d, v]));
        let raw = h.clone().matmul(w.clone()).reshape([1, n, v]);
        let logits = match cap {
            Some(c) => (raw / c).tanh() * c,
            None => raw,
        };
        let reference = crate::model::transformer::masked_cross_entropy(logits, targets().reshape([1, n])).0;
        let g = reference.clone().backward();
        let (rh, rw) = (values(h.grad(&g).unwrap()), values(w.grad(&g).unwrap()));
        for chunk in [1, 3, 4, 11, 64] {
            let (h, w) = (leaf(&hv, [n, d]), leaf(&wv, [d, v]));
            let c = super::Compute::for_device(crate::kernels::Kernels::Fused, &h.device());
            let loss =
                crate::model::chunked_loss::chunked_cross_entropy(h.clone(), w.clone(), targets(), chunk, c, cap, 0.0)
                    .objective;
            assert!(rel_err(&values(loss.clone()), &values(reference.clone()), 1e-12) < 1e-6, "chunk {chunk} {cap:?}");
            let g = (loss * 0.5).backward();
            let half = |x: &[f64]| x.iter().map(|a| a * 0.5).collect::<Vec<_>>();
            assert!(rel_err(&values(h.grad(&g).unwrap()), &half(&rh), 1e-12) < 1e-5, "chunk {chunk} {cap:?}: dL/dh");
            assert!(rel_err(&values(w.grad(&g).unwrap()), &half(&rw), 1e-12) < 1e-5, "chunk {chunk} {cap:?}: dL/dW");
        }
    }
}

/// The chunked loss inside the model: for a recipe with the regulariser and a tied-embedding
/// model, forcing chunks of 7 tokens (16 per micro-batch here) gives the unchunked loss and
/// every parameter's gradient within 1e-5 relative.
#[test]
fn the_model_loss_is_the_same_chunked_and_whole() {
    let device = cpu().autodiff();
    for (name, tied) in [("kitenorm", false), ("pre", true)] {
        let cfg = ModelConfig { tie_embeddings: tied, init_std: 0.2, ..tiny(RecipeConfig::Preset(name.into()), 2) };
        let grads_of = |limit: usize| {
            let mut model = Transformer::new(&cfg, ParamSource::Seeded(5), &device).unwrap();
            model.meta.compute.logits_limit = limit;
            let (x, y) = tokens(&device, 9);
            let (loss, _, _) = model.loss(x, y, false);
            let g = loss.clone().backward();
            (values(loss), named_grads(&model, &g))
        };
        let (whole, gw) = grads_of(usize::MAX);
        let (chunked, gc) = grads_of(7 * 32);
        assert!(rel_err(&chunked, &whole, 1e-12) < 1e-6, "{name}: loss");
        let f = |d: &Option<TensorData>| d.clone().unwrap().convert::<f64>().try_to_vec::<f64>().unwrap();
        // Relative to each parameter's largest entry, floored at 1% of the largest gradient
        // anywhere; KiteNorm's provably dead shifts (rounding noise on both paths) are skipped.
        let global = gw.iter().flat_map(|(_, g)| f(g)).fold(0.0, |m: f64, v| m.max(v.abs()));
        for ((n, a), (_, b)) in gw.iter().zip(&gc).filter(|((n, _), _)| provably_dead(name, n, 2).is_none()) {
            assert!(
                rel_err(&f(b), &f(a), 1e-2 * global) < 1e-5,
                "{name}: {n}: {:?} vs {:?} (largest {global:e})",
                f(b),
                f(a)
            );
        }
    }
}

/// `model.kernels = "fused"` against the composite reference for every recipe (and GQA with
/// per-head QK-norm, and the GELU MLP): the loss within 1e-6 and every parameter's gradient
/// within 5e-5 relative in f32, and the fused path is deterministic bit for bit. The two paths
/// sum in different orders and the fused one uses polynomial `exp`/`tanh`, so they differ by
/// f32 rounding, amplified where a gradient is a small difference of large terms (KiteNorm's
/// gains reach 1.1e-5); the kernels themselves are checked in f64 against finite differences.
#[test]
fn fused_kernels_give_the_composite_loss_and_gradients_for_every_recipe() {
    use crate::kernels::Kernels;
    let device = cpu().autodiff();
    let cfg = |r: &str| ModelConfig { init_std: 0.2, ..tiny(RecipeConfig::Preset(r.into()), 2) };
    let mut cases: Vec<(String, ModelConfig)> = PRESET_NAMES.iter().map(|n| (n.to_string(), cfg(n))).collect();
    cases.push(("pre-mlp".into(), ModelConfig { ffn: FfnKind::Mlp, d_mlp: Some(20), ..cfg("pre") }));
    cases.extend(moe_cases(&cfg("pre")));
    let o: crate::recipe::RecipeOverlay = toml::from_str("preset = \"olmo2\"\nqk_norm = \"head\"").unwrap();
    let gqa = ModelConfig { n_heads: 4, n_kv_heads: Some(2), recipe: RecipeConfig::Custom(Box::new(o)), ..cfg("pre") };
    cases.push(("gqa-head-qk".into(), gqa));
    let f = |d: &Option<TensorData>| d.clone().unwrap().convert::<f64>().try_to_vec::<f64>().unwrap();
    for (name, cfg) in cases {
        let run = |kernels: Kernels| {
            let model =
                Transformer::new(&ModelConfig { kernels, ..cfg.clone() }, ParamSource::Seeded(5), &device).unwrap();
            let (x, y) = tokens(&device, 9);
            let (loss, _, _) = model.loss(x, y, false);
            let g = loss.clone().backward();
            // Buffers (TaperNorm's gate and scale) take no gradient on either path.
            let grads = named_grads(&model, &g).into_iter().filter(|(n, _)| !crate::model::base::names::is_buffer(n));
            (values(loss), grads.collect::<Vec<_>>())
        };
        let (composite, gc) = run(Kernels::Composite);
        let (fused, gf) = run(Kernels::Fused);
        assert!(rel_err(&fused, &composite, 1e-12) < 1e-6, "{name}: loss {fused:?} vs {composite:?}");
        let global = gc.iter().flat_map(|(_, g)| f(g)).fold(0.0, |m: f64, v| m.max(v.abs()));
        // KiteNorm's provably dead shifts (see `provably_dead`) are rounding noise on both paths.
        for ((n, a), (_, b)) in gc.iter().zip(&gf).filter(|((n, _), _)| provably_dead(&name, n, 2).is_none()) {
            let err = rel_err(&f(b), &f(a), 1e-2 * global);
            assert!(err < 5e-5, "{name}: {n}: fused gradient off by {err:e}");
        }
        let (again, ga) = run(Kernels::Fused);
        assert_eq!(again, fused, "{name}: the fused loss is not deterministic");
        assert!(ga.iter().zip(&gf).all(|((_, a), (_, b))| f(a) == f(b)), "{name}: fused gradients not deterministic");
    }
}

/// The fused attention over several query blocks (3 here, the last one partial): loss and every
/// gradient as the composite model's, for a plain and a GQA model.
#[test]
fn blocked_causal_attention_gives_the_composite_loss_and_gradients() {
    use crate::kernels::{Kernels, attention::BLOCK};
    let t = 2 * BLOCK + 22;
    let device = cpu().autodiff();
    let mut rng = crate::rng::SplitMix64::new(4);
    let ids: Vec<i64> = (0..2 * (t + 1)).map(|_| (rng.next_u64() % 32) as i64).collect();
    let all = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, t + 1]), &device);
    let (x, y) = (all.clone().narrow(1, 0, t), all.narrow(1, 1, t));
    let f = |d: &Option<TensorData>| d.clone().unwrap().convert::<f64>().try_to_vec::<f64>().unwrap();
    let base = ModelConfig { init_std: 0.2, ..tiny(RecipeConfig::Preset("pre".into()), 2) };
    for cfg in [base.clone(), ModelConfig { n_heads: 4, n_kv_heads: Some(2), ..base }] {
        let run = |kernels: Kernels| {
            let model =
                Transformer::new(&ModelConfig { kernels, ..cfg.clone() }, ParamSource::Seeded(3), &device).unwrap();
            let (loss, _, _) = model.loss(x.clone(), y.clone(), false);
            let g = loss.clone().backward();
            (values(loss), named_grads(&model, &g))
        };
        let ((lc, gc), (lf, gf)) = (run(Kernels::Composite), run(Kernels::Fused));
        assert!(rel_err(&lf, &lc, 1e-12) < 1e-6, "loss {lf:?} vs {lc:?}");
        let global = gc.iter().flat_map(|(_, g)| f(g)).fold(0.0, |m: f64, v| m.max(v.abs()));
        for ((n, a), (_, b)) in gc.iter().zip(&gf) {
            let err = rel_err(&f(b), &f(a), 1e-2 * global);
            assert!(err < 1e-5, "{n}: blocked attention gradient off by {err:e}");
        }
    }
}

/// Attention by blocks of query rows (forced by a small scores limit: blocks of 3 and 5 rows
/// of 8, the last partial; each block meets only the keys it can see): the loss and every
/// gradient as the whole-scores path, composite kernels.
#[test]
fn attention_by_row_blocks_gives_the_whole_loss_and_gradients() {
    use crate::kernels::Kernels;
    let device = cpu().autodiff();
    let cfg =
        ModelConfig { init_std: 0.2, kernels: Kernels::Composite, ..tiny(RecipeConfig::Preset("peri".into()), 2) };
    let f = |d: &Option<TensorData>| d.clone().unwrap().convert::<f64>().try_to_vec::<f64>().unwrap();
    let (x, y) = tokens(&device, 11);
    for rows in [usize::MAX, 3, 5] {
        let run = |limit: usize| {
            let mut model = Transformer::new(&cfg, ParamSource::Seeded(3), &device).unwrap();
            model.set_memory_limits(LOGITS_LIMIT, limit);
            let (loss, _, _) = model.loss(x.clone(), y.clone(), false);
            let g = loss.clone().backward();
            (values(loss), named_grads(&model, &g))
        };
        // 2 sequences × 2 heads × 8 keys per query row.
        let ((lw, gw), (lb, gb)) = (run(usize::MAX), run(rows.saturating_mul(2 * 2 * 8)));
        assert!(rel_err(&lb, &lw, 1e-12) < 1e-6, "rows {rows}: loss {lb:?} vs {lw:?}");
        let global = gw.iter().flat_map(|(_, g)| f(g)).fold(0.0, |m: f64, v| m.max(v.abs()));
        for ((n, a), (_, b)) in gw.iter().zip(&gb) {
            let err = rel_err(&f(b), &f(a), 1e-2 * global);
            assert!(err < 1e-5, "rows {rows}: {n}: gradient off by {err:e}");
        }
    }
}

/// A recipe is resolved for one model's sizes and ε: building another model with it is
/// refused (its `k^{-1/2}` or `1/√(2L)` would be another model's).
#[test]
fn a_recipe_resolved_for_other_sizes_is_refused() {
    let cfg = ModelConfig { n_layers: 2, d_model: 32, n_heads: 2, ..Default::default() };
    let (_, recipe) = cfg.validate().unwrap();
    let deeper = ModelConfig { n_layers: 3, ..cfg.clone() };
    let e = Transformer::with_recipe(&deeper, &recipe, ParamSource::Seeded(1), &cpu()).unwrap_err();
    assert!(format!("{e:#}").contains("was resolved for"), "{e:#}");
    assert!(Transformer::with_recipe(&cfg, &recipe, ParamSource::Seeded(1), &cpu()).is_ok());
}

/// The new parameters' initial values, against their papers: ReZero's one α per layer and
/// SkipInit's α per sublayer at 0, LayerScale's λ ∈ ℝ^d at CaiT's 0.1 (depth ≤ 18), nanochat's
/// λ_r = 1 and λ₀ = 0, Megatron's zero-centred LayerNorm-1p gain at 0, Derf's α₀ = 1, s₀ = 0,
/// HybridNorm's value-norm gain at 1, Qwen3-Next's zero-centred RMSNorm gain at 0, GPAS's α at 0,
/// TaperNorm's gate at 1.
#[test]
fn new_parameters_start_at_their_papers_values() {
    use crate::model::base::params::named_values;
    let device = cpu();
    type Expected<'a> = &'a [(&'a str, usize, f64)];
    let expect: &[(&str, Expected)] = &[
        ("rezero", &[("layers.0.gate", 1, 0.0), ("layers.2.gate", 1, 0.0)]),
        ("skipinit", &[("layers.0.attn.gate", 1, 0.0), ("layers.1.ffn.gate", 1, 0.0)]),
        ("layerscale", &[("layers.0.attn.gate", 16, 0.1), ("layers.2.ffn.gate", 16, 0.1)]),
        ("x0-mix", &[("layers.1.resid_lambda", 1, 1.0), ("layers.1.x0_lambda", 1, 0.0)]),
        ("pre-1p", &[("layers.0.attn.input_norm.gain", 16, 0.0), ("final_norm.gain", 16, 0.0)]),
        ("derf", &[("layers.0.ffn.input_norm.alpha", 1, 1.0), ("layers.0.ffn.input_norm.offset", 1, 0.0)]),
        // HybridNorm's value norm lies per head: one gain of d_head = 16 / 2 shared by the heads.
        ("hybridnorm", &[("layers.0.attn.f.v_norm.gain", 8, 1.0), ("layers.0.attn.f.q_norm.gain", 8, 1.0)]),
        // Qwen3-Next's zero-centred gains start at 0 (an applied gain of 1).
        ("zc-rms", &[("layers.0.attn.input_norm.centred_gain", 16, 0.0), ("final_norm.centred_gain", 16, 0.0)]),
        // GPAS's α per layer starts at 0: SiLU(0) = 0, the identity (the authors' GPASBlock).
        ("gpas", &[("layers.0.gpas", 1, 0.0), ("layers.2.gpas", 1, 0.0)]),
        // TaperNorm starts as RMSNorm: γ = γ̃ = 1, the gate at 1, c at 1, the averages at 0.
        (
            "tapernorm",
            &[
                ("layers.0.attn.input_norm.taper_gain", 16, 1.0),
                ("layers.0.attn.input_norm.taper_gate", 1, 1.0),
                ("layers.1.ffn.input_norm.taper_scale", 1, 1.0),
                ("layers.1.ffn.input_norm.taper_ema_scaled", 1, 0.0),
                ("layers.2.attn.input_norm.taper_ema_energy", 1, 0.0),
            ],
        ),
    ];
    for (recipe, params) in expect {
        let cfg = tiny(RecipeConfig::Preset(recipe.to_string()), 3);
        let values: std::collections::BTreeMap<String, TensorData> =
            named_values(&Transformer::new(&cfg, ParamSource::Seeded(7), &device).unwrap()).into_iter().collect();
        for (name, len, init) in *params {
            let v = values.get(*name).unwrap_or_else(|| panic!("{recipe}: no parameter {name}"));
            let v = v.clone().convert::<f32>().try_to_vec::<f32>().unwrap();
            assert_eq!(v, vec![*init as f32; *len], "{recipe}: {name}");
        }
        if *recipe == "rezero" {
            assert!(!values.contains_key("layers.0.attn.gate"), "ReZero's gate belongs to the layer");
        }
    }
}

/// Mean square of every trace of a forward of `recipe` at init on English bytes: (stream `z_l`,
/// branch output) per sublayer.
fn init_moments(recipe: &str, ffn: FfnKind, n_layers: usize) -> Vec<(f64, f64)> {
    let device = cpu();
    let cfg = ModelConfig {
        vocab_size: 256,
        d_model: 128,
        n_layers,
        n_heads: 4,
        ffn,
        recipe: RecipeConfig::Preset(recipe.into()),
        ..Default::default()
    };
    let model = Transformer::new(&cfg, ParamSource::Seeded(11), &device).unwrap();
    let text = include_bytes!("../../docs/recipes.md");
    let ids: Vec<i64> = text.iter().take(4 * 256).map(|b| i64::from(*b)).collect();
    let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [4, 256]), &device);
    let out = model.forward(tokens, Keep::TRACES);
    let ms = |t: &Tensor<3>| values(t.clone().powf_scalar(2.0).mean()).iter().sum::<f64>();
    out.traces.iter().map(|t| (ms(&t.sum), ms(&t.branch))).collect()
}

/// DeepScaleLM's claim at initialisation: with `λ² + β² = 1` and unit-variance branches the
/// stream keeps unit variance at every depth (pre-LN's grows). The FFN branches against their
/// predicted variance: 1 for the GLU (SiLU's moments, exact), and for the GeLU MLP the ratio
/// E[GELU(z)²]/E[ReLU(z)²] = 0.42522/0.5 = 0.8504 that the authors' ReLU approximation leaves
/// (Gauss–Hermite, 200 nodes). Attention branches read ≈ 0.55 here: the tracked correlation
/// (r₀ = 0.221, uniform attention) is above what a causal byte-level model sees; they are
/// bounded, not matched.
#[test]
fn deepscalelm_keeps_unit_moments_at_initialisation() {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for (ffn, want) in [(FfnKind::Glu, 1.0), (FfnKind::Mlp, 0.8504)] {
        let m = init_moments("deepscalelm", ffn, 24);
        let ffn_branches: Vec<f64> = m.iter().skip(1).step_by(2).map(|(_, b)| *b).collect();
        let attn_branches: Vec<f64> = m.iter().step_by(2).map(|(_, b)| *b).collect();
        assert!((mean(&ffn_branches) / want - 1.0).abs() < 0.1, "{ffn:?}: FFN branches {ffn_branches:?}");
        assert!(attn_branches.iter().all(|b| (0.3..1.2).contains(b)), "{ffn:?}: attention {attn_branches:?}");
        for (l, (stream, _)) in m.iter().enumerate() {
            assert!((0.6..1.25).contains(stream), "{ffn:?}: stream at sublayer {} has {stream}", l + 1);
        }
    }
    let pre = init_moments("pre", FfnKind::Mlp, 24);
    assert!(pre[47].0 > 10.0 * pre[1].0, "pre-LN's stream grows with depth");
    // Its σ's for the embedding and the output projection differ: a tied model is refused.
    let cfg = ModelConfig { tie_embeddings: true, ..tiny(RecipeConfig::Preset("deepscalelm".into()), 2) };
    let e = Transformer::new(&cfg, ParamSource::Seeded(1), &cpu()).err().unwrap();
    assert!(format!("{e:#}").contains("tie_embeddings = false"), "{e:#}");
}

/// The parameter counts of whole models.
mod count_tests {
    use crate::init::ParamSource;
    use crate::model::base::params::counts;
    use crate::model::{FfnKind, ModelConfig, Transformer};
    use crate::recipe::RecipeConfig;

    /// Non-embedding counts by hand for `pre` (LN with gain and shift before each sublayer, a
    /// final LN), d = 32, 2 heads, vocabulary 64: attention 4·d², GLU 3·d·96 (⌈8d/3⌉ rounded up
    /// to 16) or MLP 2·d·4d, 2·2d per layer for the two norms, 2d for the final norm.
    #[test]
    fn non_embedding_parameters_by_hand() {
        let base = ModelConfig {
            vocab_size: 64,
            d_model: 32,
            n_layers: 2,
            n_heads: 2,
            recipe: RecipeConfig::Preset("pre".into()),
            ..Default::default()
        };
        let (d, v) = (32, 64);
        let glu_layer = 4 * d * d + 3 * d * 96 + 4 * d;
        let mlp_layer = 4 * d * d + 2 * d * 4 * d + 4 * d;
        let cases = [
            (base.clone(), 2 * glu_layer + 2 * d, 2 * v * d),
            (ModelConfig { tie_embeddings: true, ..base.clone() }, 2 * glu_layer + 2 * d, v * d),
            (ModelConfig { ffn: FfnKind::Mlp, n_layers: 3, ..base.clone() }, 3 * mlp_layer + 2 * d, 2 * v * d),
            // KiteNorm E.2: an MLP of width 3g/2 = 144 has the GLU's 3·d·96 = 2·d·144 weights.
            (ModelConfig { ffn: FfnKind::Mlp, d_mlp: Some(144), ..base }, 2 * glu_layer + 2 * d, 2 * v * d),
        ];
        for (cfg, non_embedding, embedding) in cases {
            let model = Transformer::new(&cfg, ParamSource::Seeded(0), &crate::testutil::cpu()).unwrap();
            let c = counts(&model);
            assert_eq!((c.non_embedding, c.all), (non_embedding, non_embedding + embedding), "{cfg:?}");
        }
    }
}
