//! AdamW with two parameter groups (KiteNorm Table 1): weight decay on matrix parameters
//! (embedding, output projection, attention and FFN weights), none on norm gains and shifts,
//! scalar norm parameters (DyT α, BHyT λ, scalarised LN γ′, β′) or any other vector.
//!
//! Built on burn's `AdamW` and `ModuleOptimizer::with_group`, keyed by parameter id. Ids are
//! derived from parameter names ([`crate::init`]), so a saved optimizer state finds its
//! parameters again in a model rebuilt from a checkpoint.

use crate::model::Transformer;
use crate::model::params::{ParamEntry, param_table};
use crate::run::config::OptimConfig;
use burn::module::{Module, ParamGroup};
use burn::optim::{AdamWConfig, ModuleOptimizer};

/// Whether weight decay applies to a parameter of this shape: matrices only.
pub fn is_decayed(shape: &[usize]) -> bool {
    shape.len() >= 2
}

/// The parameters that receive weight decay.
pub fn decayed_params<M: Module>(model: &M) -> Vec<ParamEntry> {
    param_table(model).into_iter().filter(|p| is_decayed(&p.shape)).collect()
}

/// The settings `model` trains with: `cfg`, except that nGPT (a recipe on the hypersphere)
/// trains without weight decay, as the paper and its reference code do — after the projection a
/// decayed matrix gives the same unit vectors, so decay would only stretch the step by
/// `1/(1 − η·λ)`.
pub fn settings(cfg: &OptimConfig, model: &Transformer) -> OptimConfig {
    match model.meta.hypersphere {
        Some(_) => OptimConfig { weight_decay: 0.0, ..cfg.clone() },
        None => cfg.clone(),
    }
}

/// The optimizer for `model`: a no-decay AdamW for everything, overridden by a decaying one for
/// the matrices.
pub fn build<M: Module>(cfg: &OptimConfig, model: &M) -> ModuleOptimizer {
    let base = AdamWConfig::new()
        .with_beta_1(cfg.beta1 as f32)
        .with_beta_2(cfg.beta2 as f32)
        .with_epsilon(cfg.eps as f32)
        .with_weight_decay(0.0);
    let decayed = ParamGroup::from_ids(decayed_params(model).into_iter().map(|p| p.id).collect());
    let decaying = base.clone().with_weight_decay(cfg.weight_decay as f32).build();
    base.init().with_group(decayed, decaying, None)
}
