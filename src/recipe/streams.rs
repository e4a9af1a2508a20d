//! A residual state that is more than one vector, and how each sublayer reads and writes it:
//! `n` streams (Hyper-Connections, Zhu et al., ICLR 2025; mHC, DeepSeek, "mHC:
//! Manifold-Constrained Hyper-Connections"; mHC-lite, Yang & Gao, 2026), or the earlier
//! sublayers' outputs attended over depth (Attention Residuals, Kimi Team, 2026). The recipe's
//! sublayers keep their branch `N_out(F(s·N_in(·)))`; the state replaces `a·X + c·branch` and
//! the outer norm (see [`crate::model::streams`] and [`crate::model::depth_attention`] for the
//! equations).

use super::spec::{AttnResSpec, StreamMixing, StreamsSpec};
use anyhow::ensure;

/// The streams resolved: the mixing with its settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Streams {
    pub n: usize,
    pub mixing: Mixing,
}

/// A resolved mixing, each with only the settings it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mixing {
    Hc { dynamic: bool },
    Mhc { sinkhorn_iters: usize },
    MhcLite,
}

/// The most streams normlab builds (mHC-lite's basis has `n!` permutations: 720 at 6).
pub const MAX_STREAMS: usize = 8;
/// The most streams mHC-lite builds.
pub const MAX_LITE_STREAMS: usize = 6;

/// Resolves `s`: its size and the settings its mixing takes (what the streams replace is checked
/// against the sublayers by [`super::resolve`]).
pub fn resolve(s: &StreamsSpec) -> anyhow::Result<Streams> {
    ensure!((1..=MAX_STREAMS).contains(&s.n), "streams.n = {} must lie in 1..={MAX_STREAMS} (the papers use 4)", s.n);
    let mixing = match s.mixing {
        StreamMixing::Hc => {
            ensure!(s.sinkhorn_iters.is_none(), "streams.sinkhorn_iters applies to mixing = \"mhc\" only");
            Mixing::Hc { dynamic: s.dynamic.unwrap_or(true) }
        }
        StreamMixing::Mhc => {
            ensure!(s.dynamic.is_none(), "streams.dynamic applies to mixing = \"hc\" only (mHC is always dynamic)");
            let iters = s.sinkhorn_iters.unwrap_or(20);
            ensure!((1..=1000).contains(&iters), "streams.sinkhorn_iters = {iters} must lie in 1..=1000 (mHC: 20)");
            Mixing::Mhc { sinkhorn_iters: iters }
        }
        StreamMixing::MhcLite => {
            ensure!(s.dynamic.is_none() && s.sinkhorn_iters.is_none(), "mixing = \"mhc-lite\" takes only `n`");
            ensure!(s.n <= MAX_LITE_STREAMS, "mHC-lite mixes n! permutations: streams.n ≤ {MAX_LITE_STREAMS}");
            Mixing::MhcLite
        }
    };
    Ok(Streams { n: s.n, mixing })
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
            ensure!(n >= 1, "attn_res.blocks = 0: Block AttnRes needs at least one block (the paper uses 8)");
            sublayers.div_ceil(n.min(sublayers))
        }
    };
    Ok(AttnRes { block })
}
