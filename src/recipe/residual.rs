//! The residual concern of a recipe: what the state between sublayers is and how a sublayer
//! updates it. One kind per scheme, each a row of [`KINDS`] and a variant of [`ResidualSpec`]
//! that holds only the settings that kind takes, so that a setting of one scheme cannot be
//! written into another's.
//!
//! ```text
//! sum           X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))     (+ x0 mixing, GPAS)
//! hc/mhc/...    n streams H_l: H_{l+1} = R_l·H_l + w_l ⊗ branch(r_l·H_l)  (see super::streams)
//! attn-res      X_l = Σ_j softmax_j(q_l·RMS(v_j))·v_j over earlier sublayers' outputs
//! hypersphere   nGPT: unit-norm states and weights, h ← Norm(h + α ⊙ (Norm(F(h)) − h))
//! ```

use super::expr::Vars;
use super::hypersphere::{self, Hypersphere, HypersphereSpec};
use super::streams::{self, AttnRes, AttnResSpec, HcSpec, MhcLiteSpec, MhcSpec, Streams};
use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// One residual kind: the name a recipe writes, its update with its source, and the settings
/// it takes (any other is refused, naming the kind that takes it).
pub struct ResidualKind {
    pub name: &'static str,
    pub formula: &'static str,
    pub options: &'static [&'static str],
}

/// Every residual kind, in the order `normlab recipes` lists them.
pub const KINDS: &[ResidualKind] = &[
    ResidualKind {
        name: "sum",
        formula: "X ← N_outer(a·X + c·N_out(F(s·N_in(X)))); x0_mix: X ← λ_r·X + λ₀·X_1 per layer (modded-nanogpt); \
                  gpas: X ← X − SiLU(α_k)·sg(X) after each addition (GPAS)",
        options: &["x0_mix", "gpas"],
    },
    ResidualKind {
        name: "hc",
        formula: "n streams, learned width and depth connections, static + tanh terms (Hyper-Connections, Zhu et al., \
                  ICLR 2025)",
        options: &["n", "dynamic"],
    },
    ResidualKind {
        name: "mhc",
        formula: "n streams, read σ, write 2σ, residual mixing doubly stochastic by Sinkhorn–Knopp (mHC, DeepSeek \
                  2025)",
        options: &["n", "sinkhorn_iters"],
    },
    ResidualKind {
        name: "mhc-lite",
        formula: "mHC with the residual mixing a convex combination of the n! permutations (mHC-lite, Yang & Gao \
                  2026)",
        options: &["n"],
    },
    ResidualKind {
        name: "attn-res",
        formula: "each sublayer reads softmax attention over the earlier sublayers' outputs, in blocks or all \
                  (Attention Residuals, Kimi Team 2026)",
        options: &["blocks"],
    },
    ResidualKind {
        name: "hypersphere",
        formula: "unit-norm states and weights, h ← Norm(h + α ⊙ (Norm(F(h)) − h)), scaling factors s_qk, s_uv, s_z \
                  (nGPT, Loshchilov et al. 2024)",
        options: &["sqk", "suv", "sz"],
    },
];

/// The kind named `name`, if there is one.
pub fn find(name: &str) -> Option<&'static ResidualKind> {
    KINDS.iter().find(|k| k.name == name)
}

/// `[recipe.residual]` as a recipe writes it (`kind = "sum"` when unset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ResidualSpec {
    Sum(SumSpec),
    Hc(HcSpec),
    Mhc(MhcSpec),
    MhcLite(MhcLiteSpec),
    AttnRes(AttnResSpec),
    Hypersphere(HypersphereSpec),
}

impl Default for ResidualSpec {
    fn default() -> Self {
        ResidualSpec::Sum(SumSpec::default())
    }
}

impl ResidualSpec {
    /// The kind as a recipe writes it (a row of [`KINDS`]).
    pub fn kind(&self) -> &'static str {
        match self {
            ResidualSpec::Sum(_) => "sum",
            ResidualSpec::Hc(_) => "hc",
            ResidualSpec::Mhc(_) => "mhc",
            ResidualSpec::MhcLite(_) => "mhc-lite",
            ResidualSpec::AttnRes(_) => "attn-res",
            ResidualSpec::Hypersphere(_) => "hypersphere",
        }
    }
}

/// `kind = "sum"`: the plain residual sum, with its single-stream options.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SumSpec {
    /// Mixing of the embedding stream into every Transformer layer's input,
    /// `X ← λ_r·X + λ₀·X_1` with learnable per-layer scalars (modded-nanogpt, nanochat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x0_mix: Option<X0Mix>,
    /// GPAS (gradient-preserving activation scaling): after every residual addition the stream
    /// is scaled down in the forward pass only, `X ← X − SiLU(α_k)·sg(X)`, one learnable `α_k`
    /// per Transformer layer starting at 0 (see [`crate::model::residual::gpas`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gpas: bool,
}

/// The initial values of the per-layer x0-mixing scalars: `λ_r` on the stream, `λ₀` on the
/// embedding stream `X_1` (default 1 and 0: the plain residual stream at initialisation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct X0Mix {
    #[serde(default = "one")]
    pub residual: f64,
    #[serde(default)]
    pub x0: f64,
}

fn one() -> f64 {
    1.0
}

/// The residual state and update resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Residual {
    /// One stream and the plain sum.
    Sum { x0_mix: Option<X0Mix>, gpas: bool },
    /// `n` residual streams and their mixing.
    Streams(Streams),
    /// Attention over depth, with its block size.
    AttnRes(AttnRes),
    /// nGPT's unit-norm weights and scaling factors.
    Hypersphere(Hypersphere),
}

impl Default for Residual {
    fn default() -> Self {
        Residual::Sum { x0_mix: None, gpas: false }
    }
}

/// Resolves `spec` for `sublayers` = 2L sublayers with the recipe's variables.
pub fn resolve(spec: &ResidualSpec, vars: &Vars, sublayers: usize) -> anyhow::Result<Residual> {
    Ok(match spec {
        ResidualSpec::Sum(s) => {
            if let Some(X0Mix { residual, x0 }) = s.x0_mix {
                ensure!(residual.is_finite() && x0.is_finite(), "`residual.x0_mix` values must be finite numbers");
            }
            Residual::Sum { x0_mix: s.x0_mix, gpas: s.gpas }
        }
        ResidualSpec::Hc(h) => Residual::Streams(streams::resolve_hc(h)?),
        ResidualSpec::Mhc(m) => Residual::Streams(streams::resolve_mhc(m)?),
        ResidualSpec::MhcLite(m) => Residual::Streams(streams::resolve_mhc_lite(m)?),
        ResidualSpec::AttnRes(a) => Residual::AttnRes(streams::resolve_attn_res(a, sublayers)?),
        ResidualSpec::Hypersphere(h) => Residual::Hypersphere(hypersphere::resolve(h, vars)?),
    })
}

impl Residual {
    /// The kind's name (a row of [`KINDS`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Residual::Sum { .. } => "sum",
            Residual::Streams(s) => s.mixing.as_str(),
            Residual::AttnRes(_) => "attn-res",
            Residual::Hypersphere(_) => "hypersphere",
        }
    }

    /// Whether the state is the one stream of the plain sum.
    pub fn is_sum(&self) -> bool {
        matches!(self, Residual::Sum { .. })
    }

    pub fn x0_mix(&self) -> Option<X0Mix> {
        match self {
            Residual::Sum { x0_mix, .. } => *x0_mix,
            _ => None,
        }
    }

    pub fn gpas(&self) -> bool {
        matches!(self, Residual::Sum { gpas: true, .. })
    }

    pub fn streams(&self) -> Option<Streams> {
        match self {
            Residual::Streams(s) => Some(*s),
            _ => None,
        }
    }

    pub fn attn_res(&self) -> Option<AttnRes> {
        match self {
            Residual::AttnRes(a) => Some(*a),
            _ => None,
        }
    }

    pub fn hypersphere(&self) -> Option<Hypersphere> {
        match self {
            Residual::Hypersphere(h) => Some(*h),
            _ => None,
        }
    }
}
