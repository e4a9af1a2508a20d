//! The optimizers (`optim.name`, [`crate::run::optim`]) over two parameter roles:
//!
//! - **hidden matrices**: every 2-D weight inside the blocks (attention's W_q, W_k, W_v, W_o,
//!   the FFN's matrices): AdamW, [`muon::Orthogonal`] (Muon, NorMuon, MuonH), Lion or
//!   [`adamh::AdamH`];
//! - **the rest**: token embedding and output projection (`embedding`), norm gains and shifts,
//!   DyT α, BHyT λ, gates, every other vector or scalar (`vector`): AdamW, or Lion under `lion`
//!   (the parameter split of nanochat, OLMo-core and Moonlight).
//!
//! Weight decay goes to matrices only (KiteNorm Table 1): the hidden ones (not on the
//! hyperball) and the embedding and output projection unless `optim.decay_embeddings = false`;
//! and to the gains of the norm slots `optim.decay_gains` names.
//!
//! - [`muon`]: Muon, NorMuon and MuonH; [`newton_schulz`]: their orthogonalisation
//! - [`adamh`]: AdamH; [`hyperball`]: the hyperball step both hyperball optimizers take
//! - [`record`]: their states in burn's optimizer record
//!
//! Built on burn's `ModuleOptimizer::with_group`, keyed by parameter id. Ids are derived from
//! parameter names ([`crate::init`]), so a saved optimizer state finds its parameters again in a
//! model rebuilt from a checkpoint.

pub mod adamh;
pub mod hyperball;
pub mod muon;
pub mod newton_schulz;
mod record;

use crate::model::Transformer;
use crate::model::base::names::{OUTPUT_PROJECTION, TOKEN_EMBEDDING, in_layers};
use crate::model::base::params::{ParamEntry, param_table};
use crate::run::config::OptimConfig;
use crate::run::optim::{GainSlot, OptimizerName};
use burn::module::{Module, ParamGroup, ParamId};
use burn::optim::{AdamWConfig, LionConfig, ModuleOptimizer};

/// What a parameter is to the optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamRole {
    /// A 2-D weight inside the blocks.
    Hidden,
    /// The token embedding or the output projection.
    Embedding,
    /// Every vector or scalar (gains, shifts, DyT α, BHyT λ, gates) but the centred gains.
    Vector,
    /// A residual-stream mixing parameter (`….hc.…`, `hc_head.…`: Hyper-Connections, mHC): AdamW
    /// without weight decay, matrices included — decay would pull HC's static connections away
    /// from the identity they start at, and mHC's projections are its gating, not a layer.
    Mixing,
    /// A zero-centred norm gain (`…centred_gain`, zero-centred RMSNorm): a vector that is
    /// weight-decayed, towards the applied gain 1 (Qwen3-Next).
    CentredGain,
}

impl ParamRole {
    pub fn of(p: &ParamEntry) -> Self {
        match p.shape.len() {
            _ if is_mixing(&p.name) => Self::Mixing,
            0 | 1 if p.name.rsplit('.').next() == Some(crate::model::base::names::CENTRED_GAIN) => Self::CentredGain,
            0 | 1 => Self::Vector,
            _ if p.name == TOKEN_EMBEDDING || p.name == OUTPUT_PROJECTION => Self::Embedding,
            _ => Self::Hidden,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hidden => "hidden",
            Self::Embedding => "embedding",
            Self::Vector => "vector",
            Self::CentredGain => "centred gain",
            Self::Mixing => "stream mixing",
        }
    }
}

/// Whether `name` is a residual-stream mixing parameter (`layers.{i}.{attn|ffn}.hc.…`,
/// `hc_head.…`).
fn is_mixing(name: &str) -> bool {
    use crate::model::base::names::{STREAM_HEAD, STREAM_MIX};
    name.starts_with(&format!("{STREAM_HEAD}.")) || name.split('.').any(|part| part == STREAM_MIX)
}

/// The parameters that receive AdamW's (or Lion's) weight decay under the default settings:
/// the matrices and the zero-centred gains.
pub fn decayed_params<M: Module>(model: &M) -> Vec<ParamEntry> {
    let cfg = OptimConfig::default();
    param_table(model).into_iter().filter(|p| decays(&cfg, p, ParamRole::of(p))).collect()
}

/// The settings `model` trains with: `cfg`, except that
/// - nGPT (a recipe on the hypersphere) trains without weight decay, as the paper and its
///   reference code do — after the projection a decayed matrix gives the same unit vectors, so
///   decay would only stretch the step by `1/(1 − η·λ)`;
/// - CompleteP scales AdamW's ε of the parameters inside the layers by `L_base/L`, as the
///   authors' `configure_optimizers` does (the embedding, final norm and output projection keep
///   ε): at depth, each layer's updates are `L_base/L` smaller, and so is the ε they compete with.
pub fn settings(cfg: &OptimConfig, model: &Transformer) -> OptimConfig {
    let mut out = cfg.clone();
    if model.meta.residual.hypersphere().is_some() {
        out.weight_decay = 0.0;
    }
    if let Some(c) = model.meta.init.completep() {
        out.layer_eps = Some(cfg.eps * c.branch_scale());
    }
    out
}

/// One parameter's optimizer and whether it is decayed, for the run header and `normlab recipes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub name: String,
    pub id: ParamId,
    /// Its number of values.
    pub len: usize,
    pub role: ParamRole,
    pub optimizer: &'static str,
    pub decayed: bool,
}

/// Which optimizer each parameter of `model` goes to under `cfg`. Buffers (TaperNorm's gate,
/// scale and averages) take no gradient and go to none.
pub fn assignments<M: Module>(cfg: &OptimConfig, model: &M) -> Vec<Assignment> {
    param_table(model)
        .into_iter()
        .filter(|p| !crate::model::base::names::is_buffer(&p.name))
        .map(|p| {
            let role = ParamRole::of(&p);
            Assignment {
                optimizer: optimizer_of(cfg.name, role),
                decayed: decays(cfg, &p, role),
                role,
                id: p.id,
                len: p.shape.iter().product(),
                name: p.name,
            }
        })
        .collect()
}

fn optimizer_of(name: OptimizerName, role: ParamRole) -> &'static str {
    match (name, role) {
        (OptimizerName::Lion, _) => "lion",
        (n, ParamRole::Hidden) => n.as_str(),
        _ => "adamw",
    }
}

fn decays(cfg: &OptimConfig, p: &ParamEntry, role: ParamRole) -> bool {
    cfg.weight_decay > 0.0
        && match role {
            ParamRole::Vector => gain_slot(&p.name).is_some_and(|s| cfg.decay_gains.contains(&s)),
            ParamRole::CentredGain => true,
            ParamRole::Mixing => false,
            ParamRole::Embedding => cfg.decay_embeddings,
            ParamRole::Hidden => !cfg.name.on_hyperball(),
        }
}

/// The name of a norm's gain `γ` (`crate::norm::Norm`'s parameter).
const GAIN: &str = "gain";

/// The norm slot whose gain `name` is (`layers.3.attn.input_norm.gain`: `input`), if it is one.
fn gain_slot(name: &str) -> Option<GainSlot> {
    use crate::model::base::names::{FINAL_NORM, SUBLAYER_NORMS};
    let mut parts = name.rsplit('.');
    let (leaf, norm) = (parts.next()?, parts.next()?);
    let slots = [GainSlot::Input, GainSlot::Output, GainSlot::Outer];
    let slot = match norm {
        FINAL_NORM => Some(GainSlot::Final),
        n => SUBLAYER_NORMS.iter().position(|s| *s == n).map(|i| slots[i]),
    };
    slot.filter(|_| leaf == GAIN)
}

/// A line per role: `hidden (28 tensors, 802816 values): muon, weight decay 0.1`; without
/// `values` the tensor count alone.
pub fn describe_groups<M: Module>(cfg: &OptimConfig, model: &M, values: bool) -> Vec<String> {
    let all = assignments(cfg, model);
    let mut lines = Vec::new();
    let roles = [ParamRole::Hidden, ParamRole::Embedding, ParamRole::Vector, ParamRole::CentredGain, ParamRole::Mixing];
    // A role splits only where `optim.decay_gains` decays some of its vectors.
    for (role, decayed) in roles.into_iter().flat_map(|r| [(r, true), (r, false)]) {
        let of_role: Vec<&Assignment> = all.iter().filter(|a| a.role == role && a.decayed == decayed).collect();
        let Some(first) = of_role.first() else { continue };
        let name = match (role, decayed) {
            (ParamRole::Vector, true) => {
                let slots: Vec<&str> = cfg.decay_gains.iter().map(|g| g.as_str()).collect();
                format!("norm gains ({})", slots.join(", "))
            }
            _ => role.as_str().to_string(),
        };
        let count: usize = of_role.iter().map(|a| a.len).sum();
        let decay = if first.decayed { format!("weight decay {}", cfg.weight_decay) } else { "no weight decay".into() };
        let size = if values {
            format!("{} tensors, {count} values", of_role.len())
        } else {
            format!("{} tensors", of_role.len())
        };
        lines.push(format!("{name} ({size}): {}, {decay}", first.optimizer));
    }
    if let Some(eps) = cfg.layer_eps {
        lines.push(format!("inside the layers: AdamW ε {eps:e} (CompleteP: ε·L_base/L), elsewhere {:e}", cfg.eps));
    }
    lines
}

/// What `optim.name` does with each role, for `normlab recipes`.
pub fn describe_names() -> Vec<String> {
    OptimizerName::ALL
        .iter()
        .map(|&n| {
            let hidden = optimizer_of(n, ParamRole::Hidden);
            let rest = optimizer_of(n, ParamRole::Vector);
            let sphere = if n.on_hyperball() { " (kept at ‖W₀‖_F, no decay)" } else { "" };
            format!(
                "{:<8} hidden matrices: {hidden}{sphere}; embedding, output projection, vectors: {rest}",
                n.as_str()
            )
        })
        .collect()
}

/// The optimizer for `model` under `cfg`: the base optimizer for everything, overridden by a
/// decaying one for the decayed matrices, and by the hidden matrices' own optimizer.
pub fn build<M: Module>(cfg: &OptimConfig, model: &M) -> ModuleOptimizer {
    let table = assignments(cfg, model);
    let group = |keep: &dyn Fn(&Assignment) -> bool| {
        ParamGroup::from_ids(table.iter().filter(|a| keep(a)).map(|a| a.id).collect())
    };
    let decayed = group(&|a| a.decayed);
    let hidden = group(&|a| a.role == ParamRole::Hidden);
    let wd = cfg.weight_decay;
    if cfg.name == OptimizerName::Lion {
        let lion = |wd: f64| {
            LionConfig::new()
                .with_beta_1(cfg.lion.beta1 as f32)
                .with_beta_2(cfg.lion.beta2 as f32)
                .with_weight_decay(wd as f32)
        };
        return lion(0.0).init().with_group(decayed, lion(wd).build(), None);
    }
    let adamw = AdamWConfig::new()
        .with_beta_1(cfg.beta1 as f32)
        .with_beta_2(cfg.beta2 as f32)
        .with_epsilon(cfg.eps as f32)
        .with_weight_decay(0.0);
    let mut base = adamw.clone().init().with_group(decayed, adamw.clone().with_weight_decay(wd as f32).build(), None);
    if let Some(eps) = cfg.layer_eps {
        // Later groups take precedence: the layers' parameters, then those of them decayed.
        let layers = adamw.with_epsilon(eps as f32);
        base = base.with_group(group(&|a| in_layers(&a.name)), layers.clone().build(), None).with_group(
            group(&|a| in_layers(&a.name) && a.decayed),
            layers.with_weight_decay(wd as f32).build(),
            None,
        );
    }
    match cfg.name {
        OptimizerName::Adamw | OptimizerName::Lion => base,
        OptimizerName::Muon | OptimizerName::Normuon | OptimizerName::Muonh => {
            base.with_group(hidden, muon::Orthogonal::new(cfg), None)
        }
        OptimizerName::Adamh => base.with_group(hidden, adamh::AdamH::new(cfg), None),
    }
}

#[cfg(test)]
mod tests;
