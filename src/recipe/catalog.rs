//! The one table of named recipes: each preset's name and the function that builds its spec
//! (from [`super::presets`]), in the order `normlab recipes` lists them. Every other list of
//! presets derives from it.

use super::presets::{attention, logits, norm_functions, placement, residual};
use super::spec::RecipeSpec;

/// A preset's name and the function that builds its spec.
pub type Preset = (&'static str, fn() -> RecipeSpec);

/// Every preset.
pub const PRESETS: &[Preset] = &[
    ("post", placement::post),
    ("pre", placement::pre),
    ("pre-rms", placement::pre_rms),
    ("gpt2-pre", placement::gpt2_pre),
    ("lns", placement::lns),
    ("lns-rms", placement::lns_rms),
    ("peri", placement::peri),
    ("peri-rms", placement::peri_rms),
    ("peri-norm", placement::peri_norm),
    ("mix", placement::mix),
    ("keel", placement::keel),
    ("kitenorm", placement::kitenorm),
    ("kitenorm-no-inner", placement::kitenorm_no_inner),
    ("kitenorm-vector-ln", placement::kitenorm_vector_ln),
    ("kitenorm-no-reg", placement::kitenorm_no_reg),
    ("dyt", norm_functions::dyt),
    ("dyt-plain", norm_functions::dyt_plain),
    ("bhyt-star", norm_functions::bhyt_star),
    ("bhyt", norm_functions::bhyt),
    ("rmsnorm-approx", norm_functions::rmsnorm_approx),
    ("olmo2", placement::olmo2),
    ("deepnorm", residual::deepnorm),
    ("sandwich", placement::sandwich),
    ("pre-1p", placement::pre_1p),
    ("derf", norm_functions::derf),
    ("seednorm", norm_functions::seednorm),
    ("rezero", residual::rezero),
    ("skipinit", residual::skipinit),
    ("layerscale", residual::layerscale),
    ("x0-mix", residual::x0_mix),
    ("hybridnorm", placement::hybridnorm),
    ("hybridnorm-star", placement::hybridnorm_star),
    ("softcap", logits::softcap),
    ("qk-l2", logits::qk_l2),
    ("qk-clip", logits::qk_clip),
    ("admin", residual::admin),
    ("admin-profile", residual::admin_profile),
    ("ngpt", residual::ngpt),
    ("deepscalelm", residual::deepscalelm),
    ("gated-attn", attention::gated_attn),
    ("attn-sink", attention::attn_sink),
    ("value-residual", attention::value_residual),
    ("zc-rms", norm_functions::zc_rms),
    ("gemma3", placement::gemma3),
    ("hc", residual::hc),
    ("mhc", residual::mhc),
    ("mhc-lite", residual::mhc_lite),
    ("attnres", residual::attnres),
    ("attnres-block", residual::attnres_block),
    ("gpas", residual::gpas),
    ("completep", residual::completep),
    ("tapernorm", norm_functions::tapernorm),
];

/// All preset names, in the order `normlab recipes` lists them.
pub const PRESET_NAMES: &[&str] = &names();

const fn names() -> [&'static str; PRESETS.len()] {
    let mut out = [""; PRESETS.len()];
    let mut i = 0;
    while i < PRESETS.len() {
        out[i] = PRESETS[i].0;
        i += 1;
    }
    out
}

/// Looks a preset up by name.
pub fn preset(name: &str) -> Option<RecipeSpec> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, spec)| spec())
}
