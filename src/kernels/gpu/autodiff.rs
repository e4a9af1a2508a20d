//! The GPU norms on `Autodiff<Cube>`: the forward keeps its inputs (no statistics: the
//! backward kernel recomputes them from `x`, one more read of the row), and the backward
//! computes each tracked input's gradient: `∂x` and `∂v` by their kernels, `∂γ`, `∂β` and
//! `∂λ` as sums of per-element terms by burn's reductions.

use super::extension::GpuNorms;
use super::spec::{Root, RowNorm};
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, AutodiffBackend, Cube, TensorMetadata};
use burn::tensor::Shape;

/// A tensor on the GPU backend (under autodiff: its inner value).
type Gpu = FloatTensor<Cube>;

/// One input's gradient from the state and the upstream gradient.
type Gradient = fn(&RowNormState, Gpu) -> Gpu;

/// A backward piece: `(dy, x, gain, lambda, v, n)` to its output.
type Piece = fn(Gpu, Gpu, Gpu, Gpu, Gpu, RowNorm) -> Gpu;

/// What the backward keeps: the inputs, and the shift's length (its values are not needed).
#[derive(Clone, Debug)]
struct RowNormState {
    x: Gpu,
    gain: Gpu,
    shift_len: usize,
    lambda: Gpu,
    v: Gpu,
    n: RowNorm,
}

impl RowNormState {
    /// `[1]` holding `value`, on `x`'s device and in its type.
    fn constant(&self, value: f32) -> Gpu {
        let device = self.x.device();
        Cube::float_full(Shape::new([1]), value.into(), &device, self.x.dtype().into())
    }

    /// `Σ_rows t` as the length of the parameter: `[d]`, or `[1]` for a scalar one.
    fn column_sums(&self, t: Gpu, len: usize) -> Gpu {
        if len == 1 {
            return Cube::float_reshape(Cube::float_sum(t), Shape::new([1]));
        }
        let shape = self.x.shape();
        let d = shape[shape.num_dims() - 1];
        let rows = Cube::float_reshape(t, Shape::new([shape.num_elements() / d, d]));
        Cube::float_reshape(Cube::float_sum_dim(rows, 0), Shape::new([d]))
    }

    fn dx(&self, dy: Gpu) -> Gpu {
        let s = self.clone();
        Cube::row_norm_dx(dy, s.x, s.gain, s.lambda, s.v, s.n)
    }

    /// `∂γ = Σ_rows ∂y ⊙ φ(s c)`: the norm with a unit gain and no shift, times `∂y`.
    fn d_gain(&self, dy: Gpu) -> Gpu {
        let s = self.clone();
        let (one, zero) = (self.constant(1.0), self.constant(0.0));
        let unit = Cube::row_norm(s.x, one, zero, s.lambda, s.v, s.n);
        self.column_sums(Cube::float_mul(dy, unit), self.gain.shape().num_elements())
    }

    fn d_lambda(&self, dy: Gpu) -> Gpu {
        let s = self.clone();
        let terms = Cube::row_norm_lambda_terms(dy, s.x, s.gain, s.lambda, s.v, s.n);
        Cube::float_reshape(Cube::float_sum(terms), Shape::new([1]))
    }

    fn dv(&self, dy: Gpu) -> Gpu {
        let s = self.clone();
        Cube::row_norm_dv(dy, s.x, s.gain, s.lambda, s.v, s.n)
    }
}

#[derive(Debug)]
struct RowNormBackward;

impl Backward<Cube, 5> for RowNormBackward {
    type State = RowNormState;

    fn backward(self, ops: Ops<RowNormState, 5>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<Cube>(&ops.node);
        let s = &ops.state;
        let [x, gain, shift, lambda, v] = ops.parents;
        let wanted: [(_, Gradient); 5] = [
            (x, RowNormState::dx),
            (gain, RowNormState::d_gain),
            (shift, |s, dy| s.column_sums(dy, s.shift_len)),
            (lambda, RowNormState::d_lambda),
            (v.filter(|_| s.n.root == Root::Given), RowNormState::dv),
        ];
        for (node, gradient) in wanted {
            if let Some(node) = node {
                grads.register::<Cube>(node.id, gradient(s, dy.clone()));
            }
        }
    }
}

/// A backward piece on `Autodiff<Cube>`: computed on the inner tensors, not differentiated
/// again (no second derivatives through the norms).
fn constant<C: CheckpointStrategy>(
    f: Piece,
    [a, b, c, d, e]: [FloatTensor<Autodiff<Cube, C>>; 5],
    n: RowNorm,
) -> FloatTensor<Autodiff<Cube, C>> {
    let inner = Autodiff::<Cube, C>::inner;
    Autodiff::<Cube, C>::from_inner(f(inner(a), inner(b), inner(c), inner(d), inner(e), n))
}

impl<C: CheckpointStrategy> GpuNorms for Autodiff<Cube, C> {
    fn row_norm(
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), gain.node(), shift.node(), lambda.node(), v.node()];
        let prep = RowNormBackward.prepare::<C>(nodes).compute_bound().stateful();
        let [x, gain, shift, lambda, v] = [x, gain, shift, lambda, v].map(|t| t.primitive().clone());
        let y = Cube::row_norm(x.clone(), gain.clone(), shift.clone(), lambda.clone(), v.clone(), n);
        match prep {
            OpsKind::Tracked(prep) => {
                let shift_len = shift.shape().num_elements();
                prep.finish(RowNormState { x, gain, shift_len, lambda, v, n }, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn row_norm_dx(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        constant::<C>(Cube::row_norm_dx, [dy, x, gain, lambda, v], n)
    }

    fn row_norm_lambda_terms(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        constant::<C>(Cube::row_norm_lambda_terms, [dy, x, gain, lambda, v], n)
    }

    fn row_norm_dv(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        v: FloatTensor<Self>,
        n: RowNorm,
    ) -> FloatTensor<Self> {
        constant::<C>(Cube::row_norm_dv, [dy, x, gain, lambda, v], n)
    }
}
