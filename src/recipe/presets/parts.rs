//! The parts every preset is built from: the blank recipe (no norms, every scale 1), norm
//! slots, expressions, layer ranges and gates.

use crate::recipe::spec::{
    AttnGate, BaseNorm, GateOn, GateOwner, GateShape, GateSpec, NormName, NormSpec, NormTable, QkNorm, RecipeSpec,
    Scale, SublayerSpec, Which,
};
use std::collections::BTreeMap;

/// A recipe with no norms and every scale 1: the start of every preset and of a config-file
/// recipe written from scratch.
pub fn blank(name: &str, about: &str) -> RecipeSpec {
    RecipeSpec {
        name: name.into(),
        about: about.into(),
        norm: BaseNorm::Layernorm,
        embedding_scale: None,
        embedding_multiplier: None,
        embedding_norm: NormSpec::none(),
        final_norm: NormSpec::none(),
        qk_norm: QkNorm::None,
        v_norm: QkNorm::None,
        attn_softcap: None,
        final_softcap: None,
        attn_gate: AttnGate::None,
        attn_sink: false,
        value_residual: false,
        gpas: false,
        completep: None,
        taper: None,
        x0_mix: None,
        qk_clip: None,
        hypersphere: None,
        moment_control: None,
        streams: None,
        attn_res: None,
        regularizer: 0.0,
        params: BTreeMap::new(),
        sublayer: SublayerSpec::default(),
        layers: Vec::new(),
        notes: Vec::new(),
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
    r.norm = BaseNorm::Rmsnorm;
    r
}
