//! QK-clip (MuonClip; Kimi Team, 2025, "Kimi K2"): after an optimizer step, every attention
//! head `h` whose largest logit `S_h = max q·k/√d_h` in the step exceeded `τ` has its query
//! and key projections rescaled so that the same inputs would give `S_h = τ`:
//!
//! ```text
//! γ_h = τ / S_h,   W_q[:, h] ← W_q[:, h]·γ_h^α,   W_k[:, h] ← W_k[:, h]·γ_h^(1−α)
//! ```
//!
//! The logit is bilinear in `W_q` and `W_k` (RoPE is a rotation), so it scales by `γ_h`. Under
//! grouped-query attention a key head serves several query heads; its keys are left alone and
//! each query head takes the whole factor, `W_q[:, h] ← W_q[:, h]·γ_h` (Kimi K2's rule for its
//! shared rotary key).

use crate::model::attention::self_attention::Attention;
use crate::recipe::QkClip;
use burn::module::Param;
use burn::tensor::{Tensor, TensorData};

/// What one clip did: how many heads it rescaled and the largest logit it saw.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClipEvent {
    pub heads_clipped: usize,
    pub max_logit: f64,
}

/// The per-head factors `(query, key)` of one layer's heads with largest logits `maxima`:
/// `(γ^α, γ^(1−α))` for a head beyond τ (`(γ, 1)` under GQA), `(1, 1)` otherwise.
pub fn factors(maxima: &[f64], clip: QkClip, grouped: bool) -> Vec<(f64, f64)> {
    let one = |s: f64| {
        if s <= clip.tau || !s.is_finite() {
            return (1.0, 1.0);
        }
        let gamma = clip.tau / s;
        if grouped { (gamma, 1.0) } else { (gamma.powf(clip.alpha), gamma.powf(1.0 - clip.alpha)) }
    };
    maxima.iter().map(|&s| one(s)).collect()
}

/// One attention sublayer's `W_q`, `W_k` rescaled by [`factors`] of its heads' largest logits
/// `maxima`; returns how many heads it rescaled.
pub fn clip_heads(attn: &mut Attention, maxima: &[f64], clip: QkClip) -> usize {
    let grouped = attn.n_kv_heads != attn.n_heads;
    let f = factors(maxima, clip, grouped);
    let clipped = f.iter().filter(|(q, k)| *q != 1.0 || *k != 1.0).count();
    if clipped == 0 {
        return 0;
    }
    let h = attn.head_dim;
    let q: Vec<f64> = f.iter().flat_map(|(q, _)| std::iter::repeat_n(*q, h)).collect();
    attn.wq = scale_columns(attn.wq.clone(), q);
    if !grouped {
        let k: Vec<f64> = f.iter().flat_map(|(_, k)| std::iter::repeat_n(*k, h)).collect();
        attn.wk = scale_columns(attn.wk.clone(), k);
    }
    clipped
}

/// `W ⊙ s` broadcast over rows: column `j` of `W` `[in, out]` times `s[j]`. The parameter keeps
/// its id, so the optimizer's moments stay with it.
fn scale_columns(w: Param<Tensor<2>>, s: Vec<f64>) -> Param<Tensor<2>> {
    w.map(|t| {
        let n = s.len();
        let s = Tensor::<1>::from_data(TensorData::new(s, [n]).convert_dtype(t.dtype()), &t.device());
        let tracked = t.is_require_grad();
        let out = (t.detach() * s.unsqueeze::<2>()).detach();
        if tracked { out.require_grad() } else { out }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// τ = 100, α = ½: a head at S = 400 gets γ = ¼, so √¼ = ½ on each side; a head at or
    /// below τ is untouched; under GQA the query takes the whole ¼.
    #[test]
    fn factors_by_hand() {
        let clip = QkClip { tau: 100.0, alpha: 0.5 };
        assert_eq!(factors(&[400.0, 100.0, 30.0], clip, false), vec![(0.5, 0.5), (1.0, 1.0), (1.0, 1.0)]);
        assert_eq!(factors(&[400.0], clip, true), vec![(0.25, 1.0)]);
        let all_q = QkClip { tau: 100.0, alpha: 1.0 };
        assert_eq!(factors(&[200.0], all_q, false), vec![(0.5, 1.0)]);
    }
}
