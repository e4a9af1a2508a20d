//! The update a step applied, `ΔW = W_after − W_before` for every parameter: its RMS and its
//! size relative to the weight, `‖ΔW‖/‖W‖` (the update/weight ratio Marin's 32B run watched:
//! its AdamW update-norm spikes came before the loss spikes), and optionally clipped.
//!
//! Update clipping (`optim.update_clip = d`, Adafactor's rule on the applied step): a
//! parameter whose `RMS(ΔW) > d·η` takes `ΔW · d·η / RMS(ΔW)` instead, so no tensor moves by more
//! than `d` times the learning rate per entry, whatever its optimizer made of the gradient.
//!
//! Measured on the device and read back once per step (one `[2P]` read for P parameters).

use crate::model::Transformer;
use crate::model::base::params::{named_tensors, param_table};
use crate::probe::updates::{UpdateBreakdown, UpdateStat};
use crate::train::optim::ParamRole;
use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::tensor::Tensor;
use std::collections::{BTreeMap, HashMap};

/// One parameter's update: `Σ ΔW²`, `Σ W²` (before the step) and its number of entries.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamUpdate {
    pub name: String,
    pub role: ParamRole,
    pub update_sq: f64,
    pub weight_sq: f64,
    pub len: usize,
}

/// Sums of several [`ParamUpdate`]s: the RMS of the update and its ratio to the weights.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UpdateSize {
    pub update_sq: f64,
    pub weight_sq: f64,
    pub len: usize,
}

impl UpdateSize {
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a ParamUpdate>) -> Self {
        parts.into_iter().fold(Self::default(), |s, p| Self {
            update_sq: s.update_sq + p.update_sq,
            weight_sq: s.weight_sq + p.weight_sq,
            len: s.len + p.len,
        })
    }

    /// `RMS(ΔW)` over the entries.
    pub fn rms(&self) -> f64 {
        (self.update_sq / self.len.max(1) as f64).sqrt()
    }

    /// `‖ΔW‖ / ‖W‖` (0 for weights that are all zero).
    pub fn ratio(&self) -> f64 {
        if self.weight_sq > 0.0 { (self.update_sq / self.weight_sq).sqrt() } else { 0.0 }
    }
}

/// The per-parameter updates from `before` to `after` (same parameters, same order).
pub fn measure(before: &Transformer, after: &Transformer) -> anyhow::Result<Vec<ParamUpdate>> {
    let table = param_table(before);
    let old = named_tensors(before);
    let new = named_tensors(after);
    let mut sums = Vec::with_capacity(2 * old.len());
    for ((_, w0), (_, w1)) in old.iter().zip(&new) {
        let w0 = w0.clone().detach();
        sums.push((w1.clone().detach() - w0.clone()).square().sum());
        sums.push(w0.square().sum());
    }
    if sums.is_empty() {
        return Ok(Vec::new());
    }
    let v = Tensor::cat(sums, 0)
        .into_data()
        .convert::<f64>()
        .try_into_vec::<f64>()
        .map_err(|e| anyhow::anyhow!("reading the step's update norms from the device failed: {e:?}"))?;
    // A buffer moved by an after-step hook (TaperNorm's gate) is not an update of the optimizer.
    Ok(table
        .into_iter()
        .zip(v.chunks(2))
        .filter(|(p, _)| !crate::model::base::names::is_buffer(&p.name))
        .map(|(p, s)| ParamUpdate {
            role: ParamRole::of(&p),
            len: p.shape.iter().product(),
            name: p.name,
            update_sq: s[0],
            weight_sq: s[1],
        })
        .collect())
}

/// `after` with every parameter's update `ΔW` scaled to an RMS of at most `limit` (`d·η`).
pub fn clip(before: &Transformer, after: Transformer, limit: f64) -> Transformer {
    let old: HashMap<ParamId, Tensor<1>> =
        param_table(before).into_iter().zip(named_tensors(before)).map(|(p, (_, t))| (p.id, t.detach())).collect();
    after.map(&mut Clip { old, limit })
}

struct Clip {
    old: HashMap<ParamId, Tensor<1>>,
    limit: f64,
}

impl ModuleMapper for Clip {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(old) = self.old.get(&param.id).cloned() else { return param };
        let limit = self.limit;
        param.map(|t| {
            let tracked = t.is_require_grad();
            let t = t.detach();
            let old: Tensor<D> = old.reshape(t.shape());
            let delta = t - old.clone();
            let rms = delta.clone().square().mean().sqrt();
            let factor = (rms.recip() * limit).clamp_max(1.0);
            let out = (old + delta * factor.unsqueeze()).detach();
            if tracked { out.require_grad() } else { out }
        })
    }
}

/// The probes' view: update sizes by parameter kind (a hidden matrix's own name, `wq`…; the
/// embedding and output projection by name; every vector as `vector`) and by layer.
pub fn breakdown(updates: &[ParamUpdate], n_layers: usize) -> UpdateBreakdown {
    let stat = |s: UpdateSize| UpdateStat { rms: s.rms(), ratio: s.ratio() };
    let mut kinds: BTreeMap<String, Vec<&ParamUpdate>> = BTreeMap::new();
    for u in updates {
        let kind = match u.role {
            ParamRole::Hidden | ParamRole::Embedding => u.name.rsplit('.').next().unwrap_or(&u.name).to_string(),
            ParamRole::Vector | ParamRole::CentredGain | ParamRole::Mixing => "vector".to_string(),
        };
        kinds.entry(kind).or_default().push(u);
    }
    let by_kind = kinds.into_iter().map(|(k, v)| (k, stat(UpdateSize::of(v)))).collect();
    let by_layer = (0..n_layers)
        .map(|i| {
            let prefix = format!("{}.", crate::model::base::names::layer(i));
            stat(UpdateSize::of(updates.iter().filter(|u| u.name.starts_with(&prefix))))
        })
        .collect();
    UpdateBreakdown { by_kind, by_layer }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_add_up_and_ratio_is_relative() {
        let p = |u: f64, w: f64, n: usize| ParamUpdate {
            name: String::new(),
            role: ParamRole::Hidden,
            update_sq: u,
            weight_sq: w,
            len: n,
        };
        let s = UpdateSize::of(&[p(1.0, 100.0, 10), p(3.0, 300.0, 30)]);
        assert_eq!(s.len, 40);
        assert!((s.rms() - (4.0f64 / 40.0).sqrt()).abs() < 1e-15);
        assert!((s.ratio() - 0.1).abs() < 1e-15);
    }
}
