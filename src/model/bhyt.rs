//! One statistic per block (the BHyT paper's Algorithm 1): the attention input norm computes the exact
//! `s_x²` of the block input; the FFN input norm does not measure its own input but uses the
//! approximation of Theorem 3.5, `ŝ² = s_x² + ‖W_V W_O‖²_F / (T d) · σ_z²`, where `σ_z²` is
//! the per-coordinate variance of what the attention branch reads before its gain:
//! - BHyT: the tanh argument's, `(λ_attn / κ)²` (the theorem);
//! - RMSNorm-Approx (the BHyT paper's Table 5, the same approximation in a plain RMSNorm): the
//!   normalised input's, `mean((x/s_x)²) = 1`.
//!
//! The one `s_x²` tensor serves both norms, as in the algorithm (and so the backward pass
//! sums both paths' gradients into one node).

use crate::model::attention::self_attention::Attention;
use crate::model::sublayer::Sublayer;
use burn::tensor::Tensor;

/// The exact `s_x²` `[B, T, 1]` of the block input `x` `[B, T, d]` when the attention input
/// norm approximates (BHyT, RMSNorm-Approx); `None` otherwise.
pub fn block_statistic(attn: &Sublayer<Attention>, x: &Tensor<3>) -> Option<Tensor<3>> {
    attn.approximating_input().map(|_| x.clone().square().mean_dim(2))
}

/// `ŝ²` `[B, T, 1]` for the FFN input norm from the block's exact statistic, when that norm
/// approximates; `None` otherwise. `t`, `d`: sequence length and width; `value_output`: the
/// layer's `‖W_V W_O‖²_F` when already computed (decoding), else computed here. (The recipe
/// refuses an approximating FFN norm without the same kind before attention.)
pub fn ffn_variance<F>(
    attn: &Sublayer<Attention>,
    ffn: &Sublayer<F>,
    exact: Option<Tensor<3>>,
    value_output: Option<Tensor<1>>,
    [t, d]: [usize; 2],
) -> Option<Tensor<3>> {
    ffn.approximating_input()?;
    let (attn_norm, exact) = (attn.approximating_input()?, exact?);
    let frobenius_sq = value_output.unwrap_or_else(|| attn.f.value_output_frobenius_sq());
    let gain = frobenius_sq / ((t * d) as f64);
    let added = match attn_norm.as_bhyt() {
        Some(n) => gain * (n.lambda.val() / n.kappa).square(),
        None => gain,
    };
    Some(exact + added.unsqueeze::<3>())
}
