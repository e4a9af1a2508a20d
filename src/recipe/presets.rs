//! Every named recipe, as data. KiteNorm Table 2 (Appendix D.2) is the exact spec for the
//! baselines it lists; the Peri-LN paper and the BHyT paper (DyT, BHyT) for theirs.
//!
//! Notation (see [`super::spec`]): `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))`,
//! `k` the 1-based Transformer layer, `L` the number of Transformer layers. `LN` is the
//! recipe's base norm (LayerNorm unless `norm = "rmsnorm"`).

use super::spec::{BaseNorm, NormName, NormSpec, NormTable, QkNorm, RecipeSpec, Scale, SublayerSpec, Which};
use std::collections::BTreeMap;

/// A recipe with no norms and every scale 1: the start of every preset and of a config-file
/// recipe written from scratch.
pub fn blank(name: &str, about: &str) -> RecipeSpec {
    RecipeSpec {
        name: name.into(),
        about: about.into(),
        norm: BaseNorm::Layernorm,
        embedding_scale: None,
        embedding_norm: NormSpec::none(),
        final_norm: NormSpec::none(),
        qk_norm: QkNorm::None,
        v_norm: QkNorm::None,
        attn_softcap: None,
        final_softcap: None,
        x0_mix: None,
        qk_clip: None,
        hypersphere: None,
        moment_control: None,
        regularizer: 0.0,
        params: BTreeMap::new(),
        sublayer: SublayerSpec::default(),
        layers: Vec::new(),
        notes: Vec::new(),
    }
}

fn ln() -> Option<NormSpec> {
    Some(NormSpec::Kind(NormName::Ln))
}

fn norm_with(kind: NormName, f: impl FnOnce(&mut NormTable)) -> NormSpec {
    let mut t = NormTable::of(kind);
    f(&mut t);
    NormSpec::Table(t)
}

fn expr(s: &str) -> Option<Scale> {
    Some(Scale::expr(s))
}

fn layers(range: &str, which: Which) -> SublayerSpec {
    SublayerSpec { range: Some(range.into()), sublayers: Some(which), ..Default::default() }
}

/// Post-norm (Vaswani et al.): `X_{l+1} = LN(X_l + F_l(X_l))`, no final norm (Table 2).
pub fn post() -> RecipeSpec {
    let mut r = blank("post", "post-norm, X = LN(X + F(X)); no final norm (KiteNorm Table 2)");
    r.sublayer.outer = ln();
    r
}

/// Unscaled pre-norm: `X_{l+1} = X_l + F_l(LN(X_l))`, final LN (KiteNorm E.1).
pub fn pre() -> RecipeSpec {
    let mut r = blank("pre", "pre-norm, X = X + F(LN(X)); final LN; no init scaling (KiteNorm E.1)");
    r.sublayer.input = ln();
    r.final_norm = NormSpec::Kind(NormName::Ln);
    r
}

/// `recipe` with RMSNorm as its base norm, renamed: the form the Peri-LN paper ("primarily
/// RMSNorm") and the BHyT paper (Llama-3.2's RMSNorm, §4.1 and C.3) train their baselines in.
fn rms_form(mut r: RecipeSpec, name: &str, about: &str) -> RecipeSpec {
    r.name = name.into();
    r.about = about.into();
    r.norm = BaseNorm::Rmsnorm;
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
    r.sublayer.init_out = expr("1/sqrt(2*L)");
    r
}

/// LayerNorm-Scaling: pre-norm whose LN output in layer `k` is × k^{-1/2}; final LN unscaled.
pub fn lns() -> RecipeSpec {
    let mut r = pre();
    r.name = "lns".into();
    r.about = "LayerNorm-Scaling: X = X + F(k^-1/2 · LN(X)); final LN unscaled (KiteNorm Table 2)".into();
    r.sublayer.input_scale = expr("k^-0.5");
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
    r.sublayer.input = ln();
    r.sublayer.output = ln();
    r.embedding_norm = NormSpec::Kind(NormName::Ln);
    r.final_norm = NormSpec::Kind(NormName::Ln);
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
    r.embedding_norm = NormSpec::none();
    r.final_norm = NormSpec::none();
    r
}

/// Mix-norm: the first ⌊0.25 L⌋ layers post-norm, the rest pre-norm with `W_O`, `W_2` ×
/// 1/√(2 L_pre) at init; final LN (Table 2, E.3).
pub fn mix() -> RecipeSpec {
    let mut r = blank(
        "mix",
        "Mix-LN: first ⌊0.25L⌋ layers post-norm, the rest pre-norm × 1/√(2L_pre) at init; final LN (KiteNorm Table 2)",
    );
    r.params.insert("mix_ratio".into(), 0.25);
    let mut post = layers("1..=floor(mix_ratio*L)", Which::Both);
    post.outer = ln();
    let mut pre = layers("floor(mix_ratio*L)+1..=L", Which::Both);
    pre.input = ln();
    pre.init_out = expr("1/sqrt(2*(L-floor(mix_ratio*L)))");
    r.layers = vec![post, pre];
    r.final_norm = NormSpec::Kind(NormName::Ln);
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
    let ln0 = || Some(norm_with(NormName::Ln, |t| t.shift = Some(false)));
    r.sublayer.input = ln0();
    r.sublayer.outer = ln0();
    r.sublayer.skip = expr("2*L");
    let mut first = layers("1", Which::Both);
    first.skip = expr("1");
    let mut first_attn = layers("1", Which::Attn);
    first_attn.outer = Some(NormSpec::none());
    r.layers = vec![first, first_attn];
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
    r.sublayer.input = Some(NormSpec::Kind(NormName::ScalarLn));
    r.sublayer.outer = Some(NormSpec::Kind(NormName::ScalarLn));
    r.sublayer.residual = expr("1/(2*L)");
    r.regularizer = 1.0;
    r.notes.push(
        "The outer norm's scalar shift β′ of every sublayer but the last cannot learn: it adds a constant along the \
            all-ones direction, which the next sublayer's inner and outer scalarised LayerNorms both remove by \
            mean-centring, so its gradient is exactly zero. In float32 that gradient is rounding noise, which Adam \
            normalises into updates of up to the learning rate: the parameter drifts, without effect on the output."
            .into(),
    );
    r
}

/// KiteNorm ablation: no inner norm, i.e. residually scaled post-norm with scalarised LN.
pub fn kitenorm_no_inner() -> RecipeSpec {
    let mut r = kitenorm();
    r.name = "kitenorm-no-inner".into();
    r.about = "KiteNorm without the inner norm: X = sLN(X + 1/(2L)·F(X)) (KiteNorm §4.3)".into();
    r.sublayer.input = None;
    r.notes.clear();
    r
}

/// KiteNorm ablation: standard (vector) LayerNorm in place of scalarised LayerNorm.
pub fn kitenorm_vector_ln() -> RecipeSpec {
    let mut r = kitenorm();
    r.name = "kitenorm-vector-ln".into();
    r.about = "KiteNorm with vector LayerNorm: X = LN(X + 1/(2L)·F(LN(X))) (KiteNorm §4.3)".into();
    r.sublayer.input = ln();
    r.sublayer.outer = ln();
    r.notes.clear();
    r
}

/// KiteNorm ablation: no variance regulariser.
pub fn kitenorm_no_reg() -> RecipeSpec {
    let mut r = kitenorm();
    r.name = "kitenorm-no-reg".into();
    r.about = "KiteNorm without the variance regulariser (λ = 0) (KiteNorm §4.3)".into();
    r.regularizer = 0.0;
    r
}

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
    r.embedding_scale = expr("sqrt(d)");
    r.sublayer.input = Some(norm_with(NormName::Dyt, |t| t.alpha = expr(DYT_OTHER_ALPHA)));
    let mut attn = layers("1..=L", Which::Attn);
    attn.input = Some(norm_with(NormName::Dyt, |t| t.alpha = expr(DYT_ATTN_ALPHA)));
    r.layers = vec![attn];
    r.final_norm = norm_with(NormName::Dyt, |t| t.alpha = expr(DYT_OTHER_ALPHA));
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
    r.sublayer.input = Some(norm_with(NormName::Dyt, |t| t.alpha = Some(Scale::Number(0.5))));
    r.final_norm = norm_with(NormName::Dyt, |t| t.alpha = Some(Scale::Number(0.5)));
    r
}

fn bhyt_family(name: &str, kind: NormName, about: &str) -> RecipeSpec {
    let mut r = blank(name, about);
    r.sublayer.input = Some(norm_with(kind, |t| t.lambda = Some(1.0)));
    let mut attn = layers("1..=L", Which::Attn);
    attn.input = Some(norm_with(kind, |t| t.lambda = Some(2.0)));
    r.layers = vec![attn];
    r.final_norm = norm_with(kind, |t| t.lambda = Some(1.0));
    r
}

/// BHyT* (the BHyT paper's eq. 1): pre-norm with `γ tanh(λ x / (κ s_x + |μ_x|))`, exact statistics in
/// every norm; λ₀ = 2.0 before attention, 1.0 before the FFN (C.3) and 1.0 for the final norm
/// (our choice: the paper gives no final-norm λ).
pub fn bhyt_star() -> RecipeSpec {
    bhyt_family(
        "bhyt-star",
        NormName::BhytStar,
        "BHyT*: X = X + F(γ·tanh(λx/(κ s_x + |μ_x|))), κ = 10, λ₀ = 2 (attn) / 1 (FFN, final) (the BHyT paper's eq. 1)",
    )
}

/// BHyT (the BHyT paper's Algorithm 1): the attention-input norm computes `s_x² = mean(x²)` exactly,
/// the FFN-input norm uses `ŝ² = s_x² + ‖W_V W_O‖²_F/(T d)·(λ_attn/κ)²`. Final norm: exact
/// second moment, λ₀ = 1.0 (our choice).
pub fn bhyt() -> RecipeSpec {
    bhyt_family(
        "bhyt",
        NormName::Bhyt,
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
    r.norm = BaseNorm::Rmsnorm;
    r.sublayer.input = Some(NormSpec::Kind(NormName::RmsnormApprox));
    r.final_norm = NormSpec::Kind(NormName::Ln);
    r
}

/// OLMo 2: norm on sublayer outputs only, `X_{l+1} = X_l + RMS(F_l(X_l))`, QK-norm over the
/// full width (before the head split, as OLMo 2 does), final RMSNorm.
pub fn olmo2() -> RecipeSpec {
    let mut r = blank(
        "olmo2",
        "OLMo 2: X = X + RMS(F(X)) with full-width QK-norm; final RMSNorm (OLMo 2; the Peri-LN paper's App. G)",
    );
    r.norm = BaseNorm::Rmsnorm;
    r.sublayer.output = ln();
    r.qk_norm = QkNorm::Full;
    r.final_norm = NormSpec::Kind(NormName::Ln);
    r
}

/// DeepNorm (DeepNet, decoder-only): `X_{l+1} = LN(α X_l + F_l(X_l))`, α = (2L)^{1/4};
/// `W_V`, `W_O`, `W_1`, `W_2`, `W_3` × β = (8L)^{−1/4} at init.
pub fn deepnorm() -> RecipeSpec {
    let mut r = blank(
        "deepnorm",
        "DeepNorm: X = LN((2L)^¼·X + F(X)); W_V, W_O and FFN weights × (8L)^-¼ at init (Wang et al. 2024)",
    );
    r.sublayer.outer = ln();
    r.sublayer.skip = expr("(2*L)^0.25");
    r.sublayer.init_in = expr("(8*L)^-0.25");
    r.sublayer.init_out = expr("(8*L)^-0.25");
    r
}
