//! The GPU attention on `Autodiff<Cube>`: the forward keeps `q`, `k`, `v`, the output and
//! each query row's log-sum-exp (O(T) beyond the inputs, not the T × S probabilities); the
//! backward forms `Δ = Σ_f ∂O ⊙ O` by burn's reduction, then `∂q` and `(∂k, ∂v)` by their
//! kernels ([`super::attention`]).

use super::extension::GpuAttention;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, AutodiffBackend, Cube};

/// A tensor on the GPU backend (under autodiff: its inner value).
type Gpu = FloatTensor<Cube>;

/// What the backward keeps.
#[derive(Clone, Debug)]
struct AttentionState {
    q: Gpu,
    k: Gpu,
    v: Gpu,
    out: Gpu,
    lse: Gpu,
    scale: f64,
}

#[derive(Debug)]
struct AttentionBackward;

impl Backward<Cube, 3> for AttentionBackward {
    type State = AttentionState;

    fn backward(self, ops: Ops<AttentionState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let d_o = grads.consume::<Cube>(&ops.node);
        let AttentionState { q, k, v, out, lse, scale } = ops.state;
        let delta = Cube::float_sum_dim(Cube::float_mul(d_o.clone(), out), 3);
        let [nq, nk, nv] = ops.parents;
        if let Some(node) = nq {
            let dq =
                Cube::attention_dq(q.clone(), k.clone(), v.clone(), d_o.clone(), lse.clone(), delta.clone(), scale);
            grads.register::<Cube>(node.id, dq);
        }
        if nk.is_some() || nv.is_some() {
            let (dk, dv) = Cube::attention_dkv(q, k, v, d_o, lse, delta, scale);
            for (node, grad) in [(nk, dk), (nv, dv)] {
                if let Some(node) = node {
                    grads.register::<Cube>(node.id, grad);
                }
            }
        }
    }
}

/// An autodiff tensor's inner value.
fn inner<C: CheckpointStrategy>(t: FloatTensor<Autodiff<Cube, C>>) -> Gpu {
    Autodiff::<Cube, C>::inner(t)
}

/// A value computed on the inner tensors, a constant to autodiff (no second derivatives).
fn constant<C: CheckpointStrategy>(t: Gpu) -> FloatTensor<Autodiff<Cube, C>> {
    Autodiff::<Cube, C>::from_inner(t)
}

impl<C: CheckpointStrategy> GpuAttention for Autodiff<Cube, C> {
    fn attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, scale: f64) -> FloatTensor<Self> {
        let prep = AttentionBackward.prepare::<C>([q.node(), k.node(), v.node()]).compute_bound().stateful();
        let [q, k, v] = [q, k, v].map(|t| t.primitive().clone());
        let (out, lse) = Cube::attention_with_lse(q.clone(), k.clone(), v.clone(), scale);
        match prep {
            OpsKind::Tracked(prep) => prep.finish(AttentionState { q, k, v, out: out.clone(), lse, scale }, out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn attention_with_lse(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (out, lse) = Cube::attention_with_lse(inner::<C>(q), inner::<C>(k), inner::<C>(v), scale);
        (constant::<C>(out), constant::<C>(lse))
    }

    fn attention_dq(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        d_o: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        let [q, k, v, d_o, lse, delta] = [q, k, v, d_o, lse, delta].map(inner::<C>);
        constant::<C>(Cube::attention_dq(q, k, v, d_o, lse, delta, scale))
    }

    fn attention_dkv(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        d_o: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [q, k, v, d_o, lse, delta] = [q, k, v, d_o, lse, delta].map(inner::<C>);
        let (dk, dv) = Cube::attention_dkv(q, k, v, d_o, lse, delta, scale);
        (constant::<C>(dk), constant::<C>(dv))
    }
}
