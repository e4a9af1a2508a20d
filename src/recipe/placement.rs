//! Which of the papers' canonical placements a resolved recipe is, read from its structure
//! rather than its name, so that a custom recipe equal to Peri-LN counts as Peri-LN and the
//! report's findings never depend on preset names.

use super::residual::Residual;
use super::resolve::ResolvedRecipe;
use super::sublayers::SublayerPlan;
use crate::norm::NormKind;

/// The plain placements (every scale and init scale 1, no gate, no x0 mixing, LayerNorm or
/// RMSNorm in every slot). Attention options (QK-norm, soft-caps, QK-clip) do not change where
/// the norms sit: a soft-capped pre-norm is pre-norm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// `X_{l+1} = LN(X_l + F(X_l))`, no final norm (KiteNorm Table 2, post).
    Post,
    /// `X_{l+1} = X_l + F(LN(X_l))` with a final norm (pre).
    Pre,
    /// `X_{l+1} = X_l + LN(F(LN(X_l)))` (the Peri-LN paper, Peri-LN).
    Peri,
}

fn is_ln(k: &Option<NormKind>) -> bool {
    matches!(k, Some(NormKind::LayerNorm { .. } | NormKind::RmsNorm { .. }))
}

fn plain(s: &SublayerPlan) -> bool {
    [s.skip, s.residual, s.input_scale, s.init_out, s.init_in].iter().all(|v| *v == 1.0) && s.gate.is_none()
}

impl Placement {
    /// The placement `r` is, or `None` for any other recipe (scaled, hybrid, DyT, BHyT, …).
    pub fn of(r: &ResolvedRecipe) -> Option<Self> {
        let slots = |s: &SublayerPlan| (is_ln(&s.input), is_ln(&s.output), is_ln(&s.outer));
        let first = r.sublayers.first()?;
        let uniform = r.sublayers.iter().all(|s| plain(s) && slots(s) == slots(first));
        let no_others =
            r.sublayers.iter().all(|s| [&s.input, &s.output, &s.outer].iter().all(|k| k.is_none() || is_ln(k)));
        // A residual state beyond one vector, nGPT's sphere and the controls inside attention make
        // a recipe of its own, not the placement its norms share.
        let a = &r.attention;
        let extras = r.residual != Residual::default() || a.gate.is_on() || a.sink || a.value_residual;
        if !uniform || !no_others || extras || r.logits.regularizer != 0.0 {
            return None;
        }
        match (slots(first), r.logits.norm.is_some()) {
            ((false, false, true), false) => Some(Placement::Post),
            ((true, false, false), true) => Some(Placement::Pre),
            ((true, true, false), _) => Some(Placement::Peri),
            _ => None,
        }
    }
}

/// Whether every sublayer normalises what it adds to the stream (an output norm) or the stream
/// itself (an outer norm), so the hidden-state variance cannot grow without bound with depth.
pub fn bounds_stream(r: &ResolvedRecipe) -> bool {
    r.sublayers.iter().all(|s| s.output.is_some() || s.outer.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{preset, resolve};

    fn of(name: &str) -> (Option<Placement>, bool) {
        let r = resolve(&preset(name).unwrap(), crate::recipe::Dims { n_layers: 6, d_model: 64 }, 1e-5).unwrap();
        (Placement::of(&r), bounds_stream(&r))
    }

    #[test]
    fn the_papers_placements_by_structure() {
        assert_eq!(of("post"), (Some(Placement::Post), true));
        assert_eq!(of("pre"), (Some(Placement::Pre), false));
        assert_eq!(of("peri"), (Some(Placement::Peri), true));
        // Scaled or other-norm variants are not the plain placements (Table 2).
        for name in ["gpt2-pre", "lns", "dyt", "bhyt", "deepnorm", "mix", "keel"] {
            assert_eq!(of(name).0, None, "{name}");
        }
        assert!(of("kitenorm").1 && !of("mix").1 && !of("dyt").1);
        // Gates and x0 mixing change the stream; logit controls leave the placement.
        for name in ["rezero", "skipinit", "layerscale", "x0-mix", "hybridnorm", "derf", "pre-1p", "admin", "ngpt"] {
            assert_eq!(of(name).0, None, "{name}");
        }
        // A residual state beyond one vector and the controls inside attention are schemes of their
        // own, though their norms sit where pre-norm's do.
        for name in ["hc", "mhc", "mhc-lite", "attnres", "attnres-block", "gated-attn", "attn-sink", "value-residual"] {
            assert_eq!(of(name).0, None, "{name}");
        }
        assert_eq!(of("softcap").0, Some(Placement::Pre));
        assert_eq!(of("sandwich").0, Some(Placement::Peri));
    }
}
