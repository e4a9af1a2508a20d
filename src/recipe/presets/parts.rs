//! The parts every preset is built from: the blank recipe (no norms, every scale 1), norm
//! slots, expressions, layer ranges and gates.

use crate::recipe::spec::{
    AttentionSpec, BaseNorm, EmbeddingSpec, GateOn, GateOwner, GateShape, GateSpec, InitSpec, LogitsSpec, NormName,
    NormSpec, NormTable, PlacementSpec, RecipeSpec, ResidualSpec, Scale, SublayerSpec, Which,
};

/// A recipe with no norms and every scale 1: the start of every preset and of a config-file
/// recipe written from scratch.
pub fn blank(name: &str, about: &str) -> RecipeSpec {
    RecipeSpec {
        name: name.into(),
        about: about.into(),
        placement: PlacementSpec::default(),
        attention: AttentionSpec::default(),
        residual: ResidualSpec::default(),
        init: InitSpec::default(),
        embedding: EmbeddingSpec::default(),
        logits: LogitsSpec::default(),
    }
}

pub(super) fn ln() -> Option<NormSpec> {
    Some(NormSpec::Kind(NormName::LN))
}

pub(super) fn norm_with(kind: NormName, f: impl FnOnce(&mut NormTable)) -> NormSpec {
    let mut t = NormTable::of(kind);
    f(&mut t);
    NormSpec::Table(t)
}

pub(super) fn expr(s: &str) -> Option<Scale> {
    Some(Scale::expr(s))
}

pub(super) fn layers(range: &str, which: Which) -> SublayerSpec {
    SublayerSpec { range: Some(range.into()), sublayers: Some(which), ..Default::default() }
}

pub(super) fn norm(kind: NormName) -> NormSpec {
    NormSpec::Kind(kind)
}

pub(super) fn gate(shape: GateShape, init: Scale, per: GateOwner) -> Option<GateSpec> {
    Some(GateSpec { shape, init, per, on: GateOn::Branch, scale: None, profile: false })
}

pub(super) fn weightless_rms() -> NormSpec {
    NormSpec::Table(NormTable { gain: Some(false), ..NormTable::of(NormName::kind("rmsnorm")) })
}

/// `recipe` with RMSNorm as its base norm, renamed: the form the Peri-LN paper ("primarily
/// RMSNorm") and the BHyT paper (Llama-3.2's RMSNorm, §4.1 and C.3) train their baselines in.
pub(super) fn rms_form(mut r: RecipeSpec, name: &str, about: &str) -> RecipeSpec {
    r.name = name.into();
    r.about = about.into();
    r.placement.norm = BaseNorm::Rmsnorm;
    r
}
