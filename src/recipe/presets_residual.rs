//! Presets that change the residual update itself: Admin's rescaled skip and nGPT's step on the
//! hypersphere. Notation as in [`super::presets`]; `g` a learnable gate (see
//! [`super::spec::GateOn`]).

use super::presets::{blank, post};
use super::spec::{GateOn, GateOwner, GateShape, GateSpec, HypersphereSpec, NormName, NormSpec, RecipeSpec, Scale};

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
    r.sublayer.gate = Some(GateSpec { shape: GateShape::Channel, init, per: GateOwner::Sublayer, on, scale: None });
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
    });
    r.hypersphere = Some(HypersphereSpec::default());
    r.notes = vec![
        "trains without weight decay (its projection would undo it) and, as the paper, needs no warm-up: set \
            schedule.warmup_fraction = 0 to match it"
            .into(),
    ];
    r
}
