//! Presets that scale, gate or reshape the residual update itself: DeepNorm, ReZero, SkipInit,
//! LayerScale, x0 mixing, Admin's rescaled skip (closed form and profiled), nGPT's step on the
//! hypersphere, DeepScaleLM, the residual states (Hyper-Connections, mHC, Attention Residuals), GPAS
//! and CompleteP. Notation as in [`super::placement`]; `g` a learnable residual
//! gate (see [`crate::recipe::spec::GateOn`]).

use super::parts::{blank, expr, gate, ln, weightless_rms};
use super::placement::{post, pre};
use crate::recipe::spec::{AttnResSpec, CompletePSpec, HcSpec, InitSpec, MhcLiteSpec, MhcSpec, ResidualSpec, SumSpec};
use crate::recipe::spec::{
    BaseNorm, GateOn, GateOwner, GateShape, GateSpec, HypersphereSpec, MomentControlSpec, NormName, NormSpec,
    RecipeSpec, Scale, X0Mix,
};

/// DeepNorm (DeepNet, decoder-only): `X_{l+1} = LN(α X_l + F_l(X_l))`, α = (2L)^{1/4};
/// `W_V`, `W_O`, `W_1`, `W_2`, `W_3` × β = (8L)^{−1/4} at init.
pub fn deepnorm() -> RecipeSpec {
    let mut r = blank(
        "deepnorm",
        "DeepNorm: X = LN((2L)^¼·X + F(X)); W_V, W_O and FFN weights × (8L)^-¼ at init (Wang et al. 2024)",
    );
    r.placement.sublayer.outer = ln();
    r.placement.sublayer.skip = expr("(2*L)^0.25");
    r.placement.sublayer.init_in = expr("(8*L)^-0.25");
    r.placement.sublayer.init_out = expr("(8*L)^-0.25");
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
    r.placement.sublayer.gate = gate(GateShape::Scalar, Scale::Number(0.0), GateOwner::Layer);
    r
}

/// SkipInit (De & Smith, 2020): no norm, a learnable scalar at the end of every residual
/// branch, `X_{l+1} = X_l + α_l·F_l(X_l)`, α₀ = 0.
pub fn skipinit() -> RecipeSpec {
    let mut r =
        blank("skipinit", "SkipInit: X = X + α·F(X), no norms, one learnable α per sublayer, α₀ = 0 (De & Smith 2020)");
    r.placement.sublayer.gate = gate(GateShape::Scalar, Scale::Number(0.0), GateOwner::Sublayer);
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
    r.placement.sublayer.gate = gate(GateShape::Channel, Scale::expr(LAYERSCALE_INIT), GateOwner::Sublayer);
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
    r.placement.norm = BaseNorm::Rmsnorm;
    r.embedding.norm = weightless_rms();
    r.placement.sublayer.input = Some(weightless_rms());
    r.logits.norm = weightless_rms();
    r.residual = ResidualSpec::Sum(SumSpec { x0_mix: Some(X0Mix { residual: 1.0, x0: 0.0 }), gpas: false });
    r
}

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
    r.placement.sublayer.gate =
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
    if let Some(g) = &mut r.placement.sublayer.gate {
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
    let l2 = || Some(NormSpec::Kind(NormName::kind("l2")));
    r.placement.sublayer.output = l2();
    r.placement.sublayer.outer = l2();
    r.placement.sublayer.gate = Some(GateSpec {
        shape: GateShape::Channel,
        init: Scale::Number(0.05),
        per: GateOwner::Sublayer,
        on: GateOn::Interpolate,
        scale: Some(Scale::expr("1/sqrt(d)")),
        profile: false,
    });
    r.residual = ResidualSpec::Hypersphere(HypersphereSpec::default());
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
    r.placement.params.insert("k_beta".into(), 1.0);
    r.placement.sublayer.skip = Some(Scale::expr("sqrt(1 - k_beta/L)"));
    r.placement.sublayer.residual = Some(Scale::expr("sqrt(k_beta/L)"));
    r.init = InitSpec::MomentControl(MomentControlSpec::default());
    r
}

/// `pre-rms` on `n = 4` residual streams with the given mixing.
fn on_streams(name: &str, about: &str, mixing: ResidualSpec) -> RecipeSpec {
    let mut r = super::placement::pre_rms();
    r.name = name.into();
    r.about = about.into();
    r.residual = mixing;
    r
}

/// Hyper-Connections (Zhu et al., ICLR 2025), dynamic (DHC, tanh), expansion rate 4, as the
/// `hyper-connections` package: RMSNorm pre-norm whose residual is 4 streams, each sublayer
/// reading `Σ_s A_m[s]·H[s]` and writing `H ← A_rᵀH + B ⊙ F(·)`, initialised as pre-norm.
pub fn hc() -> RecipeSpec {
    on_streams(
        "hc",
        "Hyper-Connections: 4 residual streams, read A_mᵀH, write A_rᵀH + B·F, static + tanh dynamic, initialised as \
            pre-norm (Zhu et al., ICLR 2025)",
        ResidualSpec::Hc(HcSpec { n: 4, dynamic: true }),
    )
}

/// mHC (DeepSeek, "mHC: Manifold-Constrained Hyper-Connections"), as DeepSeek V4 in
/// transformers: 4 streams, read `σ(·)`, write `2σ(·)`, residual mixing projected onto the
/// doubly stochastic matrices by 20 Sinkhorn–Knopp iterations, a learned collapse at the end.
pub fn mhc() -> RecipeSpec {
    on_streams(
        "mhc",
        "mHC: Hyper-Connections whose residual mixing is doubly stochastic (Sinkhorn-Knopp, 20 iterations), read σ, \
            write 2σ (DeepSeek, 2025; DeepSeek V4)",
        ResidualSpec::Mhc(MhcSpec { n: 4, sinkhorn_iters: 20 }),
    )
}

/// mHC-lite (Yang & Gao, 2026): mHC whose residual mixing is a softmax-weighted mixture of the
/// 24 permutation matrices of 4 streams, doubly stochastic exactly.
pub fn mhc_lite() -> RecipeSpec {
    on_streams(
        "mhc-lite",
        "mHC-lite: mHC whose residual mixing is a convex combination of the n! permutation matrices, exactly doubly \
            stochastic without Sinkhorn (Yang & Gao, 2026)",
        ResidualSpec::MhcLite(MhcLiteSpec { n: 4 }),
    )
}

/// Full Attention Residuals (Kimi Team, "Attention Residuals", 2026) on RMSNorm pre-norm: each
/// sublayer reads a softmax mixture of the embedding and every earlier sublayer's output,
/// weighted by its learned pseudo-query (zero at init: their mean) against the RMS-normalised
/// outputs; the output reads them all the same way.
pub fn attnres() -> RecipeSpec {
    let mut r = super::placement::pre_rms();
    r.name = "attnres".into();
    r.about =
        "Attention Residuals (full): each sublayer reads softmax(w_lᵀ RMS(v_i))-weighted earlier sublayer outputs \
        instead of their sum, w_l = 0 at init (Kimi Team, 2026)"
            .into();
    r.residual = ResidualSpec::AttnRes(AttnResSpec { blocks: None });
    r
}

/// Block Attention Residuals with the paper's N = 8 blocks: sums within a block, attention over
/// the embedding and the blocks' sums.
pub fn attnres_block() -> RecipeSpec {
    let mut r = attnres();
    r.name = "attnres-block".into();
    r.about =
        "Block Attention Residuals: the sublayers in N = 8 blocks, summed within a block, attended across blocks \
        (Kimi Team, 2026)"
            .into();
    r.residual = ResidualSpec::AttnRes(AttnResSpec { blocks: Some(8) });
    r
}

/// GPAS (Chen et al., 2025, "GPAS: Accelerating Convergence of LLM Pretraining via
/// Gradient-Preserving Activation Scaling") on RMSNorm pre-norm, the authors' `pre_gpas`: after
/// each residual addition `X ← X − SiLU(α_k)·sg(X)`, one `α_k` per layer, 0 at init.
pub fn gpas() -> RecipeSpec {
    let mut r = super::placement::pre_rms();
    r.name = "gpas".into();
    r.about = "GPAS: X = X + F(RMS(X)), then X ← X − SiLU(α_k)·sg(X) (forward-only scaling, gradient unchanged), \
        α_k per layer, 0 at init (Chen et al., 2025)"
        .into();
    r.residual = ResidualSpec::Sum(SumSpec { x0_mix: None, gpas: true });
    r
}

/// The base depth of the `completep` preset: the shallowest model of the CompleteP paper's
/// depth sweeps (2 to 128 layers), where its learning rate is tuned.
pub const COMPLETEP_BASE_LAYERS: usize = 2;

/// CompleteP (Dey et al., NeurIPS 2025, "Don't be lazy: CompleteP enables compute-efficient deep
/// transformers"), α = 1, on RMSNorm pre-norm: every branch × L_base/L, AdamW's ε inside the
/// layers × L_base/L, everything else as at the base depth.
pub fn completep() -> RecipeSpec {
    let mut r = super::placement::pre_rms();
    r.name = "completep".into();
    r.about = "CompleteP (α = 1): X = X + (L_base/L)·F(RMS(X)), AdamW ε × L_base/L inside the layers, L_base = 2; \
        LR, init and decay as tuned at L_base (Dey et al., NeurIPS 2025)"
        .into();
    r.init = InitSpec::Completep(CompletePSpec { base_layers: COMPLETEP_BASE_LAYERS });
    r
}
