//! [`GpuGemm`] on `Autodiff<Cube>`: `C = op_a(A) · op_b(B)` keeps `A` and `B`, and its
//! backward is two more products of the same op with the transposes chosen so that no operand
//! is copied:
//!
//! ```text
//! ∂A = ∂C · op_b(B)ᵀ   (A not transposed)      ∂A = op_b(B) · ∂Cᵀ   (A transposed)
//! ∂B = op_a(A)ᵀ · ∂C   (B not transposed)      ∂B = ∂Cᵀ · op_a(A)   (B transposed)
//! ```

use super::gemm::GpuGemm;
use super::transposes::Transposes;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Cube};

/// A tensor on the GPU backend (under autodiff: its inner value).
type Gpu = FloatTensor<Cube>;

#[derive(Clone, Debug)]
struct GemmState {
    a: Gpu,
    b: Gpu,
    t: Transposes,
}

#[derive(Debug)]
struct GemmBackward;

/// `∂A` from the upstream `dc` (the module table).
fn grad_a(dc: Gpu, b: Gpu, t: Transposes) -> Gpu {
    if t.a {
        Cube::gemm(b, dc, Transposes { a: t.b, b: true })
    } else {
        Cube::gemm(dc, b, Transposes { a: false, b: !t.b })
    }
}

/// `∂B` from the upstream `dc` (the module table).
fn grad_b(dc: Gpu, a: Gpu, t: Transposes) -> Gpu {
    if t.b {
        Cube::gemm(dc, a, Transposes { a: true, b: t.a })
    } else {
        Cube::gemm(a, dc, Transposes { a: !t.a, b: false })
    }
}

impl Backward<Cube, 2> for GemmBackward {
    type State = GemmState;

    fn backward(self, ops: Ops<GemmState, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dc = grads.consume::<Cube>(&ops.node);
        let GemmState { a, b, t } = ops.state;
        let [na, nb] = ops.parents;
        if let Some(node) = na {
            grads.register::<Cube>(node.id, grad_a(dc.clone(), b, t));
        }
        if let Some(node) = nb {
            grads.register::<Cube>(node.id, grad_b(dc, a, t));
        }
    }
}

impl<C: CheckpointStrategy> GpuGemm for Autodiff<Cube, C> {
    fn gemm(a: FloatTensor<Self>, b: FloatTensor<Self>, t: Transposes) -> FloatTensor<Self> {
        let prep = GemmBackward.prepare::<C>([a.node(), b.node()]).compute_bound().stateful();
        let [a, b] = [a, b].map(|x| x.primitive().clone());
        let c = Cube::gemm(a.clone(), b.clone(), t);
        match prep {
            OpsKind::Tracked(prep) => prep.finish(GemmState { a, b, t }, c),
            OpsKind::UnTracked(prep) => prep.finish(c),
        }
    }
}
