//! Human-readable sublayer equations, as `normlab recipes` prints them.

use super::attention::{AttnGate, QkNorm, VNorm};
use super::expr::Scale;
use super::init::InitSpec;
use super::residual::{ResidualSpec, SumSpec};
use super::resolve::{ResolvedRecipe, norm_kind};
use super::slot::NormSpec;
use super::spec::{GateOn, GateOwner, GateShape, GateSpec, RecipeSpec, SublayerSpec, TaperSpec, Which};
use super::streams::{self, AttnResSpec};
use super::sublayers::{Branch, Dims, SublayerPlan};
use crate::norm::NormKind;

/// The recipe as equations, one line each: embedding, every sublayer group, readout, loss.
pub fn describe(spec: &RecipeSpec) -> Vec<String> {
    let mut lines = Vec::new();
    let mut embed = "Embed(x)".to_string();
    if let Some(m) = &spec.embedding.multiplier {
        embed = format!("{}·{embed}", m.text());
    }
    if let Some(e) = &spec.embedding.scale {
        embed = format!("e·{embed}   [e learnable, e₀ = {}]", e.text());
    }
    lines.push(match symbol(spec, &spec.embedding.norm) {
        Some(n) => format!("X_1 = {n}({embed})"),
        None => format!("X_1 = {embed}"),
    });
    lines.extend(residual_lines(spec));
    lines.extend((0..spec.placement.layers.len()).map(|i| override_line(spec, i)));
    lines.push(match symbol(spec, &spec.logits.norm) {
        Some(n) => format!("logits = W_out · {n}(X_{{2L+1}})"),
        None => "logits = W_out · X_{2L+1}".into(),
    });
    lines.extend(readout_notes(spec));
    lines.extend(scaling_notes(spec));
    lines
}

/// The update every sublayer runs, as its residual kind computes it: the sublayer equation for
/// the plain sum and nGPT's step, the read and write of the streams, or the read over depth.
fn residual_lines(spec: &RecipeSpec) -> Vec<String> {
    let p = &spec.placement;
    let label = if p.layers.is_empty() { "every sublayer l" } else { "sublayer l (default)" };
    let resolved = match &spec.residual {
        ResidualSpec::Hc(h) => Some(streams::resolve_hc(h)),
        ResidualSpec::Mhc(m) => Some(streams::resolve_mhc(m)),
        ResidualSpec::MhcLite(m) => Some(streams::resolve_mhc_lite(m)),
        _ => None,
    };
    match (&spec.residual, resolved) {
        (_, Some(Ok(st))) => super::equation_streams::stream_lines(st, &stream_branch(spec, &p.sublayer)),
        (r, Some(Err(e))) => vec![format!("residual kind `{}`: {e}", r.kind())],
        (ResidualSpec::AttnRes(a), None) => attn_res_lines(a, &stream_branch(spec, &p.sublayer)),
        _ => vec![format!("{label}:  {}", sublayer_equation(spec, &p.sublayer))],
    }
}

/// The equation of the layers of `spec.placement.layers[i]`, with the earlier entries over the same
/// layers (and a superset of sublayers) applied first.
fn override_line(spec: &RecipeSpec, i: usize) -> String {
    let entry = &spec.placement.layers[i];
    let mut eff = spec.placement.sublayer.clone();
    for earlier in &spec.placement.layers[..i] {
        let covers = earlier.sublayers.unwrap_or_default() == Which::Both || earlier.sublayers == entry.sublayers;
        if earlier.range == entry.range && covers {
            eff.overlay(earlier);
        }
    }
    eff.overlay(entry);
    let which = match entry.sublayers.unwrap_or_default() {
        Which::Both => "",
        Which::Attn => ", attention",
        Which::Ffn => ", FFN",
    };
    format!("layers k ∈ {}{which}:  {}", entry.range.as_deref().unwrap_or("?"), sublayer_equation(spec, &eff))
}

/// GPAS's forward-only scaling, CompleteP's depth scaling and TaperNorm's gate, a line each
/// when present.
fn scaling_notes(spec: &RecipeSpec) -> Vec<String> {
    let mut lines = Vec::new();
    if let ResidualSpec::Sum(SumSpec { gpas: true, .. }) = spec.residual {
        lines.push(
            "after each residual addition of layer k: X ← X − SiLU(α_k)·sg(X)   [α_k learnable, 0 at init; sg: the \
                gradient passes unscaled (GPAS)]"
                .into(),
        );
    }
    if let InitSpec::Completep(c) = &spec.init {
        lines.push(format!(
            "CompleteP: c includes L_base/L (L_base = {}); AdamW ε × L_base/L inside the layers; LR, init, decay as \
                tuned at L_base",
            c.base_layers
        ));
    }
    if let Some(t) = taper_schedule(spec) {
        let start = t.start.map_or("the end of the LR warm-up".to_string(), |s| format!("{s} of the run"));
        lines.push(format!(
            "Taper: g·γ⊙x/RMS(x) + (1 − g)·c·γ̃⊙x; g = 1 until {start} (c ← EMA_β(‖γ⊙x‖²/RMS)/EMA_β(‖γ⊙x‖²), γ̃ ← γ \
                there; β = {}), then ½(1 + cos) to 0 at {} of the run",
            t.decay, t.end
        ));
    }
    lines
}

/// The taper schedule of a recipe with a `tapernorm` input slot: its `taper`, or the defaults
/// the resolver gives it.
fn taper_schedule(spec: &RecipeSpec) -> Option<TaperSpec> {
    let tapers = |s: &SublayerSpec| s.input.as_ref().is_some_and(|n| n.table().kind.as_str() == "tapernorm");
    let p = &spec.placement;
    let any = tapers(&p.sublayer) || p.layers.iter().any(tapers);
    p.taper.clone().or_else(|| any.then(TaperSpec::default))
}

/// QK-norm, the regulariser and the recipe's parameters, a line each when present.
fn readout_notes(spec: &RecipeSpec) -> Vec<String> {
    let mut lines = attention_notes(spec);
    if let Some(c) = spec.logits.softcap {
        lines.push(format!("logits soft-capped: {c}·tanh(logits/{c})"));
    }
    if let ResidualSpec::Sum(SumSpec { x0_mix: Some(m), .. }) = spec.residual {
        lines.push(format!(
            "before layer k: X ← λ_r,k·X + λ₀,k·X_1   [λ_r, λ₀ learnable per layer, init {} and {}]",
            m.residual, m.x0
        ));
    }
    if let Some(c) = spec.attention.qk_clip {
        lines.push(format!(
            "after each step: heads whose max logit S > τ = {}: W_q ×(τ/S)^{}, W_k ×(τ/S)^{} (QK-clip, MuonClip)",
            c.tau,
            c.alpha,
            1.0 - c.alpha
        ));
    }
    if let ResidualSpec::Hypersphere(_) = spec.residual {
        lines.extend([
            "attention: q, k ← s_qk ⊙ q/‖q‖, s_qk ⊙ k/‖k‖ per head after RoPE; logits q·k·√h (nGPT)".to_string(),
            "FFN: u, ν ← s_u·√d ⊙ x W_3, s_ν·√d ⊙ x W_1; W_2 (u ⊙ SiLU(ν)) (nGPT's s_uv)".into(),
            "logits = s_z ⊙ (X W_out)   [s_qk, s_uv, s_z learnable, 1 at init, scaled parametrisation]".into(),
            "after each step: embedding rows and every weight vector along d scaled to unit norm (nGPT)".into(),
        ]);
    }
    if let InitSpec::MomentControl(m) = &spec.init {
        lines.extend([
            "init (moment control): Embed σ = 1; W_Q, W_K σ² = 1/d; W_V, W_O of layer k σ⁴ = 1/(r_k·d·d_q); FFN \
                at unit output variance; W_out σ² = 1/d"
                .to_string(),
            format!(
                "r_k: token correlation entering layer k, from r_0 = {} through every residual sum (DeepScaleLM)",
                m.r0
            ),
        ]);
    }
    if spec.logits.regularizer > 0.0 {
        lines.push(format!(
            "loss = CE + {}·(1/2L)·Σ_l E[ReLU(σ²(z_l) − 1)]   (variance regulariser, KiteNorm eq. 24)",
            spec.logits.regularizer
        ));
    }
    if !spec.placement.params.is_empty() {
        let p: Vec<String> = spec.placement.params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        lines.push(format!("where {}", p.join(", ")));
    }
    lines
}

/// Attention Residuals' read over depth in place of the sum: every sublayer's read, branch and
/// write, and its weights.
fn attn_res_lines(a: &AttnResSpec, branch: &str) -> Vec<String> {
    let sources = match a.blocks {
        None => "X_1 and every earlier sublayer's output".to_string(),
        Some(n) => format!("X_1, the sums of the {n} blocks of ⌈2L/{n}⌉ sublayers so far and the current block's"),
    };
    vec![
        format!(
            "every sublayer l:  x_l = Σ_s α_s·V_s, α = softmax_s(w_lᵀ RMS(V_s));  y_l = {branch};  y_l joins the \
             current block   (Attention Residuals: read over depth in place of the sum)"
        ),
        format!("V = {sources}; X_{{2L+1}} = Σ_s α_s·V_s with its own w_out"),
        "probes: X_l is the read x_l, z_l the running sum of its block after y_l joins".to_string(),
        "w_l learnable per sublayer, 0 at init (uniform weights); RMS without gain (Kimi Team, 2026)".to_string(),
    ]
}

/// QK-norm, V-norm and the attention soft-cap, one line each.
fn attention_notes(spec: &RecipeSpec) -> Vec<String> {
    let mut lines = Vec::new();
    let a = &spec.attention;
    match a.qk_norm {
        QkNorm::None => {}
        QkNorm::Head => lines.push("attention: q, k RMS-normalised per head, over d_head (QK-norm, Qwen3)".into()),
        QkNorm::Full => lines.push(
            "attention: q, k RMS-normalised over the full width d, before the head split (QK-norm, OLMo 2)".into(),
        ),
        QkNorm::L2 => lines.push(
            "attention: q, k scaled to unit mean square per head, q/√(mean(q²) + ε), no gain (QK L2-norm: \
                Megatron-LM's qk_l2_norm, Llama 4)"
                .into(),
        ),
        QkNorm::UnitL2 => lines.push(
            "attention: q, k scaled to unit L2 norm per head, q/√(‖q‖² + ε), no gain (Transformer Engine)".into(),
        ),
    }
    match a.v_norm {
        VNorm::Head => lines.push("attention: v RMS-normalised per head (V-norm)".into()),
        VNorm::Full => {
            lines.push("attention: v RMS-normalised over its full width (V-norm, HybridNorm's QKV-norm)".into())
        }
        VNorm::None => {}
    }
    if let Some(c) = a.softcap {
        lines.push(format!("attention logits soft-capped: {c}·tanh((q·k/√h)/{c}) before the mask"));
    }
    if a.value_residual {
        lines.push("attention of layer k ≥ 2: v ← λ₁,k·v + λ₂,k·v₁, v₁ layer 1's values (λ learnable, 0.5 and 0.5 at init; ResFormer)".into());
    }
    if a.sink {
        lines.push(
            "attention: p_j = exp(s_j)/(exp(b_h) + Σ_k exp(s_k)), b_h a learnable sink logit per head (gpt-oss)".into(),
        );
    }
    match a.gate {
        AttnGate::None => {}
        AttnGate::Headwise => lines.push(
            "attention: head h's output o_h ← σ(N_in(X) W_θ)_h · o_h before W_O, W_θ ∈ ℝ^{d×H} (gated attention, \
                headwise)"
                .into(),
        ),
        AttnGate::Elementwise => lines.push(
            "attention: o ← σ(N_in(X) W_θ) ⊙ o per head and feature before W_O, W_θ ∈ ℝ^{d×H·h} (gated attention, \
                elementwise)"
                .into(),
        ),
    }
    lines
}

/// `X_{l+1} = N_outer(a·X_l + c·N_out(F_l(s·N_in(X_l))))` with the recipe's parts filled in.
pub fn sublayer_equation(spec: &RecipeSpec, s: &SublayerSpec) -> String {
    let slot = |n: &Option<NormSpec>| n.as_ref().and_then(|n| symbol(spec, n));
    let mut branch = branch_term(spec, s, "X_l");
    let mut notes = Vec::new();
    let mut skip_gate = None;
    if let Some(g) = &s.gate {
        let (sym, note) = gate_symbol(g);
        notes.push(note);
        match g.on {
            GateOn::Branch => branch = format!("{sym}·{branch}"),
            GateOn::Skip => skip_gate = Some(sym),
            GateOn::Interpolate => {
                let outer = slot(&s.outer).unwrap_or_else(|| "·".into());
                notes.push(format!("X̂ = {outer}(X_l)"));
                let eq = format!("X_{{l+1}} = {outer}(X̂ + {sym}·({branch} − X̂))");
                return format!("{eq}   [{}]", notes.join("; "));
            }
        }
    }
    let skip = match (s.skip.as_ref().filter(|v| !v.is_one()), skip_gate) {
        (Some(a), Some(g)) => format!("{}·{g}·X_l", factor(a)),
        (Some(a), None) => format!("{}·X_l", factor(a)),
        (None, Some(g)) => format!("{g}·X_l"),
        (None, None) => "X_l".into(),
    };
    let res = match s.residual.as_ref().filter(|v| !v.is_one()) {
        Some(c) => format!("{}·{branch}", factor(c)),
        None => branch,
    };
    let sum = format!("{skip} + {res}");
    let mut eq = match slot(&s.outer) {
        Some(n) => format!("X_{{l+1}} = {n}({sum})"),
        None => format!("X_{{l+1}} = {sum}"),
    };
    if !notes.is_empty() {
        eq.push_str(&format!("   [{}]", notes.join("; ")));
    }
    eq.push_str(&init_note(s));
    eq
}

/// The branch `N_out(F_l(s·N_in(x)))` of sublayer spec `s` on the input `x`.
fn branch_term(spec: &RecipeSpec, s: &SublayerSpec, x: &str) -> String {
    let slot = |n: &Option<NormSpec>| n.as_ref().and_then(|n| symbol(spec, n));
    let mut inner = match slot(&s.input) {
        Some(n) => format!("{n}({x})"),
        None => x.to_string(),
    };
    if let Some(sc) = s.input_scale.as_ref().filter(|v| !v.is_one()) {
        inner = format!("{}·{inner}", factor(sc));
    }
    let branch = format!("F_l({inner})");
    match slot(&s.output) {
        Some(n) => format!("{n}({branch})"),
        None => branch,
    }
}

/// The branch a stream recipe's sublayer computes on its read `x_l`, with its residual scale.
fn stream_branch(spec: &RecipeSpec, s: &SublayerSpec) -> String {
    let branch = branch_term(spec, s, "x_l");
    match s.residual.as_ref().filter(|v| !v.is_one()) {
        Some(c) => format!("{}·{branch}", factor(c)),
        None => branch,
    }
}

/// `   [init: W_O, W_2 × …; W_V, W_1, W_3 × …]` for the init scales that are not 1, else empty.
fn init_note(s: &SublayerSpec) -> String {
    let mut init = Vec::new();
    if let Some(v) = s.init_out.as_ref().filter(|v| !v.is_one()) {
        init.push(format!("W_O, W_2 × {}", v.text()));
    }
    if let Some(v) = s.init_in.as_ref().filter(|v| !v.is_one()) {
        init.push(format!("W_V, W_1, W_3 × {}", v.text()));
    }
    if init.is_empty() { String::new() } else { format!("   [init: {}]", init.join("; ")) }
}

/// A gate's symbol in the equation and its note: `α`/`diag(λ)` on the branch, `ω`/`diag(ω)`
/// on the skip, `|α|`/`diag(|α|)` for an interpolating step.
fn gate_symbol(g: &GateSpec) -> (String, String) {
    let letter = match g.on {
        GateOn::Branch if g.shape == GateShape::Channel => "λ",
        GateOn::Branch | GateOn::Interpolate => "α",
        GateOn::Skip => "ω",
    };
    let used = if g.on == GateOn::Interpolate { format!("|{letter}|") } else { letter.to_string() };
    let (sym, space) = match g.shape {
        GateShape::Scalar => (used, "ℝ"),
        GateShape::Channel => (format!("diag({used})"), "ℝ^d"),
    };
    let shared = if g.per == GateOwner::Layer { ", one per layer" } else { "" };
    let stored = g.scale.as_ref().map(|s| format!(", stored from {} (scaled)", s.text())).unwrap_or_default();
    let start = if g.profile {
        format!("{letter} set by Admin's profiling pass before the first step")
    } else {
        format!("{letter}₀ = {}", g.init.text())
    };
    (sym, format!("{letter} ∈ {space} learnable, {start}{stored}{shared}"))
}

/// The slot's printed symbol. The equations hold for any size, so an α₀ written as an
/// expression is printed as written (the resolved plan shows its value for one size).
fn symbol(spec: &RecipeSpec, n: &NormSpec) -> Option<String> {
    let mut table = n.table();
    let alpha_expr = match &table.alpha {
        Some(a @ Scale::Expr(_)) => Some(a.text()),
        _ => None,
    };
    if alpha_expr.is_some() {
        table.alpha = Some(Scale::Number(1.0));
    }
    let any_size = Dims { n_layers: 1, d_model: 1 };
    match norm_kind(spec, &NormSpec::Table(table), any_size, 1e-6) {
        Ok(Some(NormKind::Dyt { .. })) if alpha_expr.is_some() => {
            Some(format!("DyT[α₀={}]", alpha_expr.unwrap_or_default()))
        }
        Ok(Some(kind)) => Some(kind.symbol()),
        Ok(None) => None,
        Err(_) => Some(format!("<invalid norm {}>", n.table().kind)),
    }
}

fn factor(s: &Scale) -> String {
    let t = s.text();
    let simple = t.parse::<f64>().is_ok() || t.chars().all(|c| c.is_alphanumeric() || c == '_');
    if simple { t } else { format!("({t})") }
}

/// A slot's symbol, `·` when empty.
fn slot(k: &Option<NormKind>) -> String {
    k.as_ref().map(NormKind::symbol).unwrap_or_else(|| "·".into())
}

/// The input norm's symbol in the plan. The approximating kinds (BHyT, RMSNorm-Approx) measure
/// their input exactly before attention and use Theorem 3.5's ŝ² before the FFN (the BHyT
/// paper's Algorithm 1): exact before attention, `≈` before the FFN.
fn input_symbol(s: &SublayerPlan) -> String {
    match (&s.input, s.branch) {
        (Some(NormKind::RmsNormApprox { gain, eps }), Branch::Attn) => {
            NormKind::RmsNorm { gain: *gain, eps: *eps }.symbol()
        }
        (Some(k @ NormKind::Bhyt { .. }), Branch::Ffn) => k.symbol().replacen("BHyT", "BHyT≈", 1),
        (k, _) => slot(k),
    }
}

/// The resolved per-sublayer plan, one line per sublayer: norms, scales and init scales.
pub fn plan_lines(r: &ResolvedRecipe) -> Vec<String> {
    let n = slot;
    let embedding = match r.embedding.scale {
        Some(e) => format!("embedding: e₀ = {e:.4} (learnable), N_emb = {}", n(&r.embedding.norm)),
        None => format!("embedding: N_emb = {}", n(&r.embedding.norm)),
    };
    let last = format!("final: N_final = {}", n(&r.logits.norm));
    let subs = r.sublayers.iter().map(|s| {
        let line = format!(
            "l={:<3} k={:<3} {:<4}  in={:<10} out={:<10} outer={:<10} a={:<8.4} c={:<8.4} s={:<8.4} \
                    init_out={:<8.4} init_in={:.4}",
            s.index,
            s.layer,
            format!("{:?}", s.branch),
            input_symbol(s),
            n(&s.output),
            n(&s.outer),
            s.skip,
            s.residual,
            s.input_scale,
            s.init_out,
            s.init_in
        );
        match s.gate {
            Some(g) => {
                let shape = if g.shape == GateShape::Scalar { "scalar" } else { "per channel" };
                let per = if g.per == GateOwner::Layer { ", shared by the layer" } else { "" };
                let on = match g.on {
                    GateOn::Branch => "",
                    GateOn::Skip => ", on the skip",
                    GateOn::Interpolate => ", interpolating",
                };
                format!("{line} gate₀={} ({shape}{per}{on})", g.init)
            }
            None => line,
        }
    });
    std::iter::once(embedding).chain(subs).chain(std::iter::once(last)).collect()
}
