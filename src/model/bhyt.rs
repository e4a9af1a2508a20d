//! BHyT's one statistic per block (seed 003 Algorithm 1): the attention input norm computes
//! the exact `s_x²` of the block input; the FFN input norm does not measure its own input but
//! uses the approximation of Theorem 3.5,
//! `ŝ² = s_x² + ‖W_V W_O‖²_F / (T d) · (λ_attn / κ)²`.

use super::attention::Attention;
use super::ffn::FeedForward;
use super::sublayer::{Sublayer, maybe_norm};
use crate::norm::{Norm, NormKind, kappa};
use burn::tensor::Tensor;

/// `ŝ²` `[B, T, 1]` for the FFN input norm of a layer given the block input `x` `[B, T, d]`,
/// when that norm is BHyT; `None` otherwise.
pub fn ffn_variance(attn: &Sublayer<Attention>, ffn: &Sublayer<FeedForward>, x: &Tensor<3>) -> Option<Tensor<3>> {
    ffn.bhyt_input()?;
    let attn_norm = attn.bhyt_input().expect("validated: a BHyT FFN norm needs a BHyT attention norm");
    let NormKind::Bhyt { p, .. } = attn_norm.kind else { unreachable!("bhyt_input is BHyT") };
    let [_, t, d] = x.dims();
    let exact = x.clone().square().mean_dim(2);
    let lambda = attn_norm.lambda_val().expect("BHyT has λ");
    let gain = attn.f.value_output_frobenius_sq() / ((t * d) as f64);
    let added = gain * (lambda / kappa(p)).square();
    Some(exact + added.unsqueeze::<3>())
}

/// The FFN input norm: with the supplied `ŝ²` when there is one, else exact.
pub fn ffn_input(norm: &Option<Norm>, x: Tensor<3>, variance: Option<Tensor<3>>) -> Tensor<3> {
    match (norm, variance) {
        (Some(n), Some(v)) => n.forward_with_variance(x, v),
        (norm, _) => maybe_norm(norm, x),
    }
}
