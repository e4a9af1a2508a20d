//! Every recipe against the PyTorch reference (tools/make_reference_fixtures.py, float64):
//! same weights and tokens → logits within 1e-5 relative, every parameter gradient of
//! CE (+ λ·R for recipes with the variance regulariser) within 1e-4 relative (a provably dead
//! parameter's, whose true gradient is 0, within f32 rounding noise: [`DEAD_NOISE`]).
//!
//! Then, in the style of llm.c's `test_gpt2.c`, a multi-step trajectory: from the same weights
//! and fixed batches, normlab's own step (micro-batch accumulation, global clipping, AdamW with
//! its decay groups, warm-up + cosine schedule, regulariser) against `torch.optim.AdamW` and
//! `clip_grad_norm_` for 12 steps: the loss and gradient norm of every step within
//! [`TRAJ_LOSS_TOL`] relative and the final weights within [`TRAJ_WEIGHT_TOL`].

use burn::tensor::{Device, Int, Tensor, TensorData};
use normlab::init::ParamSource;
use normlab::io::tensors::{self, TensorFile};
use normlab::kernels::Kernels;
use normlab::model::base::params::{named_grads, named_values};
use normlab::model::base::terms::StepReadings;
use normlab::model::hooks::StepSeen;
use normlab::model::transformer::{Objective, Z_LOSS};
use normlab::model::{ModelConfig, Transformer};
use normlab::run::{OptimConfig, ScheduleConfig};
use normlab::train::{optim, step};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LOGIT_TOL: f64 = 1e-5;
const GRAD_TOL: f64 = 1e-4;
/// Per-step loss and gradient norm, relative: f32 against f64 over 12 AdamW steps (measured:
/// ≤ 2e-7).
const TRAJ_LOSS_TOL: f64 = 1e-5;
/// Final weights: max |Δw| over a tensor, against the learning rate (3e-3), which bounds what
/// one Adam step moves a weight: 1 % of one step (measured: ≤ 1e-6).
const TRAJ_WEIGHT_TOL: f64 = 1e-2 * 3e-3;
/// Parameters whose float64 reference gradient is below this fraction of the largest are
/// provably dead (KiteNorm's outer β′ but the last: `normlab recipes kitenorm`). Their exact
/// values are not compared: Adam divides their f32 rounding noise (~1e-8) by √v̂ + ε with
/// ε = 1e-8 and moves them by up to ~lr per step, where float64 noise (~1e-17) moves them by
/// nothing. They cannot change the output, which the per-step losses confirm.
const DEAD_GRAD: f64 = 1e-12;
/// The f32 gradient of such a parameter, against the largest gradient: its rounding noise
/// (f32's ε is 1.2e-7; measured up to 1.3e-7 with the AVX2 matmul, 6.6e-8 with burn's), held
/// to about eight ε. Before, these were compared as ordinary gradients against 1e-3 of the
/// largest, which allowed 1e-7: one ε, passed or failed by the summation order.
const DEAD_NOISE: f64 = 1e-6;

/// The first sublayer's stream mixing (`layers.0.attn.hc.*`, Hyper-Connections and mHC): every
/// stream starts as the embedding, so the read weights and the residual mixing of the first
/// sublayer get gradients only through the streams' differences — ~1e-7 of the largest in the
/// float64 reference, exactly 0 for mHC-lite's residual logits at the first step. Adam divides
/// their f32 rounding noise by its own √v̂ and moves them by up to the learning rate per step,
/// where float64's noise moves them by nothing (measured: up to 8e-3 after 12 steps at lr 3e-3,
/// against ≤ 3e-6 for every other parameter). Their final values are held to what 12 steps can
/// move a weight at most, 12·lr; their gradients at the fixture's weights are compared as every
/// other's, and the per-step gradient norm, which their drift reaches through the later steps,
/// to [`STREAMS_NORM_TOL`].
fn symmetric_first_mix(name: &str) -> bool {
    name.starts_with("layers.0.attn.hc.")
}

/// 12 Adam steps at lr 3e-3: the most a weight can move (|Adam step| ≤ lr for β₁² ≤ β₂).
const STREAMS_WEIGHT_TOL: f64 = 12.0 * 3e-3;
/// The per-step gradient norm of a stream recipe, relative (measured: ≤ 2.2e-5).
const STREAMS_NORM_TOL: f64 = 1e-4;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference")
}

fn floats(d: &TensorData) -> Vec<f64> {
    d.clone().convert::<f64>().as_slice::<f64>().unwrap().to_vec()
}

/// max |a − b| / scale.
fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// One fixture loaded: its name, tensors and the model built from its weights.
struct Case {
    name: String,
    file: TensorFile,
    cfg: ModelConfig,
    model: Transformer,
    device: Device,
}

fn load_case(path: &Path, kernels: Kernels, params: &str) -> Result<Case, String> {
    let name = format!("{} ({kernels:?})", path.file_stem().unwrap().to_string_lossy());
    let file = tensors::read(path).map_err(|e| e.to_string())?;
    let cfg: ModelConfig = serde_json::from_str(&file.metadata["config"]).map_err(|e| format!("{name}: {e}"))?;
    let cfg = ModelConfig { kernels, ..cfg };
    let device = Device::flex().autodiff();
    let model = Transformer::new(&cfg, ParamSource::Loaded(weights(&file, params)), &device)
        .map_err(|e| format!("{name}: {e:#}"))?;
    Ok(Case { name, file, cfg, model, device })
}

fn check_case(path: &Path, kernels: Kernels) -> Result<(), String> {
    let c = load_case(path, kernels, "param/")?;
    let tok = |k: &str| Tensor::<2, Int>::from_data(c.file.tensors[k].clone(), &c.device);
    let logits = c.model.forward(tok("input/tokens"), normlab::model::Keep::LOGITS).logits;
    let want = floats(&c.file.tensors["out/logits"]);
    let logit_err = max_diff(&floats(&logits.into_data()), &want) / max_abs(&want);
    let mut problems = Vec::new();
    if logit_err > LOGIT_TOL {
        problems.push(format!("logits rel err {logit_err:.2e}"));
    }
    let (loss, _, _) = c.model.loss(tok("input/tokens"), tok("input/targets"), false);
    let loss_v = floats(&loss.clone().into_data())[0];
    let want_loss = floats(&c.file.tensors["out/loss"])[0];
    if ((loss_v - want_loss) / want_loss).abs() > LOGIT_TOL {
        problems.push(format!("loss {loss_v} vs {want_loss}"));
    }
    let grads = loss.backward();
    let ours: BTreeMap<String, Option<TensorData>> = named_grads(&c.model, &grads).into_iter().collect();
    let worst = gradient_problems(&c.file, &ours, &mut problems);
    eprintln!("{:20} logits rel err {logit_err:.1e}, worst grad rel err {:.1e} ({})", c.name, worst.0, worst.1);
    if problems.is_empty() { Ok(()) } else { Err(format!("{}: {}", c.name, problems.join("; "))) }
}

/// Compares `ours` with the fixture's gradients, adding each mismatch to `problems`; returns
/// the worst relative error and its parameter.
fn gradient_problems(
    file: &TensorFile,
    ours: &BTreeMap<String, Option<TensorData>>,
    problems: &mut Vec<String>,
) -> (f64, String) {
    let ref_grads: BTreeMap<String, Vec<f64>> =
        weights(file, "grad/").iter().map(|(k, v)| (k.clone(), floats(v))).collect();
    let global = ref_grads.values().map(|g| max_abs(g)).fold(0.0, f64::max);
    let mut worst = (0.0, String::new());
    for (name, want) in &ref_grads {
        let got = match ours.get(name) {
            Some(Some(g)) => floats(g),
            Some(None) => vec![0.0; want.len()],
            None => {
                problems.push(format!("parameter {name} missing in the Rust model"));
                continue;
            }
        };
        // Per-tensor relative error. A provably dead parameter (float64 gradient ~1e-17) gets
        // f32 rounding noise of sums that cancel exactly, which no summation order controls:
        // it is held to [`DEAD_NOISE`] of the largest gradient instead.
        if max_abs(want) < DEAD_GRAD * global {
            let noise = max_abs(&got) / global;
            if noise > DEAD_NOISE {
                problems.push(format!("dead grad {name} is {noise:.2e} of the largest, above f32 noise"));
            }
            continue;
        }
        let err = max_diff(&got, want) / max_abs(want).max(1e-3 * global);
        if err > worst.0 {
            worst = (err, name.clone());
        }
        if err > GRAD_TOL {
            problems.push(format!("grad {name} rel err {err:.2e}"));
        }
    }
    worst
}

/// Runs `check` on every fixture with the fused kernels and with the composite reference, and
/// fails listing every mismatch, under `what`.
fn check_every_fixture(check: fn(&Path, Kernels) -> Result<(), String>, what: &str) {
    let paths = fixture_paths();
    assert!(paths.len() >= 16, "expected a fixture per preset, found {}", paths.len());
    let failures: Vec<String> = [Kernels::Fused, Kernels::Composite]
        .into_iter()
        .flat_map(|k| paths.iter().filter_map(move |p| check(p, k).err()))
        .collect();
    assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n"));
}

#[test]
fn every_recipe_matches_the_pytorch_reference() {
    check_every_fixture(check_case, "mismatches against PyTorch");
}

/// Presets checked otherwise than against a PyTorch fixture: `peri-norm` is `peri` (which has
/// one) without its embedding and final norms, slots the `post`/`kitenorm` fixtures cover
/// empty; `rmsnorm-approx`'s approximation is checked against its formula computed on the
/// host from the model's weights and by finite differences (src/model/tests.rs,
/// src/norm/tests.rs).
const WITHOUT_FIXTURE: &[&str] = &["peri-norm", "rmsnorm-approx"];

#[test]
fn every_preset_has_a_fixture() {
    for name in normlab::recipe::PRESET_NAMES.iter().filter(|n| !WITHOUT_FIXTURE.contains(n)) {
        assert!(fixture_dir().join(format!("{name}.safetensors")).exists(), "no PyTorch fixture for preset `{name}`");
    }
}

/// The training settings the fixture was made with (its `train` metadata).
#[derive(serde::Deserialize)]
struct TrainSettings {
    steps: usize,
    micro_batches: usize,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    grad_clip: f64,
    warmup_fraction: f64,
    warmup_start_lr: f64,
    end_lr: f64,
    /// The optimizer fixtures (tools/make_optimizer_fixtures.py): `[optim]` as normlab reads it.
    #[serde(default)]
    optim: Option<OptimConfig>,
    #[serde(default)]
    z_loss: f64,
}

fn weights(file: &TensorFile, prefix: &str) -> BTreeMap<String, TensorData> {
    file.tensors.iter().filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_string(), v.clone()))).collect()
}

/// `[S, M, B, T]` → the `M` micro-batches of step `s`, each `[B, T]`.
fn step_batches(file: &TensorFile, key: &str, s: usize, device: &Device) -> Vec<Tensor<2, Int>> {
    let all = Tensor::<4, Int>::from_data(file.tensors[key].clone(), device);
    let [_, m, b, t] = all.dims();
    (0..m).map(|i| all.clone().slice([s..s + 1, i..i + 1, 0..b, 0..t]).reshape([b, t])).collect()
}

fn check_trajectory(path: &Path, kernels: Kernels) -> Result<(), String> {
    let c = load_case(path, kernels, "param/")?;
    let t: TrainSettings = serde_json::from_str(&c.file.metadata["train"]).map_err(|e| format!("{}: {e}", c.name))?;
    let mut problems = Vec::new();
    let (model, worst_loss) = replay(&c, &t, &mut problems)?;
    let worst_w = final_weight_problems(&c.file, &model, t.steps, &mut problems);
    eprintln!(
        "{:20} trajectory: worst loss rel err {worst_loss:.1e}, worst final weight |Δ| {:.1e} ({})",
        c.name, worst_w.0, worst_w.1
    );
    if problems.is_empty() { Ok(()) } else { Err(format!("{}: {}", c.name, problems.join("; "))) }
}

/// Trains `c`'s model along the fixture's batches with normlab's own training step, adding
/// each step whose loss or gradient norm leaves PyTorch's to `problems`; returns the trained
/// model and the worst relative loss error.
fn replay(c: &Case, t: &TrainSettings, problems: &mut Vec<String>) -> Result<(Transformer, f64), String> {
    let optim_cfg = t.optim.clone().unwrap_or(OptimConfig {
        lr: t.lr,
        beta1: t.beta1,
        beta2: t.beta2,
        eps: t.eps,
        weight_decay: t.weight_decay,
        grad_clip: t.grad_clip,
        ..Default::default()
    });
    let schedule = ScheduleConfig {
        warmup_fraction: t.warmup_fraction,
        warmup_start_lr: t.warmup_start_lr,
        end_lr: t.end_lr,
        ..Default::default()
    };
    let mut model = Transformer::new(&c.cfg, ParamSource::Loaded(weights(&c.file, "param/")), &c.device)
        .map_err(|e| format!("{}: {e:#}", c.name))?;
    let mut optim = optim::build(&optim::settings(&optim_cfg, &model), &model);
    let (want_loss, want_norm) = (floats(&c.file.tensors["traj/loss"]), floats(&c.file.tensors["traj/grad_norm"]));
    let mut worst_loss: f64 = 0.0;
    let streams = c.file.tensors.keys().any(|k| k.strip_prefix("param/").is_some_and(symmetric_first_mix));
    let norm_tol = if streams { STREAMS_NORM_TOL } else { TRAJ_LOSS_TOL };
    for s in 0..t.steps {
        let x = step_batches(&c.file, "traj/tokens", s, &c.device);
        let y = step_batches(&c.file, "traj/targets", s, &c.device);
        assert_eq!(x.len(), t.micro_batches);
        let share = step::Share::all(t.micro_batches);
        let objective = Objective { masked: false, z_loss: t.z_loss };
        let clipper = normlab::train::clip::Clipper::Global { cap: t.grad_clip };
        let g =
            step::gradients(&model, x.into_iter().zip(y), share, clipper, objective, 1.0).map_err(|e| e.to_string())?;
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        worst_loss = worst_loss.max(rel(g.loss, want_loss[s]));
        if rel(g.loss, want_loss[s]) > TRAJ_LOSS_TOL || rel(g.norms.total, want_norm[s]) > norm_tol {
            let (loss, norm) = (g.loss, g.norms.total);
            problems.push(format!(
                "step {}: loss {loss:.6} vs {:.6}, grad norm {norm:.6} vs {:.6}",
                s + 1,
                want_loss[s],
                want_norm[s]
            ));
        }
        // The recipe's after-step hooks (QK-clip, nGPT's projection), as the trainer applies them.
        let seen = seen(&g.readings, s + 1, (t.steps, schedule.warmup_steps(t.steps)));
        model = optim.step(schedule.lr(s, t.steps, t.lr), model, g.grads).after_step(seen).0;
    }
    Ok((model, worst_loss))
}

/// What the after-step hooks read of step `done` of a run of `(total, warmup)` steps.
fn seen(readings: &StepReadings, done: usize, (total, warmup): (usize, usize)) -> StepSeen<'_> {
    StepSeen { readings, done, total, warmup }
}

/// Compares the trained weights with PyTorch's after `steps` steps (parameters whose gradient
/// is provably 0 left out); returns the worst |Δ| and its parameter.
fn final_weight_problems(
    file: &TensorFile,
    model: &Transformer,
    steps: usize,
    problems: &mut Vec<String>,
) -> (f64, String) {
    let want = weights(file, "traj/param/");
    let start = weights(file, "param/");
    let grads: BTreeMap<String, Vec<f64>> =
        weights(file, "grad/").iter().map(|(k, v)| (k.clone(), floats(v))).collect();
    let global = grads.values().map(|g| max_abs(g)).fold(0.0, f64::max);
    let mut worst = (0.0, String::new());
    for (name, got) in named_values(model) {
        // A parameter without a gradient is compared only when the reference moved it anyway
        // (an after-step hook's buffer: TaperNorm's gate, scale and averages, γ̃'s copy of γ).
        let moved = floats(&want[&name]) != floats(&start[&name]);
        if max_abs(&grads[&name]) < DEAD_GRAD * global && !moved {
            continue;
        }
        let err = max_diff(&floats(&got), &floats(&want[&name]));
        if symmetric_first_mix(&name) {
            if err > STREAMS_WEIGHT_TOL {
                problems.push(format!("weights {name} (first stream mixing) after {steps} steps: max |Δ| {err:.2e}"));
            }
            continue;
        }
        if err > worst.0 {
            worst = (err, name.clone());
        }
        if err > TRAJ_WEIGHT_TOL {
            problems.push(format!("weights {name} after {steps} steps: max |Δ| {err:.2e}"));
        }
    }
    worst
}

fn fixture_paths() -> Vec<PathBuf> {
    safetensors_in(&fixture_dir())
}

/// The `.safetensors` files of `dir`, sorted.
fn safetensors_in(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("fixtures in {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_recipe_trains_along_the_pytorch_trajectory() {
    check_every_fixture(check_trajectory, "trajectories apart from PyTorch's");
}

/// The optimizer fixtures (tools/make_optimizer_fixtures.py, float64): the `pre` recipe trained
/// 12 steps by `torch.optim.Muon` (Newton–Schulz in float64 instead of its bf16), the NorMuon
/// authors' update, lion-pytorch's rule, the hyperball paper's AdamH and MuonH, AdamW with a
/// z-loss and AdamW without embedding decay; normlab's own step along the same batches, each
/// step's loss and gradient norm and the final weights within the trajectory tolerances.
#[test]
fn every_optimizer_trains_along_the_pytorch_trajectory() {
    let paths = safetensors_in(&fixture_dir().join("optim"));
    let names: Vec<String> = paths.iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["muon", "muon-original", "normuon", "lion", "adamh", "muonh", "adamw-zloss", "adamw-no-emb-decay"] {
        assert!(names.iter().any(|n| n == want), "no optimizer fixture {want}");
    }
    let failures: Vec<String> = paths.iter().filter_map(|p| check_trajectory(p, Kernels::Fused).err()).collect();
    assert!(failures.is_empty(), "optimizer trajectories apart from PyTorch's:\n{}", failures.join("\n"));
}

/// PaLM's z-loss at the fixture's initial weights: the loss `CE + c·mean log²Z` and every
/// gradient against PyTorch's, on the whole-logits path and on the chunked loss (a logits limit
/// of 3 rows forces chunks).
#[test]
fn z_loss_matches_the_pytorch_reference() {
    let path = fixture_dir().join("optim/adamw-zloss.safetensors");
    for chunked in [false, true] {
        let mut c = load_case(&path, Kernels::Fused, "param/").unwrap();
        if chunked {
            c.model.set_memory_limits(3 * 32, usize::MAX);
        }
        let t: TrainSettings = serde_json::from_str(&c.file.metadata["train"]).unwrap();
        let tok = |k: &str| Tensor::<2, Int>::from_data(c.file.tensors[k].clone(), &c.device);
        let parts = c.model.loss_parts(
            tok("input/tokens"),
            tok("input/targets"),
            Objective { masked: false, z_loss: t.z_loss },
        );
        let z = floats(&parts.term(Z_LOSS).unwrap().into_data())[0];
        let want_z = floats(&c.file.tensors["out/z"])[0];
        assert!(((z - want_z) / want_z).abs() < LOGIT_TOL, "chunked {chunked}: mean log²Z {z} vs {want_z}");
        let loss = floats(&parts.loss.clone().into_data())[0];
        let want = floats(&c.file.tensors["out/loss"])[0];
        assert!(((loss - want) / want).abs() < LOGIT_TOL, "chunked {chunked}: loss {loss} vs {want}");
        let ours: BTreeMap<String, Option<TensorData>> =
            named_grads(&c.model, &parts.loss.backward()).into_iter().collect();
        let mut problems = Vec::new();
        gradient_problems(&c.file, &ours, &mut problems);
        assert!(problems.is_empty(), "chunked {chunked}: {}", problems.join("; "));
    }
}

/// Admin's profiling pass against the fixture script's own (Transformer-Clinic's
/// `adaptive-profiling`, float64) on the `admin-profile` fixture's weights and tokens: every ω
/// within 1e-5 relative.
#[test]
fn admin_profiling_matches_the_pytorch_reference() {
    let path = fixture_dir().join("admin-profile.safetensors");
    for kernels in [Kernels::Fused, Kernels::Composite] {
        let c = load_case(&path, kernels, "param/").unwrap();
        let tokens = Tensor::<2, Int>::from_data(c.file.tensors["input/tokens"].clone(), &c.device);
        let (model, omegas) = c.model.profile_skip_gates(tokens);
        let want = floats(&c.file.tensors["profile/omega"]);
        assert_eq!(omegas.len(), want.len());
        for (l, (got, want)) in omegas.iter().zip(&want).enumerate() {
            assert!((got - want).abs() <= 1e-5 * want, "{}: ω of sublayer {} = {got}, reference {want}", c.name, l + 1);
        }
        // The gates now hold those values, every channel.
        let named = named_values(&model);
        let gate = named.iter().find(|(n, _)| n == "layers.1.ffn.gate").unwrap();
        assert!(floats(&gate.1).iter().all(|g| (g - want[3]).abs() <= 1e-5 * want[3]));
        eprintln!("{}: ω {:?}", c.name, omegas);
    }
}

/// A LoRA adapter's names: normlab's (`layers.0.attn.f.lora_wq`) and the Llama module's.
fn lora_module(i: usize, target: normlab::model::base::lora::LoraTarget) -> (String, String) {
    use normlab::model::base::lora::LoraTarget::{W1, W2, W3};
    let ffn = matches!(target, W1 | W2 | W3);
    let (ours, theirs) = target.names();
    let (branch, hf) = if ffn { ("ffn", "mlp") } else { ("attn", "self_attn") };
    (format!("layers.{i}.{branch}.f.lora_{ours}"), format!("model.layers.{i}.{hf}.{theirs}"))
}

/// The fixture's Llama weights and `peft` factors under normlab's names and orientation.
fn lora_weights(t: &BTreeMap<String, TensorData>) -> BTreeMap<String, TensorData> {
    use normlab::hf::config::Family;
    use normlab::hf::weights::{mappings, to_normlab, transposed};
    let (mut ours, _) =
        to_normlab(t, &mappings(Family::Llama, &normlab::model::ModelConfig { n_layers: 2, ..Default::default() }))
            .unwrap();
    for i in 0..2 {
        for target in normlab::model::base::lora::LoraTarget::ALL {
            let (n, h) = lora_module(i, target);
            ours.insert(format!("{n}.a"), transposed(&t[&format!("{h}.lora_A.weight")]).unwrap());
            ours.insert(format!("{n}.b"), transposed(&t[&format!("{h}.lora_B.weight")]).unwrap());
        }
    }
    ours
}

/// The LoRA fixture (tools/make_lora_fixtures.py): a Llama model with `peft`'s LoRA (r = 2,
/// α = 6, every projection) and non-zero adapters; the assistant-style masked loss of a batch
/// with the adapters and without, and every adapter factor's gradient, from `peft` itself.
/// normlab's `pre-rms` with `[model.lora]` on the same weights (Llama's names mapped as
/// `normlab import` maps them, `A`/`B` transposed into normlab's orientation) gives them all.
#[test]
fn lora_matches_peft_in_loss_and_every_adapter_gradient() {
    use normlab::hf::weights::transposed;
    use normlab::model::base::lora::{LoraConfig, LoraTarget};
    let file = tensors::read(&fixture_dir().join("lora/llama_lora.safetensors")).unwrap();
    let t = &file.tensors;
    let mut ours = lora_weights(t);
    let lora = LoraConfig { rank: 2, alpha: 6.0, targets: vec!["all-linear".into()], ..Default::default() };
    let cfg: ModelConfig = serde_json::from_value(serde_json::json!({
        "vocab_size": 61, "d_model": 16, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 4, "d_glu": 40,
        "rope_base": 10000.0, "norm_eps": 1e-6, "tie_embeddings": false, "recipe": "pre-rms"
    }))
    .unwrap();
    let device = Device::flex().autodiff();
    let with_lora = ModelConfig { lora: Some(lora), ..cfg.clone() };
    let model = Transformer::new(&with_lora, ParamSource::Loaded(ours.clone()), &device).unwrap();
    let tok = |k: &str| Tensor::<2, Int>::from_data(t[k].clone(), &device);
    let (loss, _, _) = model.loss(tok("tokens").narrow(1, 0, 11), tok("targets"), true);
    let got = floats(&loss.clone().into_data())[0];
    let want = floats(&t["loss"])[0];
    assert!(((got - want) / want).abs() < LOGIT_TOL, "loss {got} vs peft's {want}");
    let grads: BTreeMap<String, Option<TensorData>> = named_grads(&model, &loss.backward()).into_iter().collect();
    let mut worst = 0.0f64;
    for (i, target) in (0..2).flat_map(|i| LoraTarget::ALL.map(|t| (i, t))) {
        let (n, h) = lora_module(i, target);
        for (f, peft) in [("a", "lora_A"), ("b", "lora_B")] {
            let g = grads[&format!("{n}.{f}")].as_ref().unwrap_or_else(|| panic!("{n}.{f} has no gradient"));
            let want = floats(&transposed(&t[&format!("grad.{h}.{peft}.weight")]).unwrap());
            worst = worst.max(max_diff(&floats(g), &want) / max_abs(&want));
        }
    }
    assert!(worst < GRAD_TOL, "adapter gradients apart from peft's: worst relative error {worst:.2e}");
    let frozen = grads.iter().filter(|(n, g)| !n.contains(".lora_") && g.is_some()).count();
    assert_eq!(frozen, 0, "the base takes no gradient under LoRA");
    ours.retain(|k, _| !k.contains(".lora_"));
    let base = Transformer::new(&cfg, ParamSource::Loaded(ours), &device).unwrap();
    let base_loss = floats(&base.loss(tok("tokens").narrow(1, 0, 11), tok("targets"), true).0.into_data())[0];
    let want = floats(&t["loss_base"])[0];
    assert!(((base_loss - want) / want).abs() < LOGIT_TOL, "adapters off: {base_loss} vs peft's {want}");
    eprintln!("lora: loss {got:.7} (peft {:.7}), worst adapter gradient rel err {worst:.1e}", floats(&t["loss"])[0]);
}
