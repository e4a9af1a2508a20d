//! Feed-forward branch: GLU with SiLU gate (default) or GELU MLP. No biases.

use super::compute::Compute;
use super::config::FfnKind;
use super::linear::project;
use super::names::child;
use crate::init::{Init, ParamBuilder};
use crate::kernels::{self, Precision};
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::{gelu, silu};

/// GLU: `W_2 (SiLU(x W_1) ⊙ x W_3)`; MLP: `W_2 GELU(x W_1)` (then `w3` is absent).
#[derive(Module, Debug)]
pub struct FeedForward {
    pub w1: Param<Tensor<2>>,
    pub w3: Option<Param<Tensor<2>>>,
    pub w2: Param<Tensor<2>>,
}

/// Sizes and init scales for one feed-forward block.
pub struct FfnShape {
    pub kind: FfnKind,
    pub d_model: usize,
    pub d_ff: usize,
    pub std: f64,
    /// Multiplies the std of `W_1`, `W_3` (DeepNet's β).
    pub init_in: f64,
    /// Multiplies the std of `W_2`.
    pub init_out: f64,
}

impl FeedForward {
    pub fn new(s: &FfnShape, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let n_in = Init::Normal { std: s.std * s.init_in };
        let n_out = Init::Normal { std: s.std * s.init_out };
        let w1 = b.matrix(&child(prefix, "w1"), [s.d_model, s.d_ff], n_in)?;
        let w3 = match s.kind {
            FfnKind::Glu => Some(b.matrix(&child(prefix, "w3"), [s.d_model, s.d_ff], n_in)?),
            FfnKind::Mlp => None,
        };
        let w2 = b.matrix(&child(prefix, "w2"), [s.d_ff, s.d_model], n_out)?;
        Ok(Self { w1, w3, w2 })
    }

    /// `[B, T, d]` → `[B, T, d]`; the matmuls and the hidden activations in `c.precision`, the
    /// GLU gate by the fused SwiGLU kernel where `c.kernels` fuses in f32.
    pub fn forward(&self, x: Tensor<3>, c: &Compute) -> Tensor<3> {
        let (p, k) = (c.precision, c.kernels);
        let project = |x: Tensor<3>, w: &Param<Tensor<2>>| project(x, w, p, k);
        let hidden = match &self.w3 {
            Some(w3) if k.fuse(&x) && p == Precision::F32 => {
                kernels::swiglu(project(x.clone(), &self.w1), project(x, w3))
            }
            Some(w3) => silu(project(x.clone(), &self.w1)) * project(x, w3),
            None => gelu(project(x, &self.w1)),
        };
        project(hidden, &self.w2)
    }
}
