//! `[optim]`: which optimizer trains the run and its settings.
//!
//! Every optimizer splits the parameters the same way ([`crate::train::optim::ParamRole`]):
//! the *hidden matrices* (every 2-D weight inside the blocks: attention's W_q, W_k, W_v, W_o and
//! the FFN's matrices) and the rest (token embedding, output projection, norm gains and shifts,
//! DyT α, BHyT λ, gates and every other vector or scalar).
//!
//! | `name` | hidden matrices | the rest |
//! |---|---|---|
//! | `adamw` (default) | AdamW | AdamW |
//! | `muon` | Muon (Jordan et al. 2024; `torch.optim.Muon`) | AdamW |
//! | `normuon` | NorMuon (Li et al. 2025): Muon, then per-neuron second-moment normalisation | AdamW |
//! | `lion` | Lion (Chen et al. 2023) | Lion |
//! | `adamh` | Adam on the hyperball (Wen et al. 2025): each matrix kept at its initial Frobenius norm | AdamW |
//! | `muonh` | Muon on the hyperball | AdamW |
//!
//! Weight decay is decoupled everywhere (`W ← W·(1 − η·λ)`), applies to matrices only (the
//! hidden ones and, unless `decay_embeddings = false`, the embedding and output projection), and
//! never to the hyperball's matrices, whose norm is fixed instead.

use serde::{Deserialize, Serialize};

/// The optimizer of the hidden matrices (and, for `lion`, of every parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerName {
    #[default]
    Adamw,
    Muon,
    Normuon,
    Lion,
    Adamh,
    Muonh,
}

impl OptimizerName {
    pub const ALL: [OptimizerName; 6] = [Self::Adamw, Self::Muon, Self::Normuon, Self::Lion, Self::Adamh, Self::Muonh];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Adamw => "adamw",
            Self::Muon => "muon",
            Self::Normuon => "normuon",
            Self::Lion => "lion",
            Self::Adamh => "adamh",
            Self::Muonh => "muonh",
        }
    }

    /// Whether the hidden matrices are orthogonalised (Muon, NorMuon, MuonH).
    pub fn orthogonalises(self) -> bool {
        matches!(self, Self::Muon | Self::Normuon | Self::Muonh)
    }

    /// Whether the hidden matrices are kept on their initial-norm sphere (AdamH, MuonH).
    pub fn on_hyperball(self) -> bool {
        matches!(self, Self::Adamh | Self::Muonh)
    }
}

impl std::fmt::Display for OptimizerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How Muon's step size follows the matrix shape (`out × in`, as `torch.nn.Linear` stores it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdjustLr {
    /// Moonlight's `0.2·√max(out, in)`: the update's RMS matches AdamW's (≈ 0.2), so AdamW's
    /// learning rate and weight decay carry over (Liu et al. 2025, "Muon is Scalable for LLM
    /// Training").
    #[default]
    MatchRmsAdamw,
    /// Keller Jordan's `√max(1, out/in)`; the field runs it at a larger rate (0.02), which
    /// `muon.lr_scale` gives.
    Original,
}

impl AdjustLr {
    /// The factor on the learning rate for a matrix with `out` outputs and `inp` inputs.
    pub fn ratio(self, out: usize, inp: usize) -> f64 {
        match self {
            Self::MatchRmsAdamw => 0.2 * (out.max(inp) as f64).sqrt(),
            Self::Original => (out as f64 / inp as f64).max(1.0).sqrt(),
        }
    }
}

/// How Muon's update is orthogonalised ([`crate::train::optim::newton_schulz`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Orthogonalizer {
    /// Keller Jordan's quintic with fixed coefficients, as `torch.optim.Muon`.
    #[default]
    NewtonSchulz,
    /// Polar Express (Amsel, Persson, Musco & Gower 2025): a coefficient triple per step (at
    /// most 5), as nanochat and modded-nanogpt run it.
    PolarExpress,
}

/// `[optim.muon]`: Muon, NorMuon and MuonH.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MuonSettings {
    /// μ of the momentum buffer `B ← μ·B + (1 − μ)·G` (0.95).
    pub momentum: f64,
    /// Nesterov: orthogonalise `(1 − μ)·G + μ·B` instead of `B` (true).
    pub nesterov: bool,
    /// Newton–Schulz iterations (5), quintic coefficients (3.4445, −4.775, 2.0315).
    pub ns_steps: usize,
    /// `"newton-schulz"` (default) or `"polar-express"`.
    pub orthogonalizer: Orthogonalizer,
    pub adjust_lr: AdjustLr,
    /// The hidden matrices' learning rate is `lr_scale ×` the schedule's (1.0).
    pub lr_scale: f64,
    /// NorMuon's β₂ for the per-neuron second moment (0.95).
    pub beta2: f64,
}

impl Default for MuonSettings {
    fn default() -> Self {
        Self {
            momentum: 0.95,
            nesterov: true,
            ns_steps: 5,
            orthogonalizer: Orthogonalizer::NewtonSchulz,
            adjust_lr: AdjustLr::MatchRmsAdamw,
            lr_scale: 1.0,
            beta2: 0.95,
        }
    }
}

/// `[optim.lion]`: Lion's two momenta (the paper's 0.9, 0.99).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LionSettings {
    pub beta1: f64,
    pub beta2: f64,
}

impl Default for LionSettings {
    fn default() -> Self {
        Self { beta1: 0.9, beta2: 0.99 }
    }
}

/// `[optim]`: the optimizer, AdamW's settings (AdamW also trains what Muon and the hyperball
/// optimizers leave), weight decay and global gradient-norm clipping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimConfig {
    pub name: OptimizerName,
    /// Peak learning rate.
    pub lr: f64,
    /// KiteNorm: β₁ = β₂ = 0.95.
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Applied to matrix parameters (embeddings, projections); never to norm gains, shifts,
    /// DyT α, BHyT λ or other vectors and scalars (KiteNorm Table 1: 0.1).
    pub weight_decay: f64,
    /// Whether the token embedding and output projection are decayed too (true); OLMo 2 and
    /// nanochat leave the embedding undecayed.
    pub decay_embeddings: bool,
    /// The norm slots whose gains `γ` are weight-decayed too (empty: none, the default;
    /// "Scale vectors" finds decay helps the input norms' gains and hurts the output norms').
    pub decay_gains: Vec<GainSlot>,
    /// Global gradient-norm threshold (1.0); `0` disables clipping. Under `clip.rule = "zclip"`
    /// ZClip's `max_grad_norm` (1.0 there too), under `"agc"` a cap applied before AGC.
    pub grad_clip: f64,
    /// The clipping rule (`global`, `zclip`, `agc`) and its settings.
    pub clip: super::clip_rule::ClipRule,
    /// Update clipping (0 = off): a parameter whose update `ΔW` has an RMS above
    /// `update_clip · η` is scaled down to it (Adafactor's rule on the applied step).
    pub update_clip: f64,
    pub muon: MuonSettings,
    pub lion: LionSettings,
    /// AdamW's ε for the parameters inside the Transformer layers, when the recipe sets its own
    /// (CompleteP's `ε·L_base/L`): not written in a config, set from the model by
    /// [`crate::train::optim::settings`].
    #[serde(skip)]
    pub layer_eps: Option<f64>,
}

/// A norm slot whose gains `optim.decay_gains` names: a sublayer's `N_in`, `N_out`, `N_outer`
/// (every layer's) or the final norm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GainSlot {
    Input,
    Output,
    Outer,
    Final,
}

impl GainSlot {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
            Self::Outer => "outer",
            Self::Final => "final",
        }
    }
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self {
            name: OptimizerName::Adamw,
            lr: 3e-3,
            beta1: 0.95,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            decay_embeddings: true,
            decay_gains: Vec::new(),
            grad_clip: 1.0,
            clip: super::clip_rule::ClipRule::Global,
            update_clip: 0.0,
            muon: MuonSettings::default(),
            lion: LionSettings::default(),
            layer_eps: None,
        }
    }
}

impl OptimConfig {
    /// Every setting's range; the config check calls it once.
    pub fn check(&self) -> anyhow::Result<()> {
        use anyhow::ensure;
        ensure!(self.lr > 0.0 && self.lr.is_finite(), "optim.lr must be > 0 (got {})", self.lr);
        let betas = [
            ("optim.beta1", self.beta1),
            ("optim.beta2", self.beta2),
            ("optim.muon.momentum", self.muon.momentum),
            ("optim.muon.beta2", self.muon.beta2),
            ("optim.lion.beta1", self.lion.beta1),
            ("optim.lion.beta2", self.lion.beta2),
        ];
        for (n, b) in betas {
            ensure!((0.0..1.0).contains(&b), "{n} must be in [0, 1) (got {b})");
        }
        ensure!(self.eps > 0.0, "optim.eps must be > 0");
        ensure!(self.weight_decay >= 0.0, "optim.weight_decay must be ≥ 0");
        ensure!(self.grad_clip >= 0.0, "optim.grad_clip must be ≥ 0 (0 disables clipping)");
        self.clip.check()?;
        ensure!(
            self.decay_gains.is_empty() || self.weight_decay > 0.0,
            "optim.decay_gains = {:?} decays gains at optim.weight_decay = 0; set optim.weight_decay > 0 or leave decay_gains empty",
            self.decay_gains.iter().map(|g| g.as_str()).collect::<Vec<_>>()
        );
        ensure!(self.update_clip >= 0.0, "optim.update_clip must be ≥ 0 (0 turns it off)");
        ensure!(
            self.update_clip == 0.0 || !self.name.on_hyperball(),
            "optim.update_clip would move {}'s matrices off their sphere; set optim.update_clip = 0 or use another optimizer",
            self.name
        );
        ensure!((1..=20).contains(&self.muon.ns_steps), "optim.muon.ns_steps must be in 1..=20");
        ensure!(
            self.muon.orthogonalizer == Orthogonalizer::NewtonSchulz || self.muon.ns_steps <= 5,
            "optim.muon.orthogonalizer = \"polar-express\" has coefficients for 5 steps; set optim.muon.ns_steps ≤ 5"
        );
        ensure!(self.muon.lr_scale > 0.0, "optim.muon.lr_scale must be > 0");
        Ok(())
    }
}
