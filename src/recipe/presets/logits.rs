//! Presets that bound the attention and output logits: soft-capping (Gemma 2), QK L2-norm
//! (Megatron-LM, Llama 4) and QK-clip (Kimi K2). Notation as in [`super::placement`].

use super::placement::pre_rms;
use crate::recipe::spec::{QkClip, QkNorm, RecipeSpec};

/// Gemma 2's soft-capping on RMSNorm pre-norm: attention logits `50·tanh(s/50)`, output logits
/// `30·tanh(ℓ/30)` (litgpt's defaults for Gemma 2).
pub fn softcap() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "softcap".into();
    r.about =
        "RMSNorm pre-norm with soft-capping: attention logits 50·tanh(s/50), output logits 30·tanh(ℓ/30) (Gemma 2)"
            .into();
    r.attention.softcap = Some(50.0);
    r.logits.softcap = Some(30.0);
    r
}

/// Megatron-LM's `qk_l2_norm` (Llama 4's L2 QK-norm) on RMSNorm pre-norm: each head's query
/// and key scaled to unit L2 norm, no gain.
pub fn qk_l2() -> RecipeSpec {
    let mut r = pre_rms();
    r.name = "qk-l2".into();
    r.about = "RMSNorm pre-norm with QK L2-norm: q/√(mean(q²) + ε), k/√(mean(k²) + ε) per head, no gain, so \
        |logit| ≤ √h (Megatron-LM qk_l2_norm, Llama 4 L2Norm)"
        .into();
    r.attention.qk_norm = QkNorm::L2;
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
    r.attention.qk_clip = Some(QkClip { tau: 100.0, alpha: 0.5 });
    r
}
