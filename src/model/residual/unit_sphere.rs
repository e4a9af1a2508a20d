//! nGPT's projection onto the hypersphere (Loshchilov et al., 2024, §2.6; NVIDIA's reference
//! `normalize_matrices`): at initialisation and after every optimizer step, every embedding row
//! and every weight vector along the hidden dimension `d` is scaled to unit L2 norm, so that the
//! matmuls compute cosine similarities.
//!
//! normlab stores matrices `[in, out]`, so the vectors along `d` are the columns of `W_q`, `W_k`,
//! `W_v`, `W_1`, `W_3` (`[d, ·]`) and of `W_out` (`[d, V]`), the rows of `W_O`, `W_2` (`[·, d]`)
//! and of the embedding (`[V, d]`).

use crate::model::attention::self_attention::Attention;
use crate::model::ffn::dense::DenseFfn;
use burn::module::Param;
use burn::tensor::Tensor;

/// Along which axis of a `[rows, cols]` matrix the unit vectors lie.
#[derive(Clone, Copy)]
pub enum Unit {
    /// Each column (a vector over the rows) unit-norm.
    Columns,
    /// Each row unit-norm.
    Rows,
}

/// An attention block's projections on the sphere (see
/// [`super::Transformer::project_to_sphere`] for the whole model).
pub fn project_attention(a: &mut Attention) {
    a.wq = unit(a.wq.clone(), Unit::Columns);
    a.wk = unit(a.wk.clone(), Unit::Columns);
    a.wv = unit(a.wv.clone(), Unit::Columns);
    a.wo = unit(a.wo.clone(), Unit::Rows);
}

/// A feed-forward block's matrices on the sphere.
pub fn project_ffn(f: &mut DenseFfn) {
    f.w1 = unit(f.w1.clone(), Unit::Columns);
    f.w3 = f.w3.take().map(|w| unit(w, Unit::Columns));
    f.w2 = unit(f.w2.clone(), Unit::Rows);
}

/// `w` with each of its vectors along `along` divided by its L2 norm. The parameter keeps its
/// id, so the optimizer's moments stay with it.
pub fn unit(w: Param<Tensor<2>>, along: Unit) -> Param<Tensor<2>> {
    w.map(|t| {
        let tracked = t.is_require_grad();
        let t = t.detach();
        // The norm of a column is a reduction over the rows (axis 0), of a row over axis 1.
        let axis = match along {
            Unit::Columns => 0,
            Unit::Rows => 1,
        };
        let norm = t.clone().square().sum_dim(axis).sqrt();
        let out = (t / norm).detach();
        if tracked { out.require_grad() } else { out }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    /// [[3, 0], [4, 1]]: columns have norms 5 and 1, rows 3 and √17.
    #[test]
    fn unit_vectors_by_hand() {
        let w = || Param::from_data(TensorData::new(vec![3f32, 0.0, 4.0, 1.0], [2, 2]), &Device::flex());
        let got = |p: Param<Tensor<2>>| p.val().into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(got(unit(w(), Unit::Columns)), vec![0.6, 0.0, 0.8, 1.0]);
        let r = 17f32.sqrt();
        assert_eq!(got(unit(w(), Unit::Rows)), vec![1.0, 0.0, 4.0 / r, 1.0 / r]);
    }
}
