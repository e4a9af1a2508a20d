//! Training behaviour: schedules against their closed forms, the weight-decay grouping as
//! AdamW actually applies it, global clipping against a direct norm, accumulation against the
//! full batch, determinism, resumption, divergence and set-up errors.

use super::clip::clip_global;
use super::optim;
use super::{Outcome, Resumed, Trainer, resume, start};
use crate::init::ParamSource;
use crate::model::base::params::{named_grads, named_values, param_table};
use crate::model::{ModelConfig, Transformer};
use crate::recipe::RecipeConfig;
use crate::run::config::RunConfig;
use crate::run::layout::{self, Status};
use crate::run::metrics::{Metrics, MetricsRecord};
use crate::run::schedule::{ScheduleConfig, ScheduleKind};
use crate::testutil::temp_dir;
use burn::optim::GradientsParams;
use burn::tensor::{Int, Tensor, TensorData};
use std::path::Path;

pub(super) fn quiet(_: &str) {}

/// A 2-layer d=32 model on a local synthetic corpus under `root`: a run takes well under a
/// second.
pub(crate) fn tiny_cfg(root: &std::path::Path, steps: usize) -> RunConfig {
    let corpus = root.join("corpus.txt");
    if !corpus.exists() {
        crate::testutil::write_tiny_corpus(&corpus, 3000);
    }
    let mut c = RunConfig::default();
    c.run.dir = root.join("run");
    c.run.eval_every = 5;
    c.run.eval_windows = 4;
    c.run.checkpoint_every = 5;
    c.model.d_model = 32;
    c.model.n_layers = 2;
    c.model.n_heads = 2;
    c.data.corpus = corpus.display().to_string();
    c.data.cache_dir = Some(root.join("cache"));
    c.train.batch_size = 4;
    c.train.seq_len = 32;
    c.train.steps = Some(steps);
    c
}

pub(super) fn train_losses(dir: &Path) -> Vec<f64> {
    Metrics::read(&layout::metrics(dir)).unwrap().train.iter().map(|r| r.loss).collect()
}

pub(super) fn run(cfg: RunConfig) -> (Trainer, Outcome) {
    run_corrupting(cfg, None)
}

/// [`run`], the batches of step `corrupt` (1-based) replaced by uniformly random tokens as
/// inputs and targets: a batch whose loss spikes.
fn run_corrupting(cfg: RunConfig, corrupt: Option<usize>) -> (Trainer, Outcome) {
    let (vocab, seed) = (cfg.model.vocab_size as u64, cfg.train.sampler_seed);
    let mut t = start(cfg, false, &quiet).unwrap();
    t.batch_hook = corrupt.map(|at| -> super::trainer::BatchHook {
        Box::new(move |step, batches| {
            if step == at {
                let mut rng = crate::rng::SplitMix64::new(seed ^ (step - 1) as u64);
                let tokens = batches.iter_mut().flat_map(|b| b.inputs.iter_mut().chain(b.targets.iter_mut()));
                tokens.for_each(|t| *t = (rng.next_u64() % vocab) as i64);
            }
        })
    });
    let mut p = super::progress::Progress::new(t.state.total_steps, 0, true);
    let o = t.run(&mut p).unwrap();
    (t, o)
}

#[test]
fn cosine_schedule_follows_its_formula() {
    let s = ScheduleConfig::default();
    let (peak, total) = (1e-2, 100);
    // W = round(0.06·100) = 6 warm-up steps from 1e-10.
    assert_eq!(s.lr(0, total, peak), 1e-10);
    assert!((s.lr(3, total, peak) - (1e-10 + (peak - 1e-10) * 0.5)).abs() < 1e-15);
    assert!((s.lr(6, total, peak) - peak).abs() < 1e-15, "peak right after warm-up");
    // Half-way through the 94 decay steps the cosine is at half the peak: s = 6 + 47.
    assert!((s.lr(53, total, peak) - peak / 2.0).abs() < 1e-12);
    for step in 6..total {
        let want = 0.5 * peak * (1.0 + (std::f64::consts::PI * (step - 6) as f64 / 94.0).cos());
        assert!((s.lr(step, total, peak) - want).abs() < 1e-15, "step {step}");
    }
    let mut prev = f64::INFINITY;
    for step in 6..total {
        assert!(s.lr(step, total, peak) <= prev);
        prev = s.lr(step, total, peak);
    }
}

#[test]
fn wsd_and_constant_schedules_follow_their_formulas() {
    let wsd = ScheduleConfig { kind: ScheduleKind::Wsd, decay_fraction: 0.2, ..Default::default() };
    let (peak, total) = (1e-3, 100);
    assert!((wsd.lr(6, total, peak) - peak).abs() < 1e-18);
    assert_eq!(wsd.lr(79, total, peak), peak, "stable until the last 20 steps");
    assert!((wsd.lr(80, total, peak) - peak * 19.0 / 20.0).abs() < 1e-15);
    assert!((wsd.lr(89, total, peak) - peak * 10.0 / 20.0).abs() < 1e-15);
    assert_eq!(wsd.lr(99, total, peak), 0.0, "reaches end_lr on the last step");
    let c = ScheduleConfig { kind: ScheduleKind::Constant, warmup_fraction: 0.0, ..Default::default() };
    assert!((0..total).all(|s| c.lr(s, total, peak) == peak));
}

/// One optimizer step under `oc` at rate 0.5 with every gradient 0: AdamW's adaptive update is
/// 0/(0 + ε) = 0, so only decoupled decay moves a parameter, θ ← θ·(1 − 0.5·λ).
fn step_with_zero_gradients(oc: &crate::run::OptimConfig, model: Transformer) -> Transformer {
    let mut grads = GradientsParams::new();
    for p in param_table(&model) {
        match p.shape.len() {
            1 => grads.register(p.id, Tensor::<1>::zeros(p.shape.clone(), &crate::testutil::cpu())),
            _ => grads.register(p.id, Tensor::<2>::zeros([p.shape[0], p.shape[1]], &crate::testutil::cpu())),
        }
    }
    optim::build(oc, &model).step(0.5, model, grads)
}

#[test]
fn weight_decay_reaches_matrices_and_centred_gains_only() {
    // With all-zero gradients AdamW's adaptive update is 0/(0 + ε) = 0, so one step changes a
    // parameter only by decoupled decay: θ ← θ·(1 − lr·wd) for decayed ones, θ for the rest.
    for recipe in ["pre", "kitenorm", "dyt", "bhyt", "lns", "zc-rms"] {
        let cfg = ModelConfig {
            d_model: 16,
            n_layers: 2,
            n_heads: 2,
            recipe: RecipeConfig::Preset(recipe.into()),
            ..Default::default()
        };
        let device = crate::testutil::cpu().autodiff();
        // Every centred gain at 0.5, so that its decay shows (it starts at 0).
        let centred = (0..cfg.n_layers)
            .flat_map(|i| ["attn", "ffn"].map(|s| format!("layers.{i}.{s}.input_norm.centred_gain")))
            .chain(["final_norm.centred_gain".to_string()])
            .map(|n| (n, TensorData::new(vec![0.5f32; 16], [16])))
            .collect();
        let model = Transformer::new(&cfg, ParamSource::Overlay(centred, 1), &device).unwrap();
        let before = named_values(&model);
        let oc = crate::run::OptimConfig { weight_decay: 0.1, ..Default::default() };
        let model = step_with_zero_gradients(&oc, model);
        let mut n_decayed = 0;
        for ((name, b), (_, a)) in before.iter().zip(named_values(&model)) {
            let (b, a) = (b.try_to_vec::<f32>().unwrap(), a.try_to_vec::<f32>().unwrap());
            // Qwen3-Next decays its zero-centred gains (stored from 0; perturbed here so that
            // a decay shows).
            let is_decayed =
                name == "tok_emb" || name == "lm_head" || name.contains(".f.w") || name.ends_with(".centred_gain");
            let factor = if is_decayed { 1.0 - 0.5 * 0.1 } else { 1.0 };
            n_decayed += is_decayed as usize;
            for (x, y) in b.iter().zip(&a) {
                assert!(
                    (y - x * factor).abs() <= 1e-6 * x.abs().max(1e-3),
                    "{recipe}: {name}: {x} → {y}, want ×{factor}"
                );
            }
        }
        // Embedding, output head, and W_Q, W_K, W_V, W_O, W_1, W_2, W_3 in each of 2 layers;
        // zc-rms adds its 2·2 input norms' and its final norm's gains.
        let centred = if recipe == "zc-rms" { 2 * 2 + 1 } else { 0 };
        assert_eq!(n_decayed, 2 + 2 * 7 + centred, "{recipe}");
        let decayed: Vec<String> = optim::decayed_params(&model).into_iter().map(|p| p.name).collect();
        assert_eq!(decayed.len(), n_decayed);
        let norms = decayed.iter().filter(|n| n.contains("norm")).count();
        assert_eq!(norms, centred, "{recipe}: only centred gains among the norms' parameters: {decayed:?}");
    }
}

/// `optim.decay_gains`: the gains of the named slots decay as the matrices do (θ ← θ·(1 − η·λ),
/// one step with zero gradients), those of the other slots and every shift do not; Peri-LN has
/// all three kinds of slot (`N_in`, `N_out`, the final norm).
#[test]
fn decay_gains_decays_the_gains_of_the_named_slots_only() {
    use crate::run::optim::GainSlot;
    let cfg = ModelConfig {
        d_model: 16,
        n_layers: 2,
        n_heads: 2,
        recipe: RecipeConfig::Preset("peri".into()),
        ..Default::default()
    };
    let device = crate::testutil::cpu().autodiff();
    let slots = [(vec![GainSlot::Input], ".input_norm.gain"), (vec![GainSlot::Output], ".output_norm.gain")];
    for (decay_gains, suffix) in slots.into_iter().chain([(vec![GainSlot::Final], "final_norm.gain")]) {
        let model = Transformer::new(&cfg, ParamSource::Seeded(3), &device).unwrap();
        let before = named_values(&model);
        let oc = crate::run::OptimConfig { weight_decay: 0.1, decay_gains: decay_gains.clone(), ..Default::default() };
        let model = step_with_zero_gradients(&oc, model);
        let mut gains = 0;
        for ((name, b), (_, a)) in before.iter().zip(named_values(&model)) {
            let matrix = name == "tok_emb" || name == "lm_head" || name.contains(".f.w");
            let gain = name.ends_with(suffix);
            gains += gain as usize;
            let factor = if matrix || gain { 1.0 - 0.5 * 0.1 } else { 1.0 };
            let (b, a) = (b.try_to_vec::<f32>().unwrap(), a.try_to_vec::<f32>().unwrap());
            for (x, y) in b.iter().zip(&a) {
                assert!(
                    (y - x * factor).abs() <= 1e-6 * x.abs().max(1e-3),
                    "{decay_gains:?}: {name}: {x} → {y}, want ×{factor}"
                );
            }
        }
        let want = if suffix.starts_with("final") { 1 } else { 2 * 2 };
        assert_eq!(gains, want, "{decay_gains:?}: the slot's gains in 2 layers × 2 sublayers, or the final norm's");
    }
    let no_decay =
        crate::run::OptimConfig { weight_decay: 0.0, decay_gains: vec![GainSlot::Input], ..Default::default() };
    assert!(no_decay.check().unwrap_err().to_string().contains("optim.weight_decay"));
}

/// nGPT: drawn on the sphere (every embedding row and weight vector along d of norm 1), trained
/// without weight decay whatever the config says, and back on the sphere after a step.
#[test]
fn ngpt_weights_stay_on_the_sphere_without_weight_decay() {
    let cfg = ModelConfig {
        d_model: 16,
        n_layers: 2,
        n_heads: 2,
        recipe: RecipeConfig::Preset("ngpt".into()),
        ..Default::default()
    };
    let device = crate::testutil::cpu().autodiff();
    let model = Transformer::new(&cfg, ParamSource::Seeded(1), &device).unwrap();
    let oc = crate::run::OptimConfig { weight_decay: 0.1, ..Default::default() };
    assert_eq!(optim::settings(&oc, &model).weight_decay, 0.0);
    let unit_norms = |m: &Transformer| {
        let mut worst: f64 = 0.0;
        for (name, v) in named_values(m) {
            let Some(axis) = along_d(&name) else { continue };
            let shape = v.shape().to_vec();
            let x = v.try_to_vec::<f32>().unwrap();
            let (rows, cols) = (shape[0], shape[1]);
            let count = if axis == 0 { cols } else { rows };
            for j in 0..count {
                let sq: f64 = if axis == 0 {
                    (0..rows).map(|i| (x[i * cols + j] as f64).powi(2)).sum()
                } else {
                    (0..cols).map(|i| (x[j * cols + i] as f64).powi(2)).sum()
                };
                worst = worst.max((sq.sqrt() - 1.0).abs());
            }
        }
        worst
    };
    assert!(unit_norms(&model) < 1e-6, "drawn: {}", unit_norms(&model));
    let toks: Vec<i64> = (0..2 * 9).map(|i| (i * 37 % 256) as i64).collect();
    let all = Tensor::<2, Int>::from_data(TensorData::new(toks, [2, 9]), &device);
    let grads = model.loss(all.clone().narrow(1, 0, 8), all.narrow(1, 1, 8), false).0.backward();
    let grads = GradientsParams::from_grads(grads, &model);
    let mut optim = optim::build(&optim::settings(&oc, &model), &model);
    let stepped = optim.step(1e-2, model, grads);
    assert!(unit_norms(&stepped) > 1e-4, "an Adam step leaves the sphere");
    let projected = stepped.project_to_sphere();
    assert!(unit_norms(&projected) < 1e-6, "projected: {}", unit_norms(&projected));
}

/// The axis along which a matrix's unit vectors lie under nGPT (0: columns), by its name.
fn along_d(name: &str) -> Option<usize> {
    if name == "tok_emb" || name.ends_with(".wo") || name.ends_with(".w2") {
        Some(1)
    } else if name == "lm_head" || [".wq", ".wk", ".wv", ".w1", ".w3"].iter().any(|s| name.ends_with(s)) {
        Some(0)
    } else {
        None
    }
}

#[test]
fn global_clipping_scales_by_the_norm_over_all_parameters() {
    let cfg = ModelConfig { d_model: 16, n_layers: 2, n_heads: 2, ..Default::default() };
    let device = crate::testutil::cpu().autodiff();
    let model = Transformer::new(&cfg, ParamSource::Seeded(3), &device).unwrap();
    let toks: Vec<i64> = (0..2 * 9).map(|i| (i * 37 % 256) as i64).collect();
    let all = Tensor::<2, Int>::from_data(TensorData::new(toks, [2, 9]), &device);
    let grads = || model.loss(all.clone().narrow(1, 0, 8), all.clone().narrow(1, 1, 8), false).0.backward();
    // The independent norm: a plain f64 sum over every gradient entry.
    let direct: f64 = named_grads(&model, &grads())
        .iter()
        .flat_map(|(_, g)| g.as_ref().unwrap().try_to_vec::<f32>().unwrap())
        .map(|v| (v as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    let (_, norms, scale) = clip_global(&model, GradientsParams::from_grads(grads(), &model), 0.0);
    assert!((norms.total - direct).abs() < 1e-5 * direct, "{} vs {direct}", norms.total);
    assert_eq!(scale, 1.0, "threshold 0 disables clipping");
    let max = direct / 4.0;
    let gp = GradientsParams::from_grads(grads(), &model);
    let (clipped, norms, scale) = clip_global(&model, gp, max);
    assert!((scale - 0.25).abs() < 1e-5);
    let (_, after, _) = clip_global(&model, clipped, 0.0);
    assert!((after.total - max).abs() < 1e-4 * max, "clipped norm {} vs threshold {max}", after.total);
    for ((n, a), (_, b)) in after.per_param.iter().zip(&norms.per_param) {
        assert!(
            (a - b * 0.25).abs() <= 1e-5 * b.max(1e-12),
            "{n}: every tensor keeps its direction and shrinks by the same factor"
        );
    }
}

#[test]
fn same_config_and_seeds_give_the_same_loss_curve() {
    let root = temp_dir("determinism");
    let mut a = tiny_cfg(&root, 8);
    a.run.dir = root.join("a");
    let mut b = a.clone();
    b.run.dir = root.join("b");
    let mut c = a.clone();
    c.run.dir = root.join("c");
    c.train.sampler_seed = 8;
    run(a);
    run(b);
    run(c);
    let (la, lb, lc) = (train_losses(&root.join("a")), train_losses(&root.join("b")), train_losses(&root.join("c")));
    assert_eq!(la.len(), 8);
    assert_eq!(la, lb, "identical config and seeds");
    assert_ne!(la, lc, "another sampler seed draws other windows");
}

#[test]
fn accumulated_micro_batches_match_the_full_batch() {
    let root = temp_dir("accum");
    let mut full = tiny_cfg(&root, 4);
    full.run.dir = root.join("full");
    let mut acc = full.clone();
    acc.run.dir = root.join("acc");
    acc.train.micro_batch_size = Some(1);
    run(full);
    run(acc);
    let (f, a) = (train_losses(&root.join("full")), train_losses(&root.join("acc")));
    for (x, y) in f.iter().zip(&a) {
        assert!((x - y).abs() < 2e-4, "4 × 1 accumulated vs 1 × 4: {f:?} vs {a:?}");
    }
}

#[test]
fn an_interrupted_run_resumes_to_the_identical_curve() {
    resumes_to_the_identical_curve("resume", |_| {});
}

/// Every optimizer's state (momenta, NorMuon's per-neuron moments, the hyperball radius and
/// AdamH's step count) goes through the checkpoint: a run stopped and resumed equals the
/// uninterrupted one bit for bit; so does a run with a z-loss and update clipping.
#[test]
fn every_optimizer_resumes_to_the_identical_curve() {
    use crate::run::optim::OptimizerName;
    for name in OptimizerName::ALL.into_iter().filter(|&n| n != OptimizerName::Adamw) {
        resumes_to_the_identical_curve(&format!("resume-{name}"), |c| c.optim.name = name);
    }
    resumes_to_the_identical_curve("resume-zloss-clip", |c| {
        c.train.z_loss = 1e-3;
        c.optim.update_clip = 0.5;
    });
}

/// ZClip's statistics go through the checkpoint, cut at step 5 both inside its warm-up (the
/// kept norms) and after it (the moving mean and variance, with spikes at a low threshold);
/// AGC (stateless) resumes too. Each rule is seen to clip in the uninterrupted run.
#[test]
fn a_run_under_zclip_or_agc_resumes_to_the_identical_curve() {
    use crate::run::clip_rule::{AgcSettings, ClipRule, ZClipSettings};
    let zclip = |warmup_steps| ClipRule::Zclip(ZClipSettings { warmup_steps, z_thresh: 0.5, ..Default::default() });
    let agc = ClipRule::Agc(AgcSettings { clipping: 0.002, ..Default::default() });
    for (name, rule) in [("resume-zclip-warming", zclip(7)), ("resume-zclip-tracking", zclip(3)), ("resume-agc", agc)] {
        let records = resumes_to_the_identical_curve(name, |c| {
            c.optim.clip = rule;
            c.optim.grad_clip = 0.0;
        });
        use crate::run::metrics::ClipStepRecord::{Agc, Zclip};
        let clipped = records.iter().filter(|r| match r {
            MetricsRecord::Train(t) => match t.clip.as_deref() {
                Some(Zclip { spike, .. }) => *spike && t.clipped,
                Some(Agc { clipped, units }) => *clipped > 0 && clipped < units,
                None => false,
            },
            _ => false,
        });
        assert!(clipped.count() > 0, "{name}: the rule clipped no step");
    }
}

/// TaperNorm's buffers go through the checkpoint: cut at step 5 while its averages collect
/// (S = 6), the resumed run calibrates, tapers (E = 13) and ends as the uninterrupted one.
#[test]
fn a_tapernorm_run_resumes_to_the_identical_curve() {
    let overlay: crate::recipe::RecipeOverlay =
        toml::from_str("preset = \"tapernorm\"\ntaper = { start = 0.45, end = 0.9 }").unwrap();
    resumes_to_the_identical_curve("resume-tapernorm", |c| {
        c.model.recipe = crate::recipe::RecipeConfig::Custom(Box::new(overlay.clone()))
    });
}

/// A MoE run's selection biases (buffers the after-step balancing moves) and its routing
/// records go through the checkpoint: DeepSeek V3's router with a bias step large enough to
/// move the selection within the run, and OLMoE's with both balancing losses.
#[test]
fn a_moe_run_resumes_to_the_identical_curve() {
    let deepseek = "experts = 4\ntop_k = 2\nd_expert = 16\nshared = 1\nrouter = { kind = \"sigmoid\", groups = 2, \
                    top_groups = 1, scale = 2.5, bias_update = 0.01 }";
    let olmoe = "experts = 4\ntop_k = 2\nd_expert = 16\naux_loss = 0.01\nz_loss = 0.001";
    for (name, moe) in [("resume-moe-deepseek", deepseek), ("resume-moe-olmoe", olmoe)] {
        resumes_to_the_identical_curve(name, |c| c.model.moe = Some(toml::from_str(moe).unwrap()));
    }
    // Every step records its routing: both layers are MoE (first_dense 0), each with a load CV,
    // and the router z is positive (a mean of squares).
    let root = temp_dir("moe-records");
    let mut cfg = tiny_cfg(&root, 6);
    cfg.model.moe = Some(toml::from_str(deepseek).unwrap());
    let (t, _) = run(cfg);
    let train = Metrics::read(&layout::metrics(&t.dir)).unwrap().train;
    let moe: Vec<_> = train.iter().filter_map(|r| r.moe.clone()).collect();
    assert_eq!(moe.len(), 6, "every step records its routing");
    assert!(moe.iter().all(|m| m.load_cv.len() == 2 && m.dead.len() == 2 && m.router_z > 0.0), "{moe:?}");
}

/// Returns the uninterrupted run's records (timings zeroed).
fn resumes_to_the_identical_curve(name: &str, edit: impl Fn(&mut RunConfig)) -> Vec<MetricsRecord> {
    let root = temp_dir(name);
    let mut whole = tiny_cfg(&root, 14);
    edit(&mut whole);
    whole.run.dir = root.join("whole");
    whole.probe.every = 3;
    let mut cut = whole.clone();
    cut.run.dir = root.join("cut");
    let (_, o) = run(whole);
    assert!(matches!(o, Outcome::Finished { .. }));
    // Stop at step 8: the checkpoint is at 5, so steps 6–8 in metrics.jsonl must be replayed.
    let mut t = start(cut, false, &quiet).unwrap();
    t.stop_after = Some(8);
    let mut p = super::progress::Progress::new(14, 0, true);
    assert_eq!(t.run(&mut p).unwrap(), Outcome::Stopped { step: 8 });
    drop(t);
    let Resumed::Trainer(mut t) = resume(&root.join("cut"), &quiet).unwrap() else { panic!("not finished yet") };
    assert_eq!(t.state.step, 5);
    assert!(matches!(t.run(&mut p).unwrap(), Outcome::Finished { .. }));
    let read = |d: &str| records_without_timings(&root.join(d));
    assert_eq!(read("whole"), read("cut"), "every train and eval record, bit for bit");
    let w = |d: &str| crate::io::tensors::read(&layout::final_weights(&root.join(d))).unwrap().tensors;
    assert_eq!(w("whole"), w("cut"), "identical final weights");
    let probes = |d: &str| std::fs::read_to_string(layout::probes(&root.join(d))).unwrap();
    assert_eq!(probes("whole"), probes("cut"), "the probes (gradient CV, spikes included) continue exactly");
    assert!(matches!(resume(&root.join("cut"), &quiet).unwrap(), Resumed::AlreadyFinished(_)));
    read("whole")
}

#[test]
fn training_lowers_the_validation_loss() {
    let root = temp_dir("learns");
    let mut cfg = tiny_cfg(&root, 80);
    cfg.run.eval_every = 80;
    cfg.train.batch_size = 8;
    let (t, o) = run(cfg);
    let Outcome::Finished { val_loss, .. } = o else { panic!("{o:?}") };
    // Initial loss is ≈ ln 256 = 5.55 for bytes; the synthetic corpus is far more predictable.
    // A model that ignores context cannot beat the corpus's byte-unigram entropy; one that
    // learned something from context must.
    let text = std::fs::read(root.join("corpus.txt")).unwrap();
    let mut counts = [0f64; 256];
    text.iter().for_each(|&b| counts[b as usize] += 1.0);
    let n = text.len() as f64;
    let unigram: f64 = counts.iter().filter(|&&c| c > 0.0).map(|&c| -(c / n) * (c / n).ln()).sum();
    assert!(val_loss < unigram - 0.3, "val loss {val_loss} vs unigram entropy {unigram}");
    assert!(layout::final_weights(&t.dir).is_file());
}

#[test]
fn divergence_is_recorded_with_its_step() {
    let root = temp_dir("diverge");
    let mut cfg = tiny_cfg(&root, 30);
    cfg.optim.lr = 50.0;
    cfg.optim.grad_clip = 0.0;
    cfg.schedule.kind = ScheduleKind::Constant;
    cfg.schedule.warmup_fraction = 0.0;
    let (t, o) = run(cfg);
    let Outcome::Diverged { step, reason } = o else { panic!("lr 50 must diverge: {o:?}") };
    assert!(step > 1 && step <= 30, "{step}");
    assert_eq!(layout::read_status(&t.dir).unwrap(), Some(Status::Diverged { step, reason }));
    assert_eq!(train_losses(&t.dir).len(), step - 1, "the diverged step is not logged as a training step");
}

#[test]
fn a_failed_start_leaves_no_run_directory() {
    let root = temp_dir("badstart");
    let mut cfg = tiny_cfg(&root, 5);
    cfg.train.seq_len = 10_000_000;
    let e = start(cfg.clone(), false, &quiet).err().expect("seq_len longer than memory and the corpus");
    assert!(format!("{e:#}").contains("train.seq_len"), "{e:#}");
    assert!(!cfg.run.dir.exists());
    let mut ok = tiny_cfg(&root, 2);
    ok.run.checkpoint_every = 0;
    run(ok.clone());
    let e = start(ok.clone(), false, &quiet).err().expect("run dir taken");
    assert!(format!("{e:#}").contains("--resume"), "{e:#}");
    assert!(start(ok, true, &quiet).is_ok(), "--force replaces it");
}

/// A budget given by --set replaces the config file's: the last one given is the run's
/// length (a file with `tokens_per_param` and `--set train.steps=7` is not "several").
#[test]
fn a_budget_set_on_the_command_line_replaces_the_files() {
    let root = temp_dir("budgetset");
    let p = root.join("c.toml");
    std::fs::write(&p, "[train]\ntokens_per_param = 20\n").unwrap();
    let c = RunConfig::load(Some(&p), &["train.steps=7".to_string()]).unwrap();
    assert_eq!((c.train.steps, c.train.tokens_per_param), (Some(7), None));
    let sets = ["train.steps=7".to_string(), "train.tokens=1e6".to_string()];
    let c = RunConfig::load(Some(&p), &sets).unwrap();
    assert_eq!((c.train.steps, c.train.tokens, c.train.tokens_per_param), (None, Some(1e6), None));
}

#[test]
fn config_errors_name_the_key_and_the_fix() {
    let root = temp_dir("cfgerr");
    let write = |text: &str| {
        let p = root.join("c.toml");
        std::fs::write(&p, text).unwrap();
        p
    };
    let err = |p: &Path, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        match RunConfig::load(Some(p), &sets).and_then(|c| c.clone().check().map(|_| c)) {
            Ok(_) => panic!("accepted"),
            Err(e) => format!("{e:#}"),
        }
    };
    let e = err(&write("[optim]\nlrr = 1e-3\n"), &[]);
    assert!(e.contains("unknown field `lrr`") && e.contains("line 2"), "{e}");
    let e = err(&write("[train]\nbatch_size = 0\n"), &[]);
    assert!(e.contains("train.batch_size must be > 0"), "{e}");
    let e = err(&write(""), &["train.batch_size=8", "train.micro_batch_size=3"]);
    assert!(e.contains("divide train.batch_size"), "{e}");
    let e = err(&write("[train]\nsteps = 10\ntokens_per_param = 20\n"), &[]);
    assert!(e.contains("not several"), "{e}");
    let e = err(&write("[model\n"), &[]);
    assert!(e.contains("not valid TOML"), "{e}");
    let e = err(&root.join("missing.toml"), &[]);
    assert!(e.contains("cannot read config"), "{e}");
    let e = err(&write(""), &["optim.lr"]);
    assert!(e.contains("key=value"), "{e}");
    // --set reaches nested recipe fields and turns a preset name into an overlay.
    let c = RunConfig::load(
        Some(&write("[model]\nrecipe = \"peri\"\n")),
        &["model.recipe.norm=rmsnorm".into(), "optim.lr=2e-3".into()],
    )
    .unwrap();
    assert_eq!(c.optim.lr, 2e-3);
    assert_eq!(c.model.validate().unwrap().0.name, "peri*");
    let c = RunConfig::load(None, &["train.tokens_per_param=20".into()]).unwrap();
    c.clone().check().unwrap();
    assert_eq!(c.train.steps, None, "a ratio replaces the default step count");
    // 20 tokens/param for a 1000-parameter model at 4 × 32 tokens per step: ⌈20000 / 128⌉.
    let mut c2 = c.clone();
    c2.train.batch_size = 4;
    c2.train.seq_len = 32;
    let n = crate::model::base::params::ParamCounts { all: 1000, non_embedding: 400 };
    assert_eq!(c2.total_steps(n).unwrap(), 157);
    // `train.param_count = "non_embedding"`: ⌈20 · 400 / 128⌉.
    let c3 =
        RunConfig::load(None, &["train.tokens_per_param=20".into(), "train.param_count=non_embedding".into()]).unwrap();
    let c3 = RunConfig { train: crate::run::TrainSection { batch_size: 4, seq_len: 32, ..c3.train }, ..c3 };
    assert_eq!(c3.total_steps(n).unwrap(), 63);
}

#[test]
fn the_regulariser_is_logged_apart_from_the_cross_entropy() {
    let root = temp_dir("reg");
    let mut cfg = tiny_cfg(&root, 3);
    cfg.model.recipe = RecipeConfig::Preset("kitenorm".into()); // λ = 1 (KiteNorm Table 2)
    let (t, _) = run(cfg);
    let recs = Metrics::read(&layout::metrics(&t.dir)).unwrap().train;
    for r in &recs {
        let (loss, ce, reg) = (r.loss, r.ce, r.reg.unwrap());
        assert!(reg >= 0.0);
        assert!((loss - (ce + 1.0 * reg)).abs() < 1e-5, "loss = CE + λ·R: {r:?}");
    }
    let root = temp_dir("noreg");
    let (t, _) = run(tiny_cfg(&root, 2));
    let r = &Metrics::read(&layout::metrics(&t.dir)).unwrap().train[0];
    assert!(r.reg.is_none() && r.loss == r.ce, "pre-norm has no regulariser: {r:?}");
}

// Probes during training (the probe statistics themselves are tested in `probe/tests.rs`).

#[test]
fn probes_never_change_training() {
    let root = temp_dir("probe-invariance");
    let losses = |every: usize, dir: &str| {
        let mut c = tiny_cfg(&root, 6);
        c.run.dir = root.join(dir);
        c.probe.every = every;
        c.probe.tensorboard = every > 0;
        let mut t = start(c, false, &|_| {}).unwrap();
        t.run(&mut super::progress::Progress::new(6, 0, true)).unwrap();
        crate::io::jsonl::read::<MetricsRecord>(&layout::metrics(&root.join(dir)))
            .unwrap()
            .into_iter()
            .map(|r| match r {
                MetricsRecord::Train(t) => t.loss,
                MetricsRecord::Eval(e) => e.val_loss,
                MetricsRecord::Diverged(d) => panic!("diverged: {d:?}"),
                MetricsRecord::Lost(l) => panic!("lost records: {l:?}"),
                MetricsRecord::Tasks(t) => panic!("tasks: {t:?}"),
                MetricsRecord::Rollback(r) => panic!("rollback: {r:?}"),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(losses(1, "probed"), losses(0, "plain"));
    let probes = std::fs::read_to_string(root.join("probed/probes.jsonl")).unwrap();
    assert_eq!(probes.lines().count(), 6, "a probe record per step at probe.every = 1");
    assert!(std::fs::read_dir(root.join("probed/tb")).unwrap().next().is_some());
}

#[test]
fn after_training_at_a_high_learning_rate_pre_norm_variance_escalates_beyond_peri() {
    // The Peri-LN paper's §4.4.2: at init pre and peri both grow linearly; with training at a high
    // learning rate pre-norm's deep hidden states grow far more, while Peri-LN's output norm
    // caps what each sublayer adds. configs/probe-deep.toml shrunk to 30 steps of 8 × 64 bytes
    // of the built-in corpus: 16 layers, d = 64, lr 1e-2, fixed seeds.
    let root = temp_dir("ordering");
    let deep_var = |recipe: &str| {
        let mut c = tiny_cfg(&root, 30);
        c.data = crate::data::DataConfig::default();
        c.run.dir = root.join(recipe);
        c.model.n_layers = 16;
        c.model.d_model = 64;
        c.model.n_heads = 4;
        c.train.batch_size = 8;
        c.train.seq_len = 64;
        c.model.recipe = RecipeConfig::Preset(recipe.into());
        c.optim.lr = 1e-2;
        c.probe.every = 30;
        c.probe.tensorboard = false;
        let mut t = start(c, false, &|_| {}).unwrap();
        t.run(&mut super::progress::Progress::new(30, 0, true)).unwrap();
        let probes = crate::io::jsonl::read::<crate::probe::ProbeRecord>(&layout::probes(&root.join(recipe))).unwrap();
        probes.last().unwrap().forward.sublayers[31].x.var
    };
    let (pre, peri) = (deep_var("pre"), deep_var("peri"));
    eprintln!("Var(X_32) after 30 steps: pre {pre:.3e}, peri {peri:.3e}");
    assert!(pre > 10.0 * peri, "pre {pre} vs peri {peri}");
}

// Faults: lost or damaged checkpoints, two writers, unwritable files, leftovers.

/// Runs `dir` (config `cfg`) until `stop` steps, as if killed there.
fn run_until(mut cfg: RunConfig, dir: &str, root: &Path, stop: usize) {
    cfg.run.dir = root.join(dir);
    let mut t = start(cfg, false, &quiet).unwrap();
    t.stop_after = Some(stop);
    let mut p = super::progress::Progress::new(14, 0, true);
    assert_eq!(t.run(&mut p).unwrap(), Outcome::Stopped { step: stop });
}

fn finish(dir: &Path, log: &dyn Fn(&str)) {
    let Resumed::Trainer(mut t) = resume(dir, log).unwrap() else { panic!("not finished yet") };
    t.run(&mut super::progress::Progress::new(14, 0, true)).unwrap();
}

/// The names in a directory, sorted.
fn entry_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// metrics.jsonl without its timings (they differ between sessions; no other field may).
pub(super) fn records_without_timings(dir: &Path) -> Vec<MetricsRecord> {
    crate::io::jsonl::read::<MetricsRecord>(&layout::metrics(dir))
        .unwrap()
        .into_iter()
        .map(|r| match r {
            MetricsRecord::Train(t) => {
                MetricsRecord::Train(crate::run::metrics::TrainRecord { tokens_per_s: 0.0, wall_s: 0.0, ..t })
            }
            MetricsRecord::Eval(e) => MetricsRecord::Eval(crate::run::metrics::EvalRecord { wall_s: 0.0, ..e }),
            other => other,
        })
        .collect()
}

#[test]
fn a_lost_latest_json_or_a_damaged_checkpoint_still_resumes_to_the_same_curve() {
    let root = temp_dir("damaged");
    let cfg = tiny_cfg(&root, 14); // checkpoints every 5 steps, the newest 2 kept
    let mut whole = cfg.clone();
    whole.run.dir = root.join("whole");
    run(whole);
    let want = records_without_timings(&root.join("whole"));

    // latest.json deleted: the newest checkpoint (step 10) is found by scanning.
    run_until(cfg.clone(), "lost", &root, 12);
    std::fs::remove_file(layout::latest_checkpoint(&root.join("lost"))).unwrap();
    let used = std::cell::RefCell::new(Vec::new());
    finish(&root.join("lost"), &|m| used.borrow_mut().push(m.to_string()));
    assert!(used.borrow().iter().any(|m| m.contains("step-000010")), "{:?}", used.borrow());
    assert_eq!(records_without_timings(&root.join("lost")), want);

    // The newest checkpoint truncated: the one before it is used, and the log says so.
    run_until(cfg.clone(), "torn", &root, 12);
    let w = layout::checkpoint_weights(&layout::checkpoints(&root.join("torn")).join("step-000010"));
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap();
    let used = std::cell::RefCell::new(Vec::new());
    finish(&root.join("torn"), &|m| used.borrow_mut().push(m.to_string()));
    let log = used.borrow().join("\n");
    assert!(log.contains("step-000010") && log.contains("checksum") && log.contains("using"), "{log}");
    assert!(log.contains("step-000005"), "{log}");
    assert_eq!(records_without_timings(&root.join("torn")), want);

    // Every checkpoint damaged: a clear error, and nothing is deleted.
    run_until(cfg, "gone", &root, 12);
    for step in ["step-000005", "step-000010"] {
        std::fs::remove_file(layout::checkpoint_optimizer(&layout::checkpoints(&root.join("gone")).join(step)))
            .unwrap();
    }
    let e = format!("{:#}", resume(&root.join("gone"), &quiet).err().unwrap());
    assert!(e.contains("every checkpoint") && e.contains("nothing was deleted"), "{e}");
    assert!(layout::checkpoint_state(&layout::checkpoints(&root.join("gone")).join("step-000010")).is_file());
}

#[test]
fn a_second_writer_is_refused_while_the_first_trains() {
    let root = temp_dir("lock");
    let cfg = tiny_cfg(&root, 6);
    let first = start(cfg.clone(), false, &quiet).unwrap();
    let e = format!("{:#}", resume(&first.dir, &quiet).err().unwrap());
    assert!(e.contains("being trained right now") && !e.contains("stopped"), "{e}");
    let e = format!("{:#}", start(cfg.clone(), true, &quiet).err().unwrap());
    assert!(e.contains("being trained right now"), "--force does not take a run from its writer: {e}");
    drop(first);
    finish(&cfg.run.dir, &quiet);
    assert!(matches!(layout::read_status(&cfg.run.dir).unwrap(), Some(Status::Finished { .. })));
}

#[test]
fn an_unwritable_checkpoint_names_the_file_stops_cleanly_and_stays_resumable() {
    let root = temp_dir("unwritable");
    let cfg = tiny_cfg(&root, 8);
    let mut t = start(cfg.clone(), false, &quiet).unwrap();
    // A file where the checkpoints directory must go: creating it fails, as on a full disk.
    let blocker = layout::checkpoints(&t.dir);
    std::fs::write(&blocker, b"not a directory").unwrap();
    let e = format!("{:#}", t.run(&mut super::progress::Progress::new(8, 0, true)).err().unwrap());
    assert!(e.contains("cannot create") && e.contains(&blocker.display().to_string()), "{e}");
    drop(t);
    assert_eq!(layout::read_status(&cfg.run.dir).unwrap(), Some(Status::Running { step: 0, total_steps: 8 }));
    std::fs::remove_file(&blocker).unwrap();
    // What a killed writer leaves behind is cleared at the next start.
    std::fs::create_dir_all(layout::checkpoints(&cfg.run.dir).join(".step-000099.tmp")).unwrap();
    std::fs::write(layout::checkpoints(&cfg.run.dir).join(".latest.json.4242.0.tmp"), b"{").unwrap();
    finish(&cfg.run.dir, &quiet);
    let left: Vec<String> =
        entry_names(&layout::checkpoints(&cfg.run.dir)).into_iter().filter(|n| n.ends_with(".tmp")).collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(matches!(layout::read_status(&cfg.run.dir).unwrap(), Some(Status::Finished { .. })));
}

#[test]
fn eval_every_zero_means_only_at_the_end_and_keep_checkpoints_is_honoured() {
    let root = temp_dir("eval0");
    let mut cfg = tiny_cfg(&root, 12);
    cfg.run.eval_every = 0;
    cfg.run.checkpoint_every = 2;
    cfg.run.keep_checkpoints = 3;
    let (t, _) = run(cfg);
    let m = Metrics::read(&layout::metrics(&t.dir)).unwrap();
    assert_eq!(m.eval.iter().map(|e| e.step).collect::<Vec<_>>(), [12]);
    let kept: Vec<String> =
        entry_names(&layout::checkpoints(&t.dir)).into_iter().filter(|n| n.starts_with("step-")).collect();
    assert_eq!(kept, ["step-000008", "step-000010", "step-000012"]);
}

/// Skip-step on an injected spike: the batch of step 16 is replaced by random tokens
/// ([`run_corrupting`]). With `train.skip_step_sigma` its update is refused and recorded,
/// the run goes on, and the rule's statistics leave the spike out; without the rule the same
/// spike (same weights, same batch, so the same loss) is applied and changes what follows.
#[test]
fn a_corrupted_batch_is_skipped_recorded_and_left_out_of_the_statistics() {
    let root = temp_dir("skip-step");
    let mut cfg = tiny_cfg(&root, 24);
    cfg.optim.lr = 1e-2;
    cfg.train.skip_step_sigma = 3.0;
    cfg.train.skip_step_window = 8;
    cfg.train.skip_step_min_history = 8;
    let (t, o) = run_corrupting(cfg.clone(), Some(16));
    assert!(matches!(o, Outcome::Finished { .. }), "{o:?}");
    let train = Metrics::read(&layout::metrics(&cfg.run.dir)).unwrap().train;
    let skipped: Vec<usize> = train.iter().filter(|r| r.skipped.is_some()).map(|r| r.step).collect();
    assert_eq!(skipped, [16], "only the corrupted step: {:?}", train.iter().map(|r| r.loss).collect::<Vec<_>>());
    let spike = &train[15];
    assert!(spike.skipped.as_ref().unwrap().contains("σ"), "{:?}", spike.skipped);
    assert_eq!(t.state.skip.skipped, 1);
    assert!(!t.state.skip.losses.contains(&spike.loss), "the skipped loss stays out of the statistics");
    assert_eq!(t.state.skip.losses.len(), 8);

    let mut plain = cfg.clone();
    plain.run.dir = root.join("no-skip");
    plain.train.skip_step_sigma = 0.0;
    run_corrupting(plain.clone(), Some(16));
    let applied = Metrics::read(&layout::metrics(&plain.run.dir)).unwrap().train;
    assert!(applied.iter().all(|r| r.skipped.is_none()));
    assert_eq!(
        &applied[..16].iter().map(|r| r.loss).collect::<Vec<_>>(),
        &train[..16].iter().map(|r| r.loss).collect::<Vec<_>>()
    );
    assert_ne!(applied[16].loss, train[16].loss, "the applied spike changes the next step");
}

/// The Normalization chapter's alert: a corrupted batch after the warm-up pushes the gradient norm past 1.5× its
/// warm-up average; the alert is recorded in `alerts.jsonl` and reaches the alert command as a
/// JSON line.
#[test]
fn a_gradient_norm_alert_is_recorded_and_sent_to_the_command() {
    let root = temp_dir("alert");
    let mut cfg = tiny_cfg(&root, 24);
    cfg.optim.lr = 1e-2;
    cfg.schedule.warmup_fraction = 0.25;
    cfg.train.divergence_factor = 100.0;
    cfg.probe.alert_warmup_factor = 1.5;
    let got = root.join("got.jsonl");
    cfg.probe.alert_command = Some(format!("cat >> '{}'", got.display()));
    run_corrupting(cfg.clone(), Some(18));
    let norms: Vec<f64> =
        Metrics::read(&layout::metrics(&cfg.run.dir)).unwrap().train.iter().map(|r| r.grad_norm).collect();
    let alerts: Vec<crate::probe::alert::AlertRecord> = crate::io::jsonl::read(&layout::alerts(&cfg.run.dir)).unwrap();
    assert!(alerts.iter().any(|a| a.step == 18), "{alerts:?} {norms:?}");
    // Warm-up: round(0.25 · 24) = 6 steps; the bar is 1.5 × the mean of their norms.
    let warmup_mean = norms[..6].iter().sum::<f64>() / 6.0;
    for a in &alerts {
        assert!((a.warmup_mean - warmup_mean).abs() < 1e-12 * warmup_mean, "{a:?} vs {warmup_mean}");
        assert!(a.step > 6 && a.grad_norm > 1.5 * warmup_mean && a.grad_norm == norms[a.step - 1], "{a:?}");
    }
    let expected: Vec<usize> = (7..=24).filter(|&s| norms[s - 1] > 1.5 * warmup_mean).collect();
    assert_eq!(alerts.iter().map(|a| a.step).collect::<Vec<_>>(), expected);
    let sent: Vec<crate::probe::alert::AlertRecord> = crate::io::jsonl::read(&got).unwrap();
    assert_eq!(sent, alerts, "the command saw every alert");
}

/// A pairs config: 60 `n => word` pairs in a TSV file, no real held-out set.
fn pairs_cfg(root: &Path, steps: usize) -> RunConfig {
    let words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
    let tsv: String =
        (0..60).map(|i| format!("{} {}\t{} {}\n", i / 10, i % 10, words[i / 10], words[i % 10])).collect();
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("pairs.tsv"), tsv).unwrap();
    let mut c = tiny_cfg(root, steps);
    c.data.task = crate::data::Task::Pairs;
    c.data.corpus = root.join("pairs.tsv").display().to_string();
    c.data.heldout = "none".into();
    c.train.batch_size = 8;
    c.train.micro_batch_size = Some(4);
    c
}

/// A pairs run trains on target tokens, resumes to the identical curve (the example sampler's
/// state is checkpointed), and ends with every held-out pair decoded and scored.
#[test]
fn a_pairs_run_trains_resumes_identically_and_scores_its_held_out_pairs() {
    let root = temp_dir("pairs");
    let mut whole = pairs_cfg(&root, 12);
    whole.run.dir = root.join("whole");
    let (t, o) = run(whole.clone());
    assert!(matches!(o, Outcome::Finished { .. }), "{o:?}");
    assert!(t.data.examples.as_ref().unwrap().train.len() == 54, "every 10th of 60 pairs is held out");
    drop(t);
    let e: crate::run::pairs_eval::PairsEval = crate::io::json::read(&layout::pairs_eval(&root.join("whole"))).unwrap();
    assert_eq!(e.sets.len(), 1);
    assert_eq!((e.sets[0].name.as_str(), e.sets[0].overall.n, e.predictions.len()), ("held-out", 6, 6));
    assert_eq!(e.predictions[0].source, "0 9", "the 10th pair, in file order");
    let mut cut = whole;
    cut.run.dir = root.join("cut");
    run_until(cut, "cut", &root, 7);
    finish(&root.join("cut"), &quiet);
    let read = |d: &str| records_without_timings(&root.join(d));
    assert_eq!(read("whole"), read("cut"), "every train and eval record, bit for bit");
    let scores = |d: &str| {
        let e: crate::run::pairs_eval::PairsEval = crate::io::json::read(&layout::pairs_eval(&root.join(d))).unwrap();
        e.predictions
    };
    assert_eq!(scores("whole"), scores("cut"), "the same predictions");
}

/// `train.checkpoint_activations` recomputes activations instead of keeping them: the loss and
/// every gradient are bit for bit those without it, with the fused and the composite kernels.
#[test]
fn activation_checkpointing_leaves_every_gradient_unchanged() {
    use crate::kernels::Kernels;
    let cpu = crate::testutil::cpu();
    for kernels in [Kernels::Fused, Kernels::Composite] {
        let cfg = ModelConfig { d_model: 16, n_heads: 2, n_layers: 2, vocab_size: 32, kernels, ..Default::default() };
        let grads = |checkpoint: bool| {
            let ad = super::setup::autodiff_device(&cpu, checkpoint);
            let model = Transformer::new(&cfg, ParamSource::Seeded(3), &ad).unwrap();
            let ids: Vec<i64> = (0..2 * 9).map(|i| (i * 7 % 32) as i64).collect();
            let all = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, 9]), &ad);
            let (loss, _, _) = model.loss(all.clone().narrow(1, 0, 8), all.narrow(1, 1, 8), false);
            let g = loss.clone().backward();
            (loss.into_data().try_to_vec::<f32>().unwrap(), named_grads(&model, &g))
        };
        let (plain, with) = (grads(false), grads(true));
        assert_eq!(plain.0, with.0, "{kernels:?}: loss");
        assert_eq!(plain.1, with.1, "{kernels:?}: gradients");
    }
}
