//! The parameter split and the update clip, against rules stated by hand.

use super::{ParamRole, assignments, build};
use crate::init::ParamSource;
use crate::model::base::params::{named_values, param_table};
use crate::model::{ModelConfig, Transformer};
use crate::run::optim::{OptimConfig, OptimizerName};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

fn model() -> Transformer {
    let cfg = ModelConfig { d_model: 16, n_layers: 2, n_heads: 2, ..Default::default() };
    Transformer::new(&cfg, ParamSource::Seeded(1), &crate::testutil::cpu().autodiff()).unwrap()
}

/// The nanochat / Moonlight split: the seven block matrices of each layer are hidden, the
/// embedding and output projection and every vector are not; decay follows the matrices
/// unless the embeddings are exempted or the matrices live on the hyperball.
#[test]
fn hidden_matrices_go_to_the_named_optimizer_and_the_rest_to_adamw() {
    let m = model();
    for name in OptimizerName::ALL {
        for decay_embeddings in [true, false] {
            let cfg = OptimConfig { name, decay_embeddings, ..Default::default() };
            for a in assignments(&cfg, &m) {
                let hidden = [".wq", ".wk", ".wv", ".wo", ".w1", ".w2", ".w3"].iter().any(|s| a.name.ends_with(s));
                let embedding = a.name == "tok_emb" || a.name == "lm_head";
                let want_role = if hidden {
                    ParamRole::Hidden
                } else if embedding {
                    ParamRole::Embedding
                } else {
                    ParamRole::Vector
                };
                assert_eq!(a.role, want_role, "{name}: {}", a.name);
                let want_opt = match name {
                    OptimizerName::Lion => "lion",
                    _ if hidden => name.as_str(),
                    _ => "adamw",
                };
                assert_eq!(a.optimizer, want_opt, "{name}: {}", a.name);
                let want_decay = (hidden && !name.on_hyperball()) || (embedding && decay_embeddings);
                assert_eq!(a.decayed, want_decay, "{name}, decay_embeddings {decay_embeddings}: {}", a.name);
            }
        }
    }
}

/// Update clipping: with all-equal gradients every AdamW entry moves by ≈ η, an RMS of η; a
/// clip at 0.25·η scales each tensor's update to a quarter, direction kept.
#[test]
fn update_clip_scales_each_tensor_to_the_limit() {
    let m = model();
    let lr = 1e-2;
    let cfg = OptimConfig { weight_decay: 0.0, ..Default::default() };
    let mut grads = GradientsParams::new();
    for p in param_table(&m) {
        let dev = crate::testutil::cpu();
        match p.shape.len() {
            1 => grads.register(p.id, Tensor::<1>::ones(p.shape.clone(), &dev)),
            _ => grads.register(p.id, Tensor::<2>::ones([p.shape[0], p.shape[1]], &dev)),
        }
    }
    let before = named_values(&m);
    let stepped = build(&cfg, &m).step(lr, m.clone(), grads);
    let clipped = crate::train::update::clip(&m, stepped, 0.25 * lr);
    for ((name, b), (_, a)) in before.iter().zip(named_values(&clipped)) {
        let (b, a) = (b.try_to_vec::<f32>().unwrap(), a.try_to_vec::<f32>().unwrap());
        for (x, y) in b.iter().zip(&a) {
            // Adam's first step is η·g/(|g| + ε) = η (1 − 1e-6) per entry: clipped to η/4.
            let want = x - 0.25 * lr as f32;
            assert!((y - want).abs() < 1e-6, "{name}: {x} → {y}, want {want}");
        }
    }
    let updates = crate::train::update::measure(&m, &clipped).unwrap();
    let total = crate::train::update::UpdateSize::of(&updates);
    assert!((total.rms() - 0.25 * lr).abs() < 1e-7, "measured RMS {} vs {}", total.rms(), 0.25 * lr);
}

/// CompleteP's ε: a first Adam step moves a weight by `η·g/(|g| + ε)`. With every gradient
/// `g = ε = 1e-3` that is η/2 where ε is kept (embedding, output projection, final norm) and
/// `η·1/(1 + 1/4) = 0.8·η` inside the layers of an 8-layer model tuned at `L_base = 2`
/// (`ε·L_base/L = ε/4`).
#[test]
fn completep_scales_epsilon_inside_the_layers_only() {
    let recipe = crate::recipe::RecipeConfig::Preset("completep".into());
    let cfg = ModelConfig { d_model: 16, n_layers: 8, n_heads: 2, recipe, ..Default::default() };
    let m = Transformer::new(&cfg, ParamSource::Seeded(1), &crate::testutil::cpu().autodiff()).unwrap();
    let (lr, eps) = (1e-2, 1e-3);
    let optim = super::settings(&OptimConfig { eps, weight_decay: 0.0, ..Default::default() }, &m);
    assert_eq!(optim.layer_eps, Some(eps / 4.0));
    let dev = crate::testutil::cpu();
    let mut grads = GradientsParams::new();
    for p in param_table(&m) {
        match p.shape.len() {
            1 => grads.register(p.id, Tensor::<1>::full(p.shape.clone(), eps, &dev)),
            _ => grads.register(p.id, Tensor::<2>::full([p.shape[0], p.shape[1]], eps, &dev)),
        }
    }
    let before = named_values(&m);
    let stepped = build(&optim, &m).step(lr, m.clone(), grads);
    for ((name, b), (_, a)) in before.iter().zip(named_values(&stepped)) {
        let want = if name.starts_with("layers.") { 0.8 * lr } else { 0.5 * lr };
        let (b, a) = (b.try_to_vec::<f32>().unwrap(), a.try_to_vec::<f32>().unwrap());
        for (x, y) in b.iter().zip(&a) {
            assert!(((x - y) as f64 - want).abs() < 1e-6, "{name}: moved {} want {want}", x - y);
        }
    }
}
