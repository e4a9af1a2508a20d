//! `[model.moe]`: the mixture-of-experts feed-forward block's sizes, router and balancing.
//!
//! With the section a model's MoE layers replace the dense FFN `F_l` by `E` routed experts of
//! kind `model.ffn` (each `d_expert` wide), `top_k` of them per token, plus `shared` experts
//! every token passes through (DeepSeek). Without it every layer is dense. The sublayer
//! equation is unchanged: `z = a·X + c·N_out(MoE(s·N_in(X)))`.
//!
//! A layer `i` is MoE when `i ≥ first_dense` and `(i − first_dense)` is a multiple of `every`
//! (DeepSeek V3's `first_k_dense_replace`; Qwen's `decoder_sparse_step`).

use crate::model::ffn::moe::balance::AuxForm;
use crate::model::ffn::moe::router::Router;
use crate::norm::NormKind;
use crate::recipe::{Dims, NormSpec, RecipeSpec, norm_kind};
use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// The most routed experts a layer holds (DeepSeek V3 has 256, Kimi K2 384).
pub const MAX_EXPERTS: usize = 1024;

/// A mixture-of-experts feed-forward block (`[model.moe]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeConfig {
    /// Routed experts `E`.
    pub experts: usize,
    /// Experts each token is routed to.
    pub top_k: usize,
    /// Each expert's hidden width; default the dense FFN's (`model.d_glu` / `model.d_mlp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d_expert: Option<usize>,
    /// Shared experts every token passes through, as one block `shared · d_expert` wide
    /// (DeepSeek's `n_shared_experts`); 0 = none.
    #[serde(default)]
    pub shared: usize,
    /// The router: its scores, selection and weights ([`Router`]).
    #[serde(default)]
    pub router: Router,
    /// Every `every`-th layer from `first_dense` on is MoE; default 1 (all of them).
    #[serde(default = "one")]
    pub every: usize,
    /// The first layers, dense (DeepSeek V3: 3).
    #[serde(default)]
    pub first_dense: usize,
    /// Coefficient of the load-balancing loss (Switch Transformer; OLMoE's 0.01); 0 = none.
    #[serde(default)]
    pub aux_loss: f64,
    /// How that loss pools the layers and tokens: `"per-layer"` (default: Switch, megablocks,
    /// OLMo-core; even load 1), `"sequence"` (DeepSeek V3's sequence-wise form) or `"pooled"`
    /// (transformers' `load_balancing_loss_func`; even load k) ([`AuxForm`]).
    #[serde(default, skip_serializing_if = "AuxForm::is_default")]
    pub aux_form: AuxForm,
    /// Coefficient of the router z-loss (ST-MoE eq. 5; OLMoE's 0.001); 0 = none.
    #[serde(default)]
    pub z_loss: f64,
    /// A norm on the router's input, `l = N_r(x) W_r` (any slot kind; `"ln"` the recipe's base
    /// norm); none by default, as in every model above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_norm: Option<NormSpec>,
    /// A norm on each expert's output before its weight, `w_e · N_e(FFN_e(x))`, one per expert
    /// (and one on the shared experts'); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_norm: Option<NormSpec>,
    /// The capacity factor `c` (Switch Transformer): each expert computes at most `⌈c·N·k/E⌉`
    /// of a forward's `N·k` (token, slot) pairs, in token order, and drops the rest (counted
    /// in the step's record); absent: dropless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<f64>,
}

/// The two norm slots of a MoE block, resolved for the model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoeNorms {
    pub router: Option<NormKind>,
    pub expert: Option<NormKind>,
}

fn one() -> usize {
    1
}

impl MoeConfig {
    /// Whether layer `i` is a MoE layer.
    pub fn is_moe_layer(&self, i: usize) -> bool {
        i >= self.first_dense && (i - self.first_dense).is_multiple_of(self.every)
    }

    /// How many of `n_layers` layers are MoE layers.
    pub fn layer_count(&self, n_layers: usize) -> usize {
        match n_layers.checked_sub(self.first_dense + 1) {
            Some(after_first) => after_first / self.every.max(1) + 1,
            None => 0,
        }
    }

    /// Each expert's width, for the dense width `dense`.
    pub fn expert_width(&self, dense: usize) -> usize {
        self.d_expert.unwrap_or(dense)
    }

    /// The block's equation, router and balancing in words, for `normlab recipes --config`;
    /// `dense` is the dense FFN's width, `kind` the experts' label.
    pub fn describe(&self, n_layers: usize, dense: usize, kind: &str) -> Vec<String> {
        let layers: Vec<String> = (0..n_layers).filter(|&i| self.is_moe_layer(i)).map(|i| i.to_string()).collect();
        let shared = match self.shared {
            0 => String::new(),
            s => format!(" + FFN_shared(x)  ({s} shared, width {})", s * self.expert_width(dense)),
        };
        let mut lines = vec![
            format!("F_l = MoE(x) = Σ_{{e ∈ TopK(x)}} w_e(x)·FFN_e(x){shared}  in layers {}", layers.join(", ")),
            format!(
                "    {} routed {kind} experts of width {}, top {} per token; the other layers dense (width {dense})",
                self.experts,
                self.expert_width(dense),
                self.top_k
            ),
            format!("    router {}: {}", self.router.info().name, self.router.info().formula),
        ];
        if let crate::model::ffn::moe::router::Router::Sigmoid { groups, top_groups, normalize, scale, bias_update } =
            self.router
        {
            lines.push(format!(
                "    groups {groups}, top_groups {top_groups}, normalize {normalize}, scale {scale}, bias_update γ = {bias_update}"
            ));
        }
        if let crate::model::ffn::moe::router::Router::SoftmaxTopk { normalize } = self.router {
            lines.push(format!("    normalize {normalize}"));
        }
        let form = self.aux_form.info();
        lines.push(format!(
            "    loss += {}·balance + {}·router_z  (balance {}: {}; router_z: ST-MoE eq. 5)",
            self.aux_loss, self.z_loss, form.name, form.formula
        ));
        lines
    }

    /// The router and expert norm slots under the recipe `spec` (its base norm, its
    /// expressions), for a model of `dims` with norm ε `eps`.
    pub fn norms(&self, spec: &RecipeSpec, dims: Dims, eps: f64) -> anyhow::Result<MoeNorms> {
        let slot = |s: &Option<NormSpec>, name: &str| -> anyhow::Result<Option<NormKind>> {
            let Some(s) = s else { return Ok(None) };
            let kind = norm_kind(spec, s, dims, eps).map_err(|e| anyhow::anyhow!("model.moe.{name}: {e:#}"))?;
            ensure!(
                !matches!(kind, Some(NormKind::TaperNorm { .. })),
                "model.moe.{name}: tapernorm is an input-norm slot of the recipe's schedule; pick another kind"
            );
            Ok(kind)
        };
        Ok(MoeNorms {
            router: slot(&self.router_norm, "router_norm")?,
            expert: slot(&self.expert_norm, "expert_norm")?,
        })
    }

    /// Checks the sizes against each other and the model's depth, once, when the config loads.
    pub fn check(&self, n_layers: usize) -> anyhow::Result<()> {
        ensure!(
            (1..=MAX_EXPERTS).contains(&self.experts),
            "model.moe.experts = {} must be between 1 and {MAX_EXPERTS}",
            self.experts
        );
        ensure!(
            (1..=self.experts).contains(&self.top_k),
            "model.moe.top_k = {} must be between 1 and model.moe.experts = {}",
            self.top_k,
            self.experts
        );
        ensure!(self.d_expert != Some(0), "model.moe.d_expert must be > 0");
        ensure!(self.shared <= MAX_EXPERTS, "model.moe.shared = {} is more than {MAX_EXPERTS}", self.shared);
        ensure!(self.every >= 1, "model.moe.every must be ≥ 1 (1: every layer from first_dense on is MoE)");
        ensure!(
            self.first_dense < n_layers,
            "model.moe.first_dense = {} leaves no MoE layer in model.n_layers = {n_layers}; give fewer dense layers",
            self.first_dense
        );
        for (name, c) in [("aux_loss", self.aux_loss), ("z_loss", self.z_loss)] {
            ensure!(c.is_finite() && c >= 0.0, "model.moe.{name} = {c} must be a finite coefficient ≥ 0");
        }
        if let Some(c) = self.capacity {
            ensure!(c.is_finite() && c > 0.0, "model.moe.capacity = {c} must be a factor > 0 (1.25 is Switch's)");
        }
        self.router.check(self.experts, self.top_k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> anyhow::Result<MoeConfig> {
        Ok(toml::from_str(s)?)
    }

    /// DeepSeek V3's layout by hand: 3 dense layers, then MoE in every layer; Qwen's step 2
    /// from layer 0: layers 0, 2, 4.
    #[test]
    fn which_layers_are_moe() {
        let ds = parse("experts = 8\ntop_k = 2\nfirst_dense = 3").unwrap();
        assert_eq!((0..6).map(|i| ds.is_moe_layer(i)).collect::<Vec<_>>(), [false, false, false, true, true, true]);
        let step = parse("experts = 8\ntop_k = 2\nevery = 2").unwrap();
        assert_eq!((0..5).filter(|&i| step.is_moe_layer(i)).collect::<Vec<_>>(), [0, 2, 4]);
        for (m, n) in [(&ds, 2), (&ds, 3), (&ds, 6), (&step, 5), (&step, 6), (&step, 1)] {
            assert_eq!(m.layer_count(n), (0..n).filter(|&i| m.is_moe_layer(i)).count(), "{n} layers");
        }
    }

    #[test]
    fn refuses_what_cannot_route() {
        let cases = [
            ("experts = 4\ntop_k = 5", "top_k = 5"),
            ("experts = 0\ntop_k = 1", "experts = 0"),
            ("experts = 4\ntop_k = 2\nfirst_dense = 4", "leaves no MoE layer"),
            ("experts = 4\ntop_k = 2\naux_loss = -1.0", "aux_loss = -1"),
            ("experts = 8\ntop_k = 2\nrouter = { kind = \"sigmoid\", groups = 3 }", "groups = 3"),
        ];
        for (toml, want) in cases {
            let e = parse(toml).and_then(|c| c.check(4)).unwrap_err().to_string();
            assert!(e.contains(want), "{toml}: {e}");
        }
        let e = parse("experts = 4\ntop_k = 2\nrouter = { kind = \"softmax-topk\", scale = 2.0 }").unwrap_err();
        assert!(e.to_string().contains("scale"), "{e}");
    }
}
