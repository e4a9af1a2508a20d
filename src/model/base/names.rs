//! The parameter naming scheme, in one place: the constructor names parameters with these
//! functions, and the probes and gradient statistics parse names with them.
//!
//! ```text
//! tok_emb  emb_scale  emb_norm.*  layers.{i}.{attn|ffn}.{input_norm|output_norm|outer_norm}.{gain|shift|alpha|lambda}
//! layers.{i}.attn.f.{wq,wk,wv,wo,q_norm.*,k_norm.*,v_norm.*}  layers.{i}.ffn.f.{w1,w3,w2}  final_norm.*  lm_head
//! layers.{i}.{attn|ffn}.gate  layers.{i}.gate  layers.{i}.{resid_lambda|x0_lambda}  layers.{i}.gpas
//! sz  layers.{i}.attn.f.sqk  layers.{i}.ffn.f.suv                       (nGPT)
//! layers.{i}.ffn.f.{router,selection_bias,experts.{e}.{w1,w3,w2},shared.*} (mixture of experts)
//! layers.{i}.attn.f.{w_gate,sinks}                                     (gated attention, sinks)
//! layers.{i}.{attn|ffn}.hc.*  hc_head.{proj,base,scale}               (residual streams)
//! layers.{i}.{attn|ffn}.attn_res.query  attn_res_head.query             (Attention Residuals)
//! ```

pub const TOKEN_EMBEDDING: &str = "tok_emb";
/// The learnable scalar `e` of `X_1 = N_emb(e · Embed(x))` (DyT's LLaMA recipe).
pub const EMBEDDING_SCALE: &str = "emb_scale";
pub const EMBEDDING_NORM: &str = "emb_norm";
pub const FINAL_NORM: &str = "final_norm";
pub const OUTPUT_PROJECTION: &str = "lm_head";
/// nGPT's logit scale `s_z ∈ ℝ^V`.
pub const LOGIT_SCALE: &str = "sz";
/// The per-layer x0-mixing scalars `λ_r` and `λ₀` (`layers.{i}.resid_lambda`, `layers.{i}.x0_lambda`).
pub const RESID_LAMBDA: &str = "resid_lambda";
pub const X0_LAMBDA: &str = "x0_lambda";
/// GPAS's per-layer scalar `α_k` (`layers.{i}.gpas`).
pub const GPAS: &str = "gpas";
/// A residual gate: `layers.{i}.{attn|ffn}.gate`, or `layers.{i}.gate` when the layer shares it.
pub const GATE: &str = "gate";
/// DeepSeek V3's router selection bias, `layers.{i}.ffn.f.selection_bias`: a buffer.
pub const SELECTION_BIAS: &str = "selection_bias";
/// The leaf name of a zero-centred, decayed norm gain (the optimizer decays these).
pub use crate::norm::CENTRED_GAIN;
/// A sublayer's stream mixing, `layers.{i}.{attn|ffn}.hc.*`.
pub const STREAM_MIX: &str = "hc";
/// mHC's collapse of the streams before the final norm, `hc_head.*`.
pub const STREAM_HEAD: &str = "hc_head";
/// Attention Residuals' pseudo-query of a sublayer, `layers.{i}.{attn|ffn}.attn_res.query`.
pub const DEPTH_ATTENTION: &str = "attn_res";
/// Attention Residuals' read for the output, `attn_res_head.query`.
pub const DEPTH_HEAD: &str = "attn_res_head";
/// The branch function inside a sublayer.
pub const BRANCH_FUNCTION: &str = "f";
/// A sublayer's norm slots, in the order of the sublayer equation.
pub const SUBLAYER_NORMS: [&str; 3] = ["input_norm", "output_norm", "outer_norm"];

/// `attn` (sublayer 2i) or `ffn` (sublayer 2i + 1) of layer i.
pub const BRANCHES: [&str; 2] = ["attn", "ffn"];

/// `layers.{i}`.
pub fn layer(i: usize) -> String {
    format!("layers.{i}")
}

/// Whether a parameter lies inside the Transformer layers (`layers.{i}.…`).
pub fn in_layers(name: &str) -> bool {
    name.starts_with("layers.")
}

/// `layers.{i}.{attn|ffn}` for 0-based sublayer `2i + b`.
pub fn sublayer(i: usize, branch: usize) -> String {
    format!("{}.{}", layer(i), BRANCHES[branch])
}

/// `prefix.name`.
pub fn child(prefix: &str, name: &str) -> String {
    format!("{prefix}.{name}")
}

/// Which sublayer (0-based, 2 per layer) a parameter belongs to (`layers.{i}.attn.…` → 2i,
/// `layers.{i}.ffn.…` → 2i + 1); `None` for embedding, head and embedding/final norms.
pub fn sublayer_of(name: &str) -> Option<usize> {
    let (i, rest) = name.strip_prefix("layers.")?.split_once('.')?;
    let i: usize = i.parse().ok()?;
    let b = BRANCHES.iter().position(|b| rest.split('.').next() == Some(*b))?;
    Some(2 * i + b)
}

/// Whether a parameter belongs to a norm slot on the residual stream (embedding, sublayer or
/// final norm), not to the branch function (QK-norm).
pub fn is_stream_norm(name: &str) -> bool {
    let Some((owner, _field)) = name.rsplit_once('.') else { return false };
    let slot = owner.rsplit('.').next().unwrap_or(owner);
    owner == EMBEDDING_NORM || owner == FINAL_NORM || (SUBLAYER_NORMS.contains(&slot) && sublayer_of(owner).is_some())
}

/// Whether a parameter is a buffer: stored with the weights but set by a schedule, never by a
/// gradient (TaperNorm's gate, scale and calibration averages).
pub fn is_buffer(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, leaf)| crate::norm::TAPER_BUFFERS.contains(&leaf) || leaf == SELECTION_BIAS)
}

/// Whether a parameter is a learned residual scale: a gate (`….gate`), an x0-mixing λ or GPAS's α.
pub fn is_residual_scale(name: &str) -> bool {
    let Some((owner, field)) = name.rsplit_once('.') else { return false };
    in_layers(owner) && [GATE, RESID_LAMBDA, X0_LAMBDA, GPAS].contains(&field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(sublayer_of("layers.3.attn.f.wq"), Some(6));
        assert_eq!(sublayer_of("layers.3.ffn.output_norm.gain"), Some(7));
        assert_eq!(sublayer_of("final_norm.gain"), None);
        assert_eq!(sublayer_of(&child(&sublayer(5, 1), "f.w2")), Some(11));
        assert!(is_stream_norm("emb_norm.gain") && is_stream_norm("layers.0.attn.outer_norm.shift"));
        assert!(!is_stream_norm("layers.0.attn.f.q_norm.gain") && !is_stream_norm("layers.0.ffn.f.w1"));
        assert!(is_residual_scale("layers.2.gate") && is_residual_scale("layers.0.ffn.gate"));
        assert!(is_residual_scale("layers.1.x0_lambda") && !is_residual_scale("layers.0.attn.f.wq"));
        assert!(is_buffer("layers.0.ffn.input_norm.taper_gate") && !is_buffer("layers.0.ffn.input_norm.taper_gain"));
    }
}
