//! Presets that change the residual update itself: Admin's rescaled skip and nGPT's step on the
//! hypersphere. Notation as in [`super::presets`]; `g` a learnable gate (see
//! [`super::spec::GateOn`]).

use super::presets::{blank, post, pre};
use super::spec::{
    GateOn, GateOwner, GateShape, GateSpec, HypersphereSpec, MomentControlSpec, NormName, NormSpec, RecipeSpec, Scale,
};

/// Admin's initial ω for `N = 2L` residual branches at admin-torch's default output change
/// `O(log N)`: `ω₀ = √((N + 1)/ln(N + 1) − 1)` (`admin_torch.calculate_init`).
pub const ADMIN_OMEGA: &str = "sqrt((2*L + 1)/ln(2*L + 1) - 1)";

/// Admin (Liu et al., 2020, "Understanding the Difficulty of Training Transformers"): post-LN
/// whose skip is scaled by a learnable `ω ∈ ℝ^d`, `X_{l+1} = LN(ω ⊙ X_l + F_l(X_l))`, ω₀ =
/// [`ADMIN_OMEGA`], the closed form the authors' admin-torch package ships in place of the
/// paper's profiling pass (its `as_parameter`: ω a trained per-channel vector).
pub fn admin() -> RecipeSpec {
    let mut r = post();
    r.name = "admin".into();
    r.about =
        "Admin: X = LN(ω ⊙ X + F(X)), ω ∈ ℝ^d learnable per sublayer, ω₀ = √((2L+1)/ln(2L+1) − 1) (admin-torch's \
        O(log N) default; Liu et al. 2020)"
            .into();
    let init = Scale::expr(ADMIN_OMEGA);
    let on = GateOn::Skip;
    r.sublayer.gate =
        Some(GateSpec { shape: GateShape::Channel, init, per: GateOwner::Sublayer, on, scale: None, profile: false });
    r
}

/// Admin with the paper's profiling pass (the authors' Transformer-Clinic, `adaptive-profiling`):
/// ω of each sublayer set at a fresh start from one forward on the training data,
/// `ω_1 = 1`, `ω_{l+1} = √(Var(ω_l ⊙ X_l) + Var(F_l(X_l)))`, then trained.
pub fn admin_profile() -> RecipeSpec {
    let mut r = admin();
    r.name = "admin-profile".into();
    r.about = "Admin with its profiling pass: ω_l set from one forward at initialisation, ω_1 = 1, ω_{l+1} = \
        √(Var(ω_l ⊙ X_l) + Var(F_l(X_l))), then trained (Liu et al. 2020, Transformer-Clinic)"
        .into();
    if let Some(g) = &mut r.sublayer.gate {
        g.init = Scale::Number(1.0);
        g.profile = true;
    }
    r
}

/// nGPT (Loshchilov et al., 2024, "nGPT: Normalized Transformer with Representation Learning on
/// the Hypersphere"; NVIDIA's reference `model.py`): unit-norm embeddings, hidden states and
/// weight vectors; every sublayer steps along the sphere,
/// `h ← Norm(h + α ⊙ (Norm(F(h)) − h))`, with eigen learning rates `α ∈ ℝ^d` (used 0.05,
/// stored from `1/√d`); queries and keys unit per head times `s_qk`, softmax scale `√d_h`;
/// `s_uv` on the GLU; logits `s_z ⊙ (h W_out)`; no norm slots otherwise.
pub fn ngpt() -> RecipeSpec {
    let mut r = blank(
        "ngpt",
        "nGPT: h ← Norm(h + α ⊙ (Norm(F(h)) − h)), unit-norm embeddings and weights (projected after every step), \
            s_qk, s_uv, s_z, softmax scale √d_h, no weight decay (Loshchilov et al. 2024)",
    );
    let l2 = || Some(NormSpec::Kind(NormName::L2));
    r.sublayer.output = l2();
    r.sublayer.outer = l2();
    r.sublayer.gate = Some(GateSpec {
        shape: GateShape::Channel,
        init: Scale::Number(0.05),
        per: GateOwner::Sublayer,
        on: GateOn::Interpolate,
        scale: Some(Scale::expr("1/sqrt(d)")),
        profile: false,
    });
    r.hypersphere = Some(HypersphereSpec::default());
    r.notes = vec![
        "trains without weight decay (its projection would undo it) and, as the paper, needs no warm-up: set \
            schedule.warmup_fraction = 0 to match it"
            .into(),
    ];
    r
}

/// DeepScaleLM (Kedia et al., 2024, "Transformers Get Stable"; the authors' Megatron-LM code):
/// pre-LN with the skip and the branch scaled so that unit variances add to one,
/// `X ← λ·X + β·F(LN(X))`, `λ² + β² = 1`, `β² = k_β/L` (`params.k_beta` = 1: at the authors' 192-layer
/// runs 1/192 = 0.0052, their code's default β² = 0.005), and every weight drawn by the
/// moment-control initialisation ([`MomentControlSpec`]).
pub fn deepscalelm() -> RecipeSpec {
    let mut r = pre();
    r.name = "deepscalelm".into();
    r.about = "DeepScaleLM: X ← λX + βF(LN(X)), λ² + β² = 1, β² = k_β/L, weights drawn for unit output moments (Kedia \
        et al. 2024)"
        .into();
    r.params.insert("k_beta".into(), 1.0);
    r.sublayer.skip = Some(Scale::expr("sqrt(1 - k_beta/L)"));
    r.sublayer.residual = Some(Scale::expr("sqrt(k_beta/L)"));
    r.moment_control = Some(MomentControlSpec::default());
    r.notes = vec!["needs more layers than k_β (β² = k_β/L < 1 keeps a skip); for L = 1 lower params.k_beta".into()];
    r
}
