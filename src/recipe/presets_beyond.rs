//! Presets beyond the seeds' papers: the schemes training stacks and recent papers use, each
//! with its source and formula. Notation as in [`super::presets`]; `g` is a learnable residual
//! gate (extension of the sublayer equation, see [`super::spec::SublayerSpec::gate`]).

use super::presets::{blank, peri, pre, pre_rms};
use super::spec::{
    BaseNorm, GateOn, GateOwner, GateShape, GateSpec, NormName, NormSpec, NormTable, QkClip, QkNorm, RecipeSpec, Scale,
    SublayerSpec, Which, X0Mix,
};

fn norm(kind: NormName) -> NormSpec {
    NormSpec::Kind(kind)
}

fn gate(shape: GateShape, init: Scale, per: GateOwner) -> Option<GateSpec> {
    Some(GateSpec { shape, init, per, on: GateOn::Branch, scale: None, profile: false })
}

fn weightless_rms() -> NormSpec {
    NormSpec::Table(NormTable { gain: Some(false), ..NormTable::of(NormName::Rmsnorm) })
}

/// Sandwich-LN: LN before and after every module, `X_{l+1} = X_l + LN(F_l(LN(X_l)))` — the
/// placement of CogView's Sandwich-LN and Gemma 2's pre- and post-norms, which the Peri-LN
/// paper names Peri-LN; the same recipe as `peri` under the name the field also uses.
pub fn sandwich() -> RecipeSpec {
    let mut r = peri();
    r.name = "sandwich".into();
    r.about =
        "Sandwich-LN: X = X + LN(F(LN(X))), embedding and final LN — CogView's Sandwich-LN and Gemma 2's pre+post \
        norms; the same recipe as peri (the Peri-LN paper's name for this placement)"
            .into();
    r
}

/// Megatron-LM's `apply_layernorm_1p`: pre-norm whose LayerNorms store their gain centred on
/// zero, `(1 + γ) ⊙ LN(x) + β`, γ₀ = 0.
pub fn pre_1p() -> RecipeSpec {
    let mut r = pre();
    r.name = "pre-1p".into();
    r.about = "pre-norm with LayerNorm-1p, (1 + γ)·LN(x) + β, γ₀ = 0 (Megatron-LM's apply_layernorm_1p): decay on γ \
        pulls the gain towards 1"
        .into();
    r.sublayer.input = Some(norm(NormName::Layernorm1p));
    r.final_norm = norm(NormName::Layernorm1p);
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
    let slot = || NormSpec::Table(NormTable { alpha: Some(Scale::Number(1.0)), ..NormTable::of(NormName::Derf) });
    r.embedding_scale = Some(Scale::expr("sqrt(d)"));
    r.sublayer.input = Some(slot());
    r.final_norm = slot();
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
    r.sublayer.input = Some(norm(NormName::Seednorm));
    r.final_norm = norm(NormName::Seednorm);
    r
}

/// ReZero (Bachlechner et al., 2020): no norm at all, `X_{l+1} = X_l + α_k·F_l(X_l)` with one
/// scalar α per Transformer layer shared by its attention and FFN (the authors'
/// `RZTXEncoderLayer.resweight`), α₀ = 0: every layer starts as the identity.
pub fn rezero() -> RecipeSpec {
    let mut r = blank(
        "rezero",
        "ReZero: X = X + α·F(X), no norms, one learnable α per layer (shared by attention and FFN), α₀ = 0 \
            (Bachlechner et al. 2020)",
    );
    r.sublayer.gate = gate(GateShape::Scalar, Scale::Number(0.0), GateOwner::Layer);
    r
}

/// SkipInit (De & Smith, 2020): no norm, a learnable scalar at the end of every residual
/// branch, `X_{l+1} = X_l + α_l·F_l(X_l)`, α₀ = 0.
pub fn skipinit() -> RecipeSpec {
    let mut r =
        blank("skipinit", "SkipInit: X = X + α·F(X), no norms, one learnable α per sublayer, α₀ = 0 (De & Smith 2020)");
    r.sublayer.gate = gate(GateShape::Scalar, Scale::Number(0.0), GateOwner::Sublayer);
    r
}

/// CaiT's LayerScale λ₀ by depth (Touvron et al., 2021, §2): 0.1 up to 18 blocks, 10⁻⁵ up to
/// 24, 10⁻⁶ beyond.
pub const LAYERSCALE_INIT: &str = "0.1*(L <= 18) + 1e-5*(L > 18)*(L <= 24) + 1e-6*(L > 24)";

/// LayerScale (CaiT, Touvron et al., 2021): pre-norm with a learnable per-channel scale on
/// every branch, `X_{l+1} = X_l + diag(λ_l)·F_l(LN(X_l))`, λ₀ by depth ([`LAYERSCALE_INIT`]).
pub fn layerscale() -> RecipeSpec {
    let mut r = pre();
    r.name = "layerscale".into();
    r.about =
        "LayerScale: X = X + diag(λ)·F(LN(X)), λ ∈ ℝ^d learnable per sublayer, λ₀ = 0.1 (L ≤ 18), 1e-5 (L ≤ 24), \
        1e-6 beyond; final LN (CaiT, Touvron et al. 2021)"
            .into();
    r.sublayer.gate = gate(GateShape::Channel, Scale::expr(LAYERSCALE_INIT), GateOwner::Sublayer);
    r
}

/// x0 mixing (modded-nanogpt's block `lambdas`, nanochat's `resid_lambdas` / `x0_lambdas`) on
/// nanochat's norms: `X_1 = RMS(Embed(x))`, before layer k `X ← λ_r,k·X + λ₀,k·X_1` (λ_r₀ = 1,
/// λ₀₀ = 0), pre-norm with weightless RMSNorm everywhere (`F.rms_norm` without a weight).
pub fn x0_mix() -> RecipeSpec {
    let mut r = blank(
        "x0-mix",
        "x0 mixing: X_1 = RMS(Embed(x)); before layer k, X ← λ_r·X + λ₀·X_1 (learnable, 1 and 0 at init); X = X + \
            F(RMS(X)); weightless RMSNorms (modded-nanogpt, nanochat)",
    );
    r.norm = BaseNorm::Rmsnorm;
    r.embedding_norm = weightless_rms();
    r.sublayer.input = Some(weightless_rms());
    r.final_norm = weightless_rms();
    r.x0_mix = Some(X0Mix { residual: 1.0, x0: 0.0 });
    r
}

/// HybridNorm (Zhuo et al., 2025), as its OLMo 2 configuration sets it: QKV-norm (RMSNorm of
/// queries, keys and values over their full width) and no norm before attention; the FFN
/// normalises the attention sum and adds to the normalised stream,
/// `Y = X + Attn_QKV(X)`, `X' = RMS(Y) + FFN(RMS(Y))` — in sublayer form the attention
/// sublayer's outer norm followed by an un-normed FFN sublayer. Final RMSNorm.
pub fn hybridnorm() -> RecipeSpec {
    let mut r = blank(
        "hybridnorm",
        "HybridNorm: Y = X + Attn(X) with RMS-normed q, k, v; X' = RMS(Y) + FFN(RMS(Y)); final RMSNorm (Zhuo et al. \
            2025)",
    );
    r.norm = BaseNorm::Rmsnorm;
    r.qk_norm = QkNorm::Full;
    r.v_norm = QkNorm::Full;
    let mut attn = SublayerSpec { range: Some("1..=L".into()), sublayers: Some(Which::Attn), ..Default::default() };
    attn.outer = Some(norm(NormName::Ln));
    r.layers = vec![attn];
    r.final_norm = norm(NormName::Ln);
    r
}

/// HybridNorm* (Zhuo et al., 2025): HybridNorm with the first block in pre-norm (its
/// `norm_pos_special_config` for block 0: `attn_norm = True`, `ffn_residual = False`):
/// `X_2 = Y + FFN(RMS(Y))`, `Y = X_1 + Attn_QKV(RMS(X_1))`.
pub fn hybridnorm_star() -> RecipeSpec {
    let mut r = hybridnorm();
    r.name = "hybridnorm-star".into();
    r.about =
        "HybridNorm*: HybridNorm with the first block pre-norm, X = X + F(RMS(X)) in both its sublayers (Zhuo et al. \
        2025)"
            .into();
    r.layers[0].range = Some("2..=L".into());
    let first = SublayerSpec { range: Some("1".into()), input: Some(norm(NormName::Ln)), ..Default::default() };
    r.layers.push(first);
    r
}

/// Gemma 2's soft-capping on RMSNorm pre-norm: attention logits `50·tanh(s/50)`, output logits
/// `30·tanh(ℓ/30)` (litgpt's defaults for Gemma 2).
pub fn softcap() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "softcap".into();
    r.about =
        "RMSNorm pre-norm with soft-capping: attention logits 50·tanh(s/50), output logits 30·tanh(ℓ/30) (Gemma 2)"
            .into();
    r.attn_softcap = Some(50.0);
    r.final_softcap = Some(30.0);
    r
}

/// Megatron-LM's `qk_l2_norm` (Llama 4's L2 QK-norm) on RMSNorm pre-norm: each head's query
/// and key scaled to unit L2 norm, no gain.
pub fn qk_l2() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "qk-l2".into();
    r.about = "RMSNorm pre-norm with QK L2-norm: q/‖q‖, k/‖k‖ per head, no gain, so |logit| ≤ 1/√h (Megatron-LM \
        qk_l2_norm, Llama 4)"
        .into();
    r.qk_norm = QkNorm::L2;
    r
}

/// QK-clip (MuonClip, Kimi K2) on RMSNorm pre-norm: after every optimizer step, each head
/// whose largest logit `S` in the step exceeded τ = 100 has `W_q` scaled by `(τ/S)^½` and
/// `W_k` by `(τ/S)^½`.
pub fn qk_clip() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "qk-clip".into();
    r.about =
        "RMSNorm pre-norm with QK-clip: after each step, a head whose max logit S exceeded τ = 100 gets W_q, W_k × \
        (τ/S)^½ (MuonClip, Kimi K2)"
            .into();
    r.qk_clip = Some(QkClip { tau: 100.0, alpha: 0.5 });
    r
}
