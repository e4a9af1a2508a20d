//! LoRA: a frozen projection plus a trainable low-rank update (Hu et al., "LoRA: Low-Rank
//! Adaptation of Large Language Models", 2021), as `peft`'s `LoraLayer` computes it:
//!
//! ```text
//! y = x W + (α/r) · dropout(x) A B        W ∈ ℝ^{d_in×d_out} frozen, A ∈ ℝ^{d_in×r}, B ∈ ℝ^{r×d_out}
//! ```
//!
//! `A` starts as `peft`'s `kaiming_uniform_(a=√5)`, i.e. uniform on `±1/√d_in`, and `B` at
//! zero, so a model with fresh adapters computes exactly its base. Merged, the projection is
//! `W + (α/r)·A B` ([`Lora::merged`]). `A` and `B` are stored `[d_in, r]` and `[r, d_out]`,
//! the transposes of `peft`'s `lora_A.weight` `[r, d_in]` and `lora_B.weight` `[d_out, r]`,
//! as every normlab projection is the transpose of `torch.nn.Linear.weight`.
//!
//! Dropout acts on the adapter's input only while training (a forward on the autodiff
//! backend whose `A` takes gradients), drawn from the device's generator, which the trainer
//! seeds from the run's seed and the step.
//!
//! # Shapes
//! - `x`: `[B, T, d_in]` → `[B, T, d_out]`

use crate::init::{Init, ParamBuilder};
use crate::kernels::{Kernels, Precision};
use crate::model::base::linear::project;
use crate::model::base::names::child;
use anyhow::bail;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Distribution, Tensor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A projection LoRA can adapt, by the name normlab gives its weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LoraTarget {
    Q,
    K,
    V,
    O,
    /// The FFN's first projection (the GLU's gate, `gate_proj`; the MLP's `up`).
    W1,
    /// The FFN's output projection (`down_proj`).
    W2,
    /// The GLU's second input projection (`up_proj`).
    W3,
}

impl LoraTarget {
    pub const ALL: [LoraTarget; 7] = [Self::Q, Self::K, Self::V, Self::O, Self::W1, Self::W2, Self::W3];

    /// normlab's weight name and the Llama-family module name `peft` targets.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            Self::Q => ("wq", "q_proj"),
            Self::K => ("wk", "k_proj"),
            Self::V => ("wv", "v_proj"),
            Self::O => ("wo", "o_proj"),
            Self::W1 => ("w1", "gate_proj"),
            Self::W2 => ("w2", "down_proj"),
            Self::W3 => ("w3", "up_proj"),
        }
    }

    /// Whether this is a feed-forward projection (in a MoE layer: every routed expert's).
    pub fn is_ffn(self) -> bool {
        matches!(self, Self::W1 | Self::W2 | Self::W3)
    }

    /// The targets one name selects: a weight (`wq`, `q`, `q_proj`, …) or a group
    /// (`attention`, `ffn`, `all-linear`).
    pub fn parse(name: &str) -> anyhow::Result<Vec<Self>> {
        let attn = vec![Self::Q, Self::K, Self::V, Self::O];
        Ok(match name {
            "attention" | "attn" => attn,
            "ffn" | "mlp" => vec![Self::W1, Self::W2, Self::W3],
            "all-linear" | "all" => Self::ALL.to_vec(),
            "q" | "k" | "v" | "o" => vec![attn[["q", "k", "v", "o"].iter().position(|&n| n == name).unwrap()]],
            _ => match Self::ALL.iter().find(|t| t.names().0 == name || t.names().1 == name) {
                Some(t) => vec![*t],
                None => bail!(
                    "the LoRA target `{name}` names no module; give q, k, v, o, w1 (gate_proj), w2 (down_proj), \
                     w3 (up_proj), or a group: attention, ffn, all-linear"
                ),
            },
        })
    }
}

/// `[model.lora]`: LoRA adapters on the model's projections, the rest frozen (`peft`'s
/// `LoraConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoraConfig {
    /// Rank `r` of `A B`.
    pub rank: usize,
    /// `α`: the update is scaled by `α / r`.
    pub alpha: f64,
    /// Dropout on the adapter's input while training.
    pub dropout: f64,
    /// The projections adapted: `q`, `k`, `v`, `o`, `w1`/`gate_proj`, `w2`/`down_proj`,
    /// `w3`/`up_proj`, or the groups `attention`, `ffn`, `all-linear`.
    pub targets: Vec<String>,
    /// Whether the recipe's own parameters train beside the adapters: every norm's gain and
    /// bias, DyT's α, BHyT's λ, gates and residual scalars (every rank-1 parameter but the
    /// attention biases; `peft`'s `modules_to_save`). The embedding, the output projection and
    /// every projection stay frozen.
    pub train_norms: bool,
}

impl Default for LoraConfig {
    /// `peft`'s defaults for `r`, `lora_alpha` and `lora_dropout` (8, 8, 0), on the attention
    /// projections.
    fn default() -> Self {
        Self { rank: 8, alpha: 8.0, dropout: 0.0, targets: vec!["attention".into()], train_norms: false }
    }
}

impl LoraConfig {
    /// The plan the model is built with; every bad value is one error naming the option.
    pub fn plan(&self) -> anyhow::Result<LoraPlan> {
        anyhow::ensure!(self.rank >= 1, "model.lora.rank must be ≥ 1 (got {})", self.rank);
        anyhow::ensure!(
            self.alpha > 0.0 && self.alpha.is_finite(),
            "model.lora.alpha must be > 0 (got {})",
            self.alpha
        );
        anyhow::ensure!(
            (0.0..1.0).contains(&self.dropout),
            "model.lora.dropout must be in [0, 1) (got {})",
            self.dropout
        );
        anyhow::ensure!(!self.targets.is_empty(), "model.lora.targets is empty; name the projections to adapt");
        let mut targets = BTreeSet::new();
        for t in &self.targets {
            targets.extend(LoraTarget::parse(t)?);
        }
        Ok(LoraPlan { rank: self.rank, alpha: self.alpha, dropout: self.dropout, targets })
    }

    /// Whether the parameter `name` of rank `rank` trains under this config.
    pub fn trains(&self, name: &str, rank: usize) -> bool {
        let bias = ["bq", "bk", "bv"].iter().any(|b| name.ends_with(&format!(".{b}")));
        // Buffers (TaperNorm's schedule, DeepSeek's selection bias) never take a gradient.
        name.contains(".lora_") || self.train_norms && rank == 1 && !bias && !crate::model::base::names::is_buffer(name)
    }
}

/// What LoRA adapts and how (checked once, from `[model.lora]`).
#[derive(Clone, Debug, PartialEq)]
pub struct LoraPlan {
    pub rank: usize,
    pub alpha: f64,
    pub dropout: f64,
    pub targets: BTreeSet<LoraTarget>,
}

impl LoraPlan {
    /// The adapter of the weight `target` in the module at `prefix`, when the plan adapts it.
    pub fn adapter(
        plan: Option<&Self>,
        target: LoraTarget,
        [d_in, d_out]: [usize; 2],
        b: &mut ParamBuilder<'_>,
        prefix: &str,
    ) -> anyhow::Result<Option<Lora>> {
        let Some(p) = plan.filter(|p| p.targets.contains(&target)) else { return Ok(None) };
        let name = child(prefix, &format!("lora_{}", target.names().0));
        let bound = 1.0 / (d_in as f64).sqrt();
        Ok(Some(Lora {
            a: b.matrix(&child(&name, "a"), [d_in, p.rank], Init::Uniform { bound })?,
            b: b.matrix(&child(&name, "b"), [p.rank, d_out], Init::Zeros)?,
            scale: p.alpha / p.rank as f64,
            dropout: p.dropout,
        }))
    }
}

/// One projection's adapter.
#[derive(Module, Debug)]
pub struct Lora {
    /// `A` `[d_in, r]`.
    pub a: Param<Tensor<2>>,
    /// `B` `[r, d_out]`.
    pub b: Param<Tensor<2>>,
    /// `α / r`.
    #[module(skip)]
    pub scale: f64,
    #[module(skip)]
    pub dropout: f64,
}

impl Lora {
    /// `(α/r) · dropout(x) A B`.
    pub fn delta(&self, x: Tensor<3>, p: Precision, k: Kernels) -> Tensor<3> {
        let x = if self.dropout > 0.0 && self.a.val().is_require_grad() {
            let keep = 1.0 - self.dropout;
            x.clone() * x.random_like(Distribution::Bernoulli(keep)) / keep
        } else {
            x
        };
        project(project(x, &self.a, p, k), &self.b, p, k) * self.scale
    }

    /// `W + (α/r)·A B`.
    pub fn merged(&self, w: Tensor<2>) -> Tensor<2> {
        w + self.a.val().matmul(self.b.val()) * self.scale
    }
}

/// `x W`, plus the adapter's update when there is one.
pub fn adapted(x: Tensor<3>, w: &Param<Tensor<2>>, lora: &Option<Lora>, p: Precision, k: Kernels) -> Tensor<3> {
    match lora {
        Some(l) => project(x.clone(), w, p, k) + l.delta(x, p, k),
        None => project(x, w, p, k),
    }
}

/// The freezing mapper: tracks the module path as [`crate::model::base::params`]' visitor does (a `Norm` enum's
/// variant is no part of a name).
struct Trainable<F: Fn(&str, usize) -> bool> {
    path: Vec<Option<String>>,
    trains: F,
}

impl<F: Fn(&str, usize) -> bool> ModuleMapper for Trainable<F> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.push((!container_type.starts_with("Enum:")).then(|| name.to_string()));
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.path.iter().flatten().cloned().collect::<Vec<_>>().join(".");
        let on = (self.trains)(&name, D);
        param.set_require_grad(on)
    }
}

/// `module` with every parameter frozen but those `trains(name, rank)` accepts: the others
/// take no gradient, so no optimizer moves them.
pub fn set_trainable<M: Module>(module: M, trains: impl Fn(&str, usize) -> bool) -> M {
    module.map(&mut Trainable { path: Vec::new(), trains })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::ParamSource;
    use crate::testutil::{cpu, values};

    #[test]
    fn targets_parse_by_every_name_and_unknown_ones_are_refused() {
        assert_eq!(LoraTarget::parse("q_proj").unwrap(), vec![LoraTarget::Q]);
        assert_eq!(LoraTarget::parse("w3").unwrap(), vec![LoraTarget::W3]);
        assert_eq!(LoraTarget::parse("all-linear").unwrap().len(), 7);
        let e = LoraTarget::parse("lm_head").unwrap_err().to_string();
        assert!(e.contains("`lm_head` names no module"), "{e}");
    }

    #[test]
    fn the_update_is_alpha_over_r_times_x_a_b_and_starts_at_zero() {
        let device = cpu();
        let mut b = ParamBuilder::new(&device, ParamSource::Seeded(3));
        let plan = LoraPlan { rank: 2, alpha: 6.0, dropout: 0.0, targets: [LoraTarget::Q].into() };
        let mut lora = LoraPlan::adapter(Some(&plan), LoraTarget::Q, [3, 4], &mut b, "f").unwrap().unwrap();
        let a = values(lora.a.val());
        assert!(a.iter().all(|v| v.abs() < 1.0 / 3f64.sqrt()), "A within peft's ±1/√d_in");
        let x: Tensor<3> = Tensor::from_floats([[[1.0, -2.0, 0.5]]], &device);
        assert!(values(lora.delta(x.clone(), Precision::F32, Kernels::Composite)).iter().all(|&v| v == 0.0));
        // With B = [[1,0,0,0],[0,0,0,2]] the update is 3·(x·A)·B, computed here by hand.
        lora.b = Param::from_tensor(Tensor::from_floats([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]], &device));
        let xa: Vec<f64> = (0..2).map(|j| (0..3).map(|i| [1.0, -2.0, 0.5][i] * a[i * 2 + j]).sum()).collect();
        let want = [3.0 * xa[0], 0.0, 0.0, 3.0 * 2.0 * xa[1]];
        let got = values(lora.delta(x, Precision::F32, Kernels::Composite));
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
        assert_eq!(b.finish().unwrap().into_iter().collect::<Vec<_>>(), vec!["f.lora_wq.a", "f.lora_wq.b"]);
    }
}
