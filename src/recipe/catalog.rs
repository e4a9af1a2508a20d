//! The one table of named recipes: each preset's name, the function that builds its spec
//! (from [`super::presets`]) and the facts recorded about it, in the order `normlab recipes` lists them. Every other list of
//! presets derives from it.

use super::presets::{attention, logits, norm_functions, placement, residual};
use super::spec::RecipeSpec;

/// One preset: its name, the function that builds its spec, and facts recorded about that
/// spec as built (a recipe changed from it may not keep them).
pub struct Preset {
    pub name: &'static str,
    pub build: fn() -> RecipeSpec,
    pub notes: &'static [&'static str],
}

/// KiteNorm's fact, which its ablation without the regulariser keeps.
const KITENORM_NOTES: &[&str] =
    &["The outer norm's scalar shift β′ of every sublayer but the last cannot learn: it adds a constant along the \
            all-ones direction, which the next sublayer's inner and outer scalarised LayerNorms both remove by \
            mean-centring, so its gradient is exactly zero. In float32 that gradient is rounding noise, which Adam \
            normalises into updates of up to the learning rate: the parameter drifts, without effect on the output."];

/// Every preset.
pub const PRESETS: &[Preset] = &[
    Preset { name: "post", build: placement::post, notes: &[] },
    Preset { name: "pre", build: placement::pre, notes: &[] },
    Preset { name: "pre-rms", build: placement::pre_rms, notes: &[] },
    Preset { name: "gpt2-pre", build: placement::gpt2_pre, notes: &[] },
    Preset { name: "lns", build: placement::lns, notes: &[] },
    Preset { name: "lns-rms", build: placement::lns_rms, notes: &[] },
    Preset { name: "peri", build: placement::peri, notes: &[] },
    Preset { name: "peri-rms", build: placement::peri_rms, notes: &[] },
    Preset { name: "peri-norm", build: placement::peri_norm, notes: &[] },
    Preset { name: "mix", build: placement::mix, notes: &[] },
    Preset { name: "keel", build: placement::keel, notes: &[] },
    Preset { name: "kitenorm", build: placement::kitenorm, notes: KITENORM_NOTES },
    Preset { name: "kitenorm-no-inner", build: placement::kitenorm_no_inner, notes: &[] },
    Preset { name: "kitenorm-vector-ln", build: placement::kitenorm_vector_ln, notes: &[] },
    Preset { name: "kitenorm-no-reg", build: placement::kitenorm_no_reg, notes: KITENORM_NOTES },
    Preset { name: "dyt", build: norm_functions::dyt, notes: &[] },
    Preset { name: "dyt-plain", build: norm_functions::dyt_plain, notes: &[] },
    Preset { name: "bhyt-star", build: norm_functions::bhyt_star, notes: &[] },
    Preset { name: "bhyt", build: norm_functions::bhyt, notes: &[] },
    Preset { name: "rmsnorm-approx", build: norm_functions::rmsnorm_approx, notes: &[] },
    Preset { name: "olmo2", build: placement::olmo2, notes: &[] },
    Preset { name: "deepnorm", build: residual::deepnorm, notes: &[] },
    Preset { name: "sandwich", build: placement::sandwich, notes: &[] },
    Preset { name: "pre-1p", build: placement::pre_1p, notes: &[] },
    Preset { name: "derf", build: norm_functions::derf, notes: &[] },
    Preset { name: "seednorm", build: norm_functions::seednorm, notes: &[] },
    Preset { name: "rezero", build: residual::rezero, notes: &[] },
    Preset { name: "skipinit", build: residual::skipinit, notes: &[] },
    Preset { name: "layerscale", build: residual::layerscale, notes: &[] },
    Preset { name: "x0-mix", build: residual::x0_mix, notes: &[] },
    Preset { name: "hybridnorm", build: placement::hybridnorm, notes: &[] },
    Preset { name: "hybridnorm-star", build: placement::hybridnorm_star, notes: &[] },
    Preset { name: "softcap", build: logits::softcap, notes: &[] },
    Preset { name: "qk-l2", build: logits::qk_l2, notes: &[] },
    Preset { name: "qk-clip", build: logits::qk_clip, notes: &[] },
    Preset { name: "admin", build: residual::admin, notes: &[] },
    Preset { name: "admin-profile", build: residual::admin_profile, notes: &[] },
    Preset {
        name: "ngpt",
        build: residual::ngpt,
        notes: &[
            "trains without weight decay (its projection would undo it) and, as the paper, needs no warm-up: set \
            schedule.warmup_fraction = 0 to match it",
        ],
    },
    Preset {
        name: "deepscalelm",
        build: residual::deepscalelm,
        notes: &["needs more layers than k_β (β² = k_β/L < 1 keeps a skip); for L = 1 lower params.k_beta"],
    },
    Preset {
        name: "gated-attn",
        build: attention::gated_attn,
        notes: &[
            "attention.gate = \"headwise\" gives the paper's head-wise variant (one gate per head, W_θ ∈ ℝ^{d×H})",
        ],
    },
    Preset { name: "attn-sink", build: attention::attn_sink, notes: &[] },
    Preset { name: "value-residual", build: attention::value_residual, notes: &[] },
    Preset { name: "zc-rms", build: norm_functions::zc_rms, notes: &[] },
    Preset {
        name: "gemma3",
        build: placement::gemma3,
        notes: &[
            "Gemma 3's GeGLU and its 5:1 local (sliding-window) to global attention are model choices outside the \
            recipe: model.ffn picks the FFN; every layer attends globally",
        ],
    },
    Preset { name: "hc", build: residual::hc, notes: &[] },
    Preset { name: "mhc", build: residual::mhc, notes: &[] },
    Preset { name: "mhc-lite", build: residual::mhc_lite, notes: &[] },
    Preset { name: "attnres", build: residual::attnres, notes: &[] },
    Preset { name: "attnres-block", build: residual::attnres_block, notes: &[] },
    Preset { name: "gpas", build: residual::gpas, notes: &[] },
    Preset { name: "completep", build: residual::completep, notes: &[] },
    Preset { name: "tapernorm", build: norm_functions::tapernorm, notes: &[] },
];

/// All preset names, in the order `normlab recipes` lists them.
pub const PRESET_NAMES: &[&str] = &names();

const fn names() -> [&'static str; PRESETS.len()] {
    let mut out = [""; PRESETS.len()];
    let mut i = 0;
    while i < PRESETS.len() {
        out[i] = PRESETS[i].name;
        i += 1;
    }
    out
}

/// Looks a preset up by name.
pub fn preset(name: &str) -> Option<RecipeSpec> {
    PRESETS.iter().find(|p| p.name == name).map(|p| (p.build)())
}

/// The facts recorded about `spec` when it is a preset as built (none for a recipe changed
/// from one, whose facts may no longer hold).
pub fn preset_notes(spec: &RecipeSpec) -> &'static [&'static str] {
    PRESETS.iter().find(|p| p.name == spec.name && (p.build)() == *spec).map_or(&[], |p| p.notes)
}
