//! Parameter creation: seeded initialisation or loading by name.
//!
//! Every parameter is created through a [`ParamBuilder`] under a stable dotted name
//! (`layers.3.attn.wq`). Seeded initialisation draws each tensor from its own stream, derived
//! from `(seed, name)`, so two recipes with the same seed share every weight they have in
//! common: a post-norm and a pre-norm model start from identical attention and FFN matrices,
//! and the comparison isolates the normalisation scheme. The same mechanism loads weights from
//! a name → tensor map (checkpoints, PyTorch fixtures), with clear errors on a missing tensor
//! or a shape mismatch.

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
}

/// Where parameter values come from.
pub enum ParamSource {
    /// Draw from the initialisers, seeded per parameter name.
    Seeded(u64),
    /// Take every value from this map (name → row-major f32 data).
    Loaded(BTreeMap<String, TensorData>),
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
            ParamSource::Loaded(map) => {
                let data = map.get(name).with_context(|| {
                    format!("tensor `{name}` is missing from the weights; they were saved from a model of another recipe or shape — use the config the weights were trained with")
                })?;
                if data.shape().as_slice() != shape.as_slice() {
                    bail!(
                        "tensor `{name}` has shape {:?} in the weights but this model needs {:?}; the weights come from a model of another size — use the config they were trained with",
                        data.shape(),
                        shape
                    );
                }
                Ok(data.clone().convert::<f32>())
            }
        }
    }

    /// After construction: with loaded weights, every tensor in the map must have been used.
    pub fn finish(self) -> anyhow::Result<BTreeSet<String>> {
        if let ParamSource::Loaded(map) = &self.source {
            let unused: Vec<&String> = map.keys().filter(|k| !self.created.contains(*k)).collect();
            if !unused.is_empty() {
                bail!(
                    "the weights contain {} tensor(s) this model does not have (first: `{}`); they were saved from a model of another recipe — use the config they were trained with",
                    unused.len(),
                    unused[0]
                );
            }
        }
        Ok(self.created)
    }
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
    };
    TensorData::new(values, shape)
}

/// FNV-1a over the name: a fixed, platform-independent hash (std's hasher is randomised).
pub(crate) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// SplitMix64 (Steele et al., 2014) with Box–Muller normals: small, fast and reproducible on
/// every platform, which is all initialisation needs.
pub struct SplitMix64 {
    state: u64,
    spare: Option<f64>,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed, spare: None }
    }

    /// The generator's position; `SplitMix64::new(state)` continues from it (when no spare
    /// normal is pending).
    pub fn state(&self) -> u64 {
        self.state
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in the open interval (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal.
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let (u1, u2) = (self.uniform(), self.uniform());
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = std::f64::consts::TAU * u2;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_draws_have_unit_moments() {
        let mut rng = SplitMix64::new(7);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        // Standard errors: 1/√n ≈ 0.0022 for the mean, √(2/n) ≈ 0.0032 for the variance.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.015, "var {var}");
    }

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
