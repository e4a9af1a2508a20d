//! Presets that differ in where the norms go (and which base norm): post-, pre- and Peri-LN
//! and their RMSNorm forms, GPT-2's, LayerNorm-Scaling, Mix-LN, KEEL, KiteNorm and its
//! ablations (KiteNorm Table 2, Appendix D.2, the exact spec for the baselines it lists; the
//! Peri-LN and BHyT papers for theirs), OLMo 2, Sandwich-LN, LayerNorm-1p and HybridNorm.
//!
//! Notation (see [`crate::recipe::spec`]): `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))`,
//! `k` the 1-based Transformer layer, `L` the number of Transformer layers. `LN` is the
//! recipe's base norm (LayerNorm unless `norm = "rmsnorm"`).

use super::parts::{blank, expr, layers, ln, norm, norm_with, rms_form};
use crate::recipe::spec::{BaseNorm, NormName, NormSpec, QkNorm, RecipeSpec, SublayerSpec, VNorm, Which};

/// Post-norm (Vaswani et al.): `X_{l+1} = LN(X_l + F_l(X_l))`, no final norm (Table 2).
pub fn post() -> RecipeSpec {
    let mut r = blank("post", "post-norm, X = LN(X + F(X)); no final norm (KiteNorm Table 2)");
    r.placement.sublayer.outer = ln();
    r
}

/// Unscaled pre-norm: `X_{l+1} = X_l + F_l(LN(X_l))`, final LN (KiteNorm E.1).
pub fn pre() -> RecipeSpec {
    let mut r = blank("pre", "pre-norm, X = X + F(LN(X)); final LN; no init scaling (KiteNorm E.1)");
    r.placement.sublayer.input = ln();
    r.logits.norm = NormSpec::Kind(NormName::LN);
    r
}

/// RMSNorm pre-norm (Llama): `X_{l+1} = X_l + F_l(RMS(X_l))`, final RMSNorm; the RMSNorm
/// baseline of the BHyT paper and the Pre-LN of the Peri-LN paper.
pub fn pre_rms() -> RecipeSpec {
    rms_form(
        pre(),
        "pre-rms",
        "RMSNorm pre-norm (Llama): X = X + F(RMS(X)); final RMSNorm (the BHyT paper's RMSNorm baseline; the Peri-LN \
            paper's Pre-LN)",
    )
}

/// GPT-2 pre-norm: pre-norm with `W_O`, `W_2` × 1/√(2L) at init (Table 2).
pub fn gpt2_pre() -> RecipeSpec {
    let mut r = pre();
    r.name = "gpt2-pre".into();
    r.about =
        "GPT-2 pre-norm: pre-norm, final LN, attention/FFN output projections × 1/√(2L) at init (KiteNorm Table 2)"
            .into();
    r.placement.sublayer.init_out = expr("1/sqrt(2*L)");
    r
}

/// LayerNorm-Scaling: pre-norm whose LN output in layer `k` is × k^{-1/2}; final LN unscaled.
pub fn lns() -> RecipeSpec {
    let mut r = pre();
    r.name = "lns".into();
    r.about = "LayerNorm-Scaling: X = X + F(k^-1/2 · LN(X)); final LN unscaled (KiteNorm Table 2)".into();
    r.placement.sublayer.input_scale = expr("k^-0.5");
    r
}

/// LayerNorm-Scaling in RMSNorm form: `X_{l+1} = X_l + F_l(k^{-1/2}·RMS(X_l))`, final RMSNorm
/// unscaled (the BHyT paper's LNS baseline on Llama-3.2).
pub fn lns_rms() -> RecipeSpec {
    rms_form(
        lns(),
        "lns-rms",
        "LayerNorm-Scaling with RMSNorm: X = X + F(k^-1/2 · RMS(X)); final RMSNorm (the BHyT paper's LNS baseline)",
    )
}

/// Peri-LN (the Peri-LN paper): `X_{l+1} = X_l + LN(F_l(LN(X_l)))`, with embedding and final norms.
/// KiteNorm Table 2's peri-norm has neither: [`peri_norm`]. The Peri-LN paper's §4.4.1's frozen output
/// gain: `sublayer.output = { kind = "ln", gain = false }`.
pub fn peri() -> RecipeSpec {
    let mut r = blank("peri", "Peri-LN: X = X + LN(F(LN(X))); embedding LN and final LN (the Peri-LN paper)");
    r.placement.sublayer.input = ln();
    r.placement.sublayer.output = ln();
    r.embedding.norm = NormSpec::Kind(NormName::LN);
    r.logits.norm = NormSpec::Kind(NormName::LN);
    r
}

/// Peri-LN as its paper trains it, with RMSNorm: `X_{l+1} = X_l + RMS(F_l(RMS(X_l)))`,
/// embedding and final RMSNorm (the Peri-LN paper §3, "primarily RMSNorm"; the BHyT paper's
/// Peri-LN baseline).
pub fn peri_rms() -> RecipeSpec {
    rms_form(
        peri(),
        "peri-rms",
        "Peri-LN with RMSNorm: X = X + RMS(F(RMS(X))); embedding and final RMSNorm (the Peri-LN paper; the BHyT \
            paper's Peri-LN baseline)",
    )
}

/// Peri-norm as KiteNorm Table 2 implements it: `X_{l+1} = X_l + LN(F_l(LN(X_l)))` with no
/// embedding LN and no final output LN; LayerNorm with shift, skip and residual scales 1, no
/// init scaling.
pub fn peri_norm() -> RecipeSpec {
    let mut r = peri();
    r.name = "peri-norm".into();
    r.about = "peri-norm: X = X + LN(F(LN(X))); no embedding LN, no final LN (KiteNorm Table 2)".into();
    r.embedding.norm = NormSpec::none();
    r.logits.norm = NormSpec::none();
    r
}

/// Mix-norm: the first ⌊0.25 L⌋ layers post-norm, the rest pre-norm with `W_O`, `W_2` ×
/// 1/√(2 L_pre) at init; final LN (Table 2, E.3).
pub fn mix() -> RecipeSpec {
    let mut r = blank(
        "mix",
        "Mix-LN: first ⌊0.25L⌋ layers post-norm, the rest pre-norm × 1/√(2L_pre) at init; final LN (KiteNorm Table 2)",
    );
    r.placement.params.insert("mix_ratio".into(), 0.25);
    let mut post = layers("1..=floor(mix_ratio*L)", Which::Both);
    post.outer = ln();
    let mut pre = layers("floor(mix_ratio*L)+1..=L", Which::Both);
    pre.input = ln();
    pre.init_out = expr("1/sqrt(2*(L-floor(mix_ratio*L)))");
    r.placement.layers = vec![post, pre];
    r.logits.norm = NormSpec::Kind(NormName::LN);
    r
}

/// KEEL: double norm `X_{l+1} = LN(a_l X_l + F_l(LN(X_l)))`, LN without shift, `a = 1` in
/// layer 1 and `2L` after; the outer LN after the first attention sublayer is omitted.
pub fn keel() -> RecipeSpec {
    let mut r = blank(
        "keel",
        "KEEL: X = LN(a·X + F(LN(X))), a = 1 in layer 1 and 2L after, no outer LN after sublayer 1, LN without shift \
            (KiteNorm Table 2)",
    );
    let ln0 = || Some(norm_with(NormName::LN, |t| t.shift = Some(false)));
    r.placement.sublayer.input = ln0();
    r.placement.sublayer.outer = ln0();
    r.placement.sublayer.skip = expr("2*L");
    let mut first = layers("1", Which::Both);
    first.skip = expr("1");
    let mut first_attn = layers("1", Which::Attn);
    first_attn.outer = Some(NormSpec::none());
    r.placement.layers = vec![first, first_attn];
    r
}

/// KiteNorm: scalarised double norm `X_{l+1} = sLN(X_l + 1/(2L) · F_l(sLN(X_l)))`, no final
/// norm, variance regulariser λ = 1 (Table 2, eq. 24).
pub fn kitenorm() -> RecipeSpec {
    let mut r = blank(
        "kitenorm",
        "KiteNorm: X = sLN(X + 1/(2L)·F(sLN(X))), scalar γ′, β′; no final norm; variance regulariser λ = 1 (KiteNorm \
            Table 2)",
    );
    r.placement.sublayer.input = Some(NormSpec::Kind(NormName::kind("scalar-ln")));
    r.placement.sublayer.outer = Some(NormSpec::Kind(NormName::kind("scalar-ln")));
    r.placement.sublayer.residual = expr("1/(2*L)");
    r.logits.regularizer = 1.0;
    r
}

/// KiteNorm ablation: no inner norm, i.e. residually scaled post-norm with scalarised LN.
pub fn kitenorm_no_inner() -> RecipeSpec {
    let mut r = kitenorm();
    r.name = "kitenorm-no-inner".into();
    r.about = "KiteNorm without the inner norm: X = sLN(X + 1/(2L)·F(X)) (KiteNorm §4.3)".into();
    r.placement.sublayer.input = None;
    r
}

/// KiteNorm ablation: standard (vector) LayerNorm in place of scalarised LayerNorm.
pub fn kitenorm_vector_ln() -> RecipeSpec {
    let mut r = kitenorm();
    r.name = "kitenorm-vector-ln".into();
    r.about = "KiteNorm with vector LayerNorm: X = LN(X + 1/(2L)·F(LN(X))) (KiteNorm §4.3)".into();
    r.placement.sublayer.input = ln();
    r.placement.sublayer.outer = ln();
    r
}

/// KiteNorm ablation: no variance regulariser.
pub fn kitenorm_no_reg() -> RecipeSpec {
    let mut r = kitenorm();
    r.name = "kitenorm-no-reg".into();
    r.about = "KiteNorm without the variance regulariser (λ = 0) (KiteNorm §4.3)".into();
    r.logits.regularizer = 0.0;
    r
}

/// OLMo 2: norm on sublayer outputs only, `X_{l+1} = X_l + RMS(F_l(X_l))`, QK-norm over the
/// full width (before the head split, as OLMo 2 does), final RMSNorm.
pub fn olmo2() -> RecipeSpec {
    let mut r = blank(
        "olmo2",
        "OLMo 2: X = X + RMS(F(X)) with full-width QK-norm; final RMSNorm (OLMo 2; the Peri-LN paper's App. G)",
    );
    r.placement.norm = BaseNorm::Rmsnorm;
    r.placement.sublayer.output = ln();
    r.attention.qk_norm = QkNorm::Full;
    r.logits.norm = NormSpec::Kind(NormName::LN);
    r
}

/// Sandwich-LN: LN before and after every module, `X_{l+1} = X_l + LN(F_l(LN(X_l)))` — the
/// placement of CogView's Sandwich-LN and Gemma 2's pre- and post-norms, which the Peri-LN
/// paper names Peri-LN; the same recipe as `peri` under the name the field also uses.
pub fn sandwich() -> RecipeSpec {
    let mut r = peri();
    r.name = "sandwich".into();
    r.about = "Sandwich-LN: X = X + LN(F(LN(X))), final LN, no embedding norm — CogView's Sandwich-LN and Gemma \
        2's pre+post norms (Peri-LN is this placement with an embedding norm)"
        .into();
    r.embedding.norm = NormSpec::none();
    r
}

/// Gemma 3 (transformers' `Gemma3DecoderLayer`): RMSNorm before and after each module
/// (`input_layernorm`/`post_attention_layernorm`, `pre_feedforward_layernorm`/
/// `post_feedforward_layernorm`), per-head QK-norm, final RMSNorm, embeddings × √d (a constant,
/// Gemma's normalizer), no soft-caps. Gemma stores each gain as `1 + w`, `w₀ = 0`; under AdamW
/// without decay on vectors that trains exactly as `γ`, `γ₀ = 1`, which is what normlab stores
/// (the export writes `w = γ − 1`).
pub fn gemma3() -> RecipeSpec {
    let mut r = sandwich();
    r.name = "gemma3".into();
    r.about = "Gemma 3: X = X + RMS(F(RMS(X))), q, k RMS-normed per head, final RMSNorm, embeddings × √d, no \
        soft-caps"
        .into();
    r.placement.norm = BaseNorm::Rmsnorm;
    r.attention.qk_norm = QkNorm::Head;
    r.embedding.multiplier = expr("sqrt(d)");
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
    r.placement.sublayer.input = Some(norm(NormName::kind("layernorm-1p")));
    r.logits.norm = norm(NormName::kind("layernorm-1p"));
    r
}

/// HybridNorm (Zhuo et al., 2025), as the authors' OLMo code sets it: QKV-norm (RMSNorm of
/// queries, keys and values per head, over d/H after the head split with one gain shared by
/// the heads, q and k before RoPE) and no norm before attention; the FFN
/// normalises the attention sum and adds to the normalised stream,
/// `Y = X + Attn_QKV(X)`, `X' = RMS(Y) + FFN(RMS(Y))` — in sublayer form the attention
/// sublayer's outer norm followed by an un-normed FFN sublayer. Final RMSNorm.
pub fn hybridnorm() -> RecipeSpec {
    let mut r = blank(
        "hybridnorm",
        "HybridNorm: Y = X + Attn(X) with q, k, v RMS-normed per head; X' = RMS(Y) + FFN(RMS(Y)); final RMSNorm \
            (Zhuo et al. 2025)",
    );
    r.placement.norm = BaseNorm::Rmsnorm;
    r.attention.qk_norm = QkNorm::Head;
    r.attention.v_norm = VNorm::Head;
    let mut attn = SublayerSpec { range: Some("1..=L".into()), sublayers: Some(Which::Attn), ..Default::default() };
    attn.outer = Some(norm(NormName::LN));
    r.placement.layers = vec![attn];
    r.logits.norm = norm(NormName::LN);
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
    r.placement.layers[0].range = Some("2..=L".into());
    let first = SublayerSpec { range: Some("1".into()), input: Some(norm(NormName::LN)), ..Default::default() };
    r.placement.layers.push(first);
    r
}
