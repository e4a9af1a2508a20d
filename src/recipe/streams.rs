//! A residual state that is more than one vector, and how each sublayer reads and writes it:
//! `n` streams (Hyper-Connections, Zhu et al., ICLR 2025; mHC, DeepSeek, "mHC:
//! Manifold-Constrained Hyper-Connections"; mHC-lite, Yang & Gao, 2026), or the earlier
//! sublayers' outputs attended over depth (Attention Residuals, Kimi Team, 2026). The recipe's
//! sublayers keep their branch `N_out(F(s·N_in(·)))`; the state replaces `a·X + c·branch` and
//! the outer norm (see [`crate::model::residual::stream_mix`] and [`crate::model::residual::depth_attention`] for the
//! equations). Each is a residual kind of [`super::residual::KINDS`], and each kind's spec
//! holds only the settings that kind takes.

use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// `[recipe.residual] kind = "hc"`: Hyper-Connections.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HcSpec {
    /// The number of streams (the paper's expansion rate, 4).
    #[serde(default = "four")]
    pub n: usize,
    /// The input-dependent (`tanh`) terms (default true, the paper's DHC; false is its static
    /// SHC).
    #[serde(default = "yes")]
    pub dynamic: bool,
}

/// `[recipe.residual] kind = "mhc"`: mHC.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MhcSpec {
    #[serde(default = "four")]
    pub n: usize,
    /// Sinkhorn–Knopp iterations (default 20, the paper's t_max).
    #[serde(default = "twenty")]
    pub sinkhorn_iters: usize,
}

/// `[recipe.residual] kind = "mhc-lite"`: mHC-lite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MhcLiteSpec {
    #[serde(default = "four")]
    pub n: usize,
}

fn four() -> usize {
    4
}

fn twenty() -> usize {
    20
}

fn yes() -> bool {
    true
}

/// `[recipe.residual] kind = "attn-res", blocks = 8`: Attention Residuals (Kimi Team,
/// "Attention Residuals", 2026). Every sublayer reads a softmax mixture of the earlier
/// sublayers' outputs, weighted by a learned pseudo-query against their RMS-normalised values,
/// instead of their unit-weight sum.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttnResSpec {
    /// Block AttnRes: the 2L sublayers fall into this many blocks of `⌈2L/N⌉` consecutive
    /// sublayers, summed within a block and attended across blocks (the paper's N; ≈ 8 recovers
    /// most of the full form's gain). Unset: Full AttnRes, every sublayer's output a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<usize>,
}

/// The streams resolved: the mixing with its settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Streams {
    pub n: usize,
    pub mixing: Mixing,
}

/// A resolved mixing, each with only the settings it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mixing {
    /// Hyper-Connections: learnable width connections `A_m`, `A_r` and depth connections `B`,
    /// static (initialised as pre-norm) plus, with `dynamic`, `tanh` terms of the normalised
    /// streams; unconstrained.
    Hc { dynamic: bool },
    /// mHC: read `σ(·)`, write `2σ(·)`, residual mixing projected onto the doubly stochastic
    /// matrices by Sinkhorn–Knopp.
    Mhc { sinkhorn_iters: usize },
    /// mHC-lite: mHC whose residual mixing is a convex combination of the `n!` permutation
    /// matrices (exactly doubly stochastic, no iterations).
    MhcLite,
}

impl Mixing {
    /// The residual kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mixing::Hc { .. } => "hc",
            Mixing::Mhc { .. } => "mhc",
            Mixing::MhcLite => "mhc-lite",
        }
    }
}

/// The most streams normlab builds (mHC-lite's basis has `n!` permutations: 720 at 6).
pub const MAX_STREAMS: usize = 8;
/// The most streams mHC-lite builds.
pub const MAX_LITE_STREAMS: usize = 6;

fn streams(n: usize, mixing: Mixing) -> anyhow::Result<Streams> {
    ensure!((1..=MAX_STREAMS).contains(&n), "residual.n = {n} must lie in 1..={MAX_STREAMS} (the papers use 4)");
    Ok(Streams { n, mixing })
}

/// Hyper-Connections resolved.
pub fn resolve_hc(s: &HcSpec) -> anyhow::Result<Streams> {
    streams(s.n, Mixing::Hc { dynamic: s.dynamic })
}

/// mHC resolved.
pub fn resolve_mhc(s: &MhcSpec) -> anyhow::Result<Streams> {
    let iters = s.sinkhorn_iters;
    ensure!((1..=1000).contains(&iters), "residual.sinkhorn_iters = {iters} must lie in 1..=1000 (mHC: 20)");
    streams(s.n, Mixing::Mhc { sinkhorn_iters: iters })
}

/// mHC-lite resolved.
pub fn resolve_mhc_lite(s: &MhcLiteSpec) -> anyhow::Result<Streams> {
    ensure!(s.n <= MAX_LITE_STREAMS, "mHC-lite mixes n! permutations: residual.n ≤ {MAX_LITE_STREAMS}");
    streams(s.n, Mixing::MhcLite)
}

/// Attention Residuals resolved for a depth: the block size in sublayers (1: Full AttnRes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnRes {
    /// Consecutive sublayers summed into one source; the 2L sublayers make `⌈2L/block⌉` of them.
    pub block: usize,
}

/// Resolves `a` for `sublayers` = 2L: Block AttnRes's `N` blocks of `⌈2L/N⌉` sublayers each (the
/// last may be shorter), or one sublayer per source without `blocks`.
pub fn resolve_attn_res(a: &AttnResSpec, sublayers: usize) -> anyhow::Result<AttnRes> {
    let block = match a.blocks {
        None => 1,
        Some(n) => {
            ensure!(n >= 1, "residual.blocks = 0: Block AttnRes needs at least one block (the paper uses 8)");
            sublayers.div_ceil(n.min(sublayers))
        }
    };
    Ok(AttnRes { block })
}
