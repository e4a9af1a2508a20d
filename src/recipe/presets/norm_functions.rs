//! Presets that replace the norm's function: DyT and DyT-plain, BHyT* and BHyT (the BHyT
//! paper), RMSNorm-Approx (its Table 5), Derf and SeeDNorm. Notation as in
//! [`super::placement`].

use super::parts::{blank, expr, layers, norm, norm_with};
use crate::recipe::spec::{BaseNorm, NormName, NormSpec, NormTable, RecipeSpec, Scale, Which};

/// DyT's α₀ before attention by width `d`, from the DyT authors' LLaMA table (Zhu et al. 2025:
/// 7B, d = 4096: 0.8; 13B, d = 5120: 0.6; 34B and 70B, d = 8192: 0.2). Widths below the
/// table's smallest take its first row.
pub const DYT_ATTN_ALPHA: &str = "0.8*(d <= 4096) + 0.6*(d > 4096)*(d <= 5120) + 0.2*(d > 5120)";

/// DyT's α₀ before the FFN and in the final DyT by width (same table: 0.2, 0.15, 0.05).
pub const DYT_OTHER_ALPHA: &str = "0.2*(d <= 4096) + 0.15*(d > 4096)*(d <= 5120) + 0.05*(d > 5120)";

/// DyT as its authors train LLaMA (Zhu et al. 2025): pre-norm with every RMSNorm replaced by
/// `γ tanh(α x) + β`, α₀ set per position by width ([`DYT_ATTN_ALPHA`], [`DYT_OTHER_ALPHA`]),
/// and a learnable scalar on the token embeddings initialised to √d.
pub fn dyt() -> RecipeSpec {
    let mut r = blank(
        "dyt",
        "DyT, the authors' LLaMA recipe: X = X + F(DyT(X)), DyT(x) = γ·tanh(αx) + β, α₀ by width (0.8 before \
            attention, 0.2 before the FFN and final for d ≤ 4096); embeddings × learnable e₀ = √d (Zhu et al. 2025)",
    );
    r.embedding.scale = expr("sqrt(d)");
    r.placement.sublayer.input = Some(norm_with(NormName::kind("dyt"), |t| t.alpha = expr(DYT_OTHER_ALPHA)));
    let mut attn = layers("1..=L", Which::Attn);
    attn.input = Some(norm_with(NormName::kind("dyt"), |t| t.alpha = expr(DYT_ATTN_ALPHA)));
    r.placement.layers = vec![attn];
    r.logits.norm = norm_with(NormName::kind("dyt"), |t| t.alpha = expr(DYT_OTHER_ALPHA));
    r
}

/// DyT in its plain form: every norm of pre-norm replaced by `γ tanh(α x) + β` with α₀ = 0.5
/// everywhere (the DyT repository's default) and no embedding scale. At `compare`'s scale it
/// stalls at the unigram loss: the residual stream outgrows tanh's range (docs/recipes.md).
pub fn dyt_plain() -> RecipeSpec {
    let mut r = blank(
        "dyt-plain",
        "DyT, plain: X = X + F(DyT(X)), DyT(x) = γ·tanh(αx) + β, α₀ = 0.5 everywhere; final DyT; no embedding \
            scale (DyT repository default; the BHyT paper)",
    );
    r.placement.sublayer.input = Some(norm_with(NormName::kind("dyt"), |t| t.alpha = Some(Scale::Number(0.5))));
    r.logits.norm = norm_with(NormName::kind("dyt"), |t| t.alpha = Some(Scale::Number(0.5)));
    r
}

fn bhyt_family(name: &str, kind: NormName, about: &str) -> RecipeSpec {
    let mut r = blank(name, about);
    r.placement.sublayer.input = Some(norm_with(kind, |t| t.lambda = Some(1.0)));
    let mut attn = layers("1..=L", Which::Attn);
    attn.input = Some(norm_with(kind, |t| t.lambda = Some(2.0)));
    r.placement.layers = vec![attn];
    r.logits.norm = norm_with(kind, |t| t.lambda = Some(1.0));
    r
}

/// BHyT* (the BHyT paper's eq. 1): pre-norm with `γ tanh(λ x / (κ s_x + |μ_x|))`, exact statistics in
/// every norm; λ₀ = 2.0 before attention, 1.0 before the FFN (C.3) and 1.0 for the final norm
/// (our choice: the paper gives no final-norm λ).
pub fn bhyt_star() -> RecipeSpec {
    bhyt_family(
        "bhyt-star",
        NormName::kind("bhyt-star"),
        "BHyT*: X = X + F(γ·tanh(λx/(κ s_x + |μ_x|))), κ = 10, λ₀ = 2 (attn) / 1 (FFN, final) (the BHyT paper's eq. 1)",
    )
}

/// BHyT (the BHyT paper's Algorithm 1): the attention-input norm computes `s_x² = mean(x²)` exactly,
/// the FFN-input norm uses `ŝ² = s_x² + ‖W_V W_O‖²_F/(T d)·(λ_attn/κ)²`. Final norm: exact
/// second moment, λ₀ = 1.0 (our choice).
pub fn bhyt() -> RecipeSpec {
    bhyt_family(
        "bhyt",
        NormName::kind("bhyt"),
        "BHyT: BHyT* with one exact statistic per block and the Theorem 3.5 variance approximation before the FFN \
            (the BHyT paper's Alg. 1)",
    )
}

/// RMSNorm-Approx (the BHyT paper's Table 5): pre-norm RMSNorm computing one statistic per block, as
/// BHyT does: the attention-input RMSNorm measures `s_x² = mean(x²)`, the FFN-input RMSNorm
/// divides by `√(ŝ² + ε)` with `ŝ² = s_x² + ‖W_V W_O‖²_F/(T d)` (Theorem 3.5 with the
/// normalised input's unit variance in place of (λ/κ)²); final RMSNorm.
pub fn rmsnorm_approx() -> RecipeSpec {
    let mut r = blank(
        "rmsnorm-approx",
        "RMSNorm-Approx: X = X + F(RMS(X)), the FFN-input RMSNorm divides by √(ŝ² + ε) with ŝ² = s_x² + \
            ‖W_V W_O‖²_F/(T d), the block input's statistic plus Theorem 3.5's attention term; final RMSNorm (the BHyT \
            paper's Table 5)",
    );
    r.placement.norm = BaseNorm::Rmsnorm;
    r.placement.sublayer.input = Some(NormSpec::Kind(NormName::kind("rmsnorm-approx")));
    r.logits.norm = NormSpec::Kind(NormName::LN);
    r
}

/// Derf as its authors train GPT-2 (the Derf repository's nanoGPT patch): pre-norm with every
/// norm replaced by `γ·erf(αx + s) + β`, α₀ = 1.0 in every slot (its `attn_`, `ffn_` and
/// `dec_alpha_init_value`), s₀ = 0, and a learnable scalar on the embeddings initialised to √d
/// (its `shared_scale`).
pub fn derf() -> RecipeSpec {
    let mut r = blank(
        "derf",
        "Derf: X = X + F(Derf(X)), Derf(x) = γ·erf(αx + s) + β, α₀ = 1, s₀ = 0; final Derf; embeddings × learnable \
            e₀ = √d (Chen et al. 2025, Stronger Normalization-Free Transformers)",
    );
    let slot =
        || NormSpec::Table(NormTable { alpha: Some(Scale::Number(1.0)), ..NormTable::of(NormName::kind("derf")) });
    r.embedding.scale = Some(Scale::expr("sqrt(d)"));
    r.placement.sublayer.input = Some(slot());
    r.logits.norm = slot();
    r
}

/// Qwen3-Next's zero-centred, weight-decayed RMSNorm in every RMSNorm slot of pre-norm:
/// `(1 + γ) ⊙ x/RMS(x)`, γ₀ = 0, γ in the weight-decay group, so decay pulls the gain towards
/// 1 instead of leaving it free (Qwen's remedy for norm weights that grew abnormally large).
pub fn zc_rms() -> RecipeSpec {
    let mut r = super::placement::pre_rms();
    r.name = "zc-rms".into();
    r.about = "RMSNorm pre-norm with zero-centred, weight-decayed gains: (1 + γ)·RMS(x), γ₀ = 0, γ decayed towards \
        0 (Qwen3-Next)"
        .into();
    r.placement.sublayer.input = Some(NormSpec::Kind(NormName::kind("zc-rms")));
    r.logits.norm = NormSpec::Kind(NormName::kind("zc-rms"));
    r
}

/// SeeDNorm (Cai et al., 2025, "SeeDNorm: Self-Rescaled Dynamic Normalization") in place of
/// every RMSNorm of Llama's pre-norm, `[tanh(x·βᵀ)·α + γ] ⊙ x/RMS(x)`, γ₀ = 1 and α₀ = 1,
/// β₀ = 0: RMSNorm at initialisation (the paper's own initial α, β are not in a source normlab
/// reads; these are normlab's, and `alpha`/`beta` in the slot change them).
pub fn seednorm() -> RecipeSpec {
    let mut r = blank(
        "seednorm",
        "SeeDNorm: X = X + F(SeeD(X)), SeeD(x) = [tanh(x·βᵀ)·α + γ] ⊙ x/RMS(x), γ₀ = α₀ = 1, β₀ = 0; final SeeDNorm \
            (Cai et al. 2025)",
    );
    r.placement.sublayer.input = Some(norm(NormName::kind("seednorm")));
    r.logits.norm = norm(NormName::kind("seednorm"));
    r
}

/// TaperNorm (Kanavalau, Amo Alonso & Lall, 2026, "Gated Normalization Removal and Scale
/// Anchoring in Pre-Norm Transformers") in every sublayer input norm of RMSNorm pre-norm:
/// `g·γ⊙x/RMS(x) + (1 − g)·c·γ̃⊙x`, one gate held at 1 through the LR warm-up, then a
/// half-cosine to 0 at half of training; the final RMSNorm stays (the paper's scale anchor).
pub fn tapernorm() -> RecipeSpec {
    let mut r = super::placement::pre_rms();
    r.name = "tapernorm".into();
    r.about = "TaperNorm: pre-norm whose input RMSNorms taper into fixed scalings c·γ̃ ⊙ x, gate 1 through the LR \
        warm-up then cosine to 0 at ½ of the run; final RMSNorm kept (Kanavalau et al., 2026)"
        .into();
    r.placement.sublayer.input = Some(NormSpec::Kind(NormName::kind("tapernorm")));
    r.placement.taper = Some(crate::recipe::spec::TaperSpec::default());
    r
}
