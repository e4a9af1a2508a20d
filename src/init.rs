//! Parameter creation: seeded initialisation or loading by name.
//!
//! Every parameter is created through a [`ParamBuilder`] under a stable dotted name
//! (`layers.3.attn.wq`). Seeded initialisation draws each tensor from its own stream, derived
//! from `(seed, name)`, so two recipes with the same seed share every weight they have in
//! common: a post-norm and a pre-norm model start from identical attention and FFN matrices,
//! and the comparison isolates the normalisation scheme. The same mechanism loads weights from
//! a name → tensor map (checkpoints, PyTorch fixtures), with clear errors on a missing tensor
//! or a shape mismatch.

use crate::rng::{SplitMix64, fnv1a};
use anyhow::{Context, bail};
use burn::module::{Param, ParamId};
use burn::tensor::{Device, Tensor, TensorData};
use std::collections::{BTreeMap, BTreeSet};

/// How a parameter is initialised when it is not loaded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// `N(0, std²)`.
    Normal {
        std: f64,
    },
    Ones,
    Zeros,
    Constant(f64),
    /// Uniform on `[−bound, bound)` (PyTorch's `kaiming_uniform_`, e.g. LoRA's `A`).
    Uniform {
        bound: f64,
    },
    /// Hyper-Connections' static width connections `[n, n+1]` as pre-norm: column 0 (what the
    /// sublayer reads) the unit vector `e_read`, columns 1…n (what each stream keeps) the
    /// identity.
    WidthConnections {
        read: usize,
    },
}

/// Where parameter values come from.
pub enum ParamSource {
    /// Draw from the initialisers, seeded per parameter name.
    Seeded(u64),
    /// Take every value from this map (name → row-major f32 data).
    Loaded(BTreeMap<String, TensorData>),
    /// Take a value from the map when it holds the name, else draw it as `Seeded` would (an
    /// imported checkpoint under another recipe: norms the source lacked start at their init,
    /// gain 1 and shift 0). Map entries the model does not have are left unused.
    Overlay(BTreeMap<String, TensorData>, u64),
}

/// Creates named parameters on one device and records the names it handed out.
pub struct ParamBuilder<'a> {
    device: &'a Device,
    source: ParamSource,
    created: BTreeSet<String>,
}

impl<'a> ParamBuilder<'a> {
    pub fn new(device: &'a Device, source: ParamSource) -> Self {
        Self { device, source, created: BTreeSet::new() }
    }

    /// A rank-1 parameter of length `len`.
    pub fn vector(&mut self, name: &str, len: usize, init: Init) -> anyhow::Result<Param<Tensor<1>>> {
        let data = self.data(name, vec![len], init)?;
        Ok(self.param(name, data))
    }

    /// A rank-2 parameter `[rows, cols]`.
    pub fn matrix(&mut self, name: &str, shape: [usize; 2], init: Init) -> anyhow::Result<Param<Tensor<2>>> {
        let data = self.data(name, shape.to_vec(), init)?;
        Ok(self.param(name, data))
    }

    /// The parameter's id is derived from its name, so an optimizer state saved by one process
    /// (keyed by id) finds its parameters again in a model rebuilt by another: resuming.
    fn param<const D: usize>(&self, name: &str, data: TensorData) -> Param<Tensor<D>> {
        let mut p = Param::from_data(data, self.device);
        p.id = ParamId::from(fnv1a(name));
        p
    }

    fn data(&mut self, name: &str, shape: Vec<usize>, init: Init) -> anyhow::Result<TensorData> {
        if !self.created.insert(name.to_string()) {
            bail!("internal error: parameter name `{name}` used twice");
        }
        match &self.source {
            ParamSource::Seeded(seed) => Ok(seeded(*seed, name, shape, init)),
            ParamSource::Overlay(map, seed) => match map.get(name) {
                Some(data) => checked(data, name, &shape),
                None => Ok(seeded(*seed, name, shape, init)),
            },
            ParamSource::Loaded(map) => {
                let data = map.get(name).with_context(|| {
                    format!(
                        "tensor `{name}` is missing from the weights; they were saved from a model of another \
                        recipe or shape — use the config the weights were trained with"
                    )
                })?;
                checked(data, name, &shape)
            }
        }
    }

    /// After construction: with loaded weights, every tensor in the map must have been used.
    pub fn finish(self) -> anyhow::Result<BTreeSet<String>> {
        if let ParamSource::Loaded(map) = &self.source {
            let unused: Vec<&String> = map.keys().filter(|k| !self.created.contains(*k)).collect();
            if !unused.is_empty() {
                bail!(
                    "the weights contain {} tensor(s) this model does not have (first: `{}`); they were saved from a \
                        model of another recipe — use the config they were trained with",
                    unused.len(),
                    unused[0]
                );
            }
        }
        Ok(self.created)
    }
}

/// `data` as f32 when its shape is `shape`.
fn checked(data: &TensorData, name: &str, shape: &[usize]) -> anyhow::Result<TensorData> {
    if data.shape().as_slice() != shape {
        bail!(
            "tensor `{name}` has shape {:?} in the weights but this model needs {:?}; the weights come from a model \
                of another size — use the config they were trained with",
            data.shape(),
            shape
        );
    }
    Ok(data.clone().convert::<f32>())
}

fn seeded(seed: u64, name: &str, shape: Vec<usize>, init: Init) -> TensorData {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = match init {
        Init::Normal { std } => {
            let mut rng = SplitMix64::new(seed ^ fnv1a(name));
            (0..n).map(|_| (rng.normal() * std) as f32).collect()
        }
        Init::Ones => vec![1.0; n],
        Init::Zeros => vec![0.0; n],
        Init::Constant(v) => vec![v as f32; n],
        Init::Uniform { bound } => {
            let mut rng = SplitMix64::new(seed ^ fnv1a(name));
            (0..n).map(|_| ((2.0 * rng.uniform() - 1.0) * bound) as f32).collect()
        }
        Init::WidthConnections { read } => {
            let cols = shape.get(1).copied().unwrap_or(1);
            (0..n).map(|k| (k % cols == 0 && k / cols == read || k % cols == k / cols + 1) as u8 as f32).collect()
        }
    };
    TensorData::new(values, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_init_depends_on_name_and_seed_only() {
        let a = seeded(7, "layers.0.attn.wq", vec![4, 4], Init::Normal { std: 0.02 });
        let b = seeded(7, "layers.0.attn.wq", vec![4, 4], Init::Normal { std: 0.02 });
        let c = seeded(7, "layers.0.attn.wk", vec![4, 4], Init::Normal { std: 0.02 });
        let d = seeded(8, "layers.0.attn.wq", vec![4, 4], Init::Normal { std: 0.02 });
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }
}
