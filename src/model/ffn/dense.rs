//! Feed-forward branch of the kinds in [`crate::model::ffn::kinds`]: GLU with SiLU gate (default) or
//! GELU MLP. No biases.
//!
//! nGPT (the recipe's `hypersphere`) scales the GLU's pre-activations by a learnable
//! `s_uv ∈ ℝ^{2·d_ff}` times `√d`: `W_2 (SiLU(s_ν ⊙ x W_1 ·√d) ⊙ (s_u ⊙ x W_3 ·√d))`, so that the
//! dot products of unit vectors (`~1/√d`) reach SiLU's non-linear range (NVIDIA's reference
//! code: `uv = suv·√n_embd ⊙ c_fc(h)`, `u` its first half, `ν` the SiLU'd second).

use crate::init::{Init, ParamBuilder};
use crate::kernels::{self, Precision};
use crate::model::base::compute::Compute;
use crate::model::base::lora::{Lora, LoraPlan, LoraTarget, adapted};
use crate::model::base::names::child;
use crate::model::ffn::kinds::FfnKind;
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::{gelu, silu};

/// GLU: `W_2 (SiLU(x W_1) ⊙ x W_3)`; MLP: `W_2 GELU(x W_1)` (then `w3` is absent).
#[derive(Module, Debug)]
pub struct DenseFfn {
    pub w1: Param<Tensor<2>>,
    pub w3: Option<Param<Tensor<2>>>,
    pub w2: Param<Tensor<2>>,
    /// nGPT's `s_uv` `[2·d_ff]`: `s_u` (on `x W_3`) then `s_ν` (on `x W_1`), stored; used times
    /// `suv_factor`.
    pub suv: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub suv_factor: f64,
    /// LoRA adapters of `W_1`, `W_3`, `W_2`, when `[model.lora]` adapts them.
    pub lora_w1: Option<Lora>,
    pub lora_w3: Option<Lora>,
    pub lora_w2: Option<Lora>,
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
    /// nGPT's `s_uv`, when the recipe lives on the hypersphere (GLU only).
    pub suv: Option<crate::recipe::Scaled>,
    /// The projections LoRA adapts, when it does.
    pub lora: Option<LoraPlan>,
}

impl DenseFfn {
    pub fn new(s: &FfnShape, b: &mut ParamBuilder<'_>, prefix: &str) -> anyhow::Result<Self> {
        let n_in = Init::Normal { std: s.std * s.init_in };
        let n_out = Init::Normal { std: s.std * s.init_out };
        let w1 = b.matrix(&child(prefix, "w1"), [s.d_model, s.d_ff], n_in)?;
        let w3 = s.kind.gated().then(|| b.matrix(&child(prefix, "w3"), [s.d_model, s.d_ff], n_in)).transpose()?;
        let w2 = b.matrix(&child(prefix, "w2"), [s.d_ff, s.d_model], n_out)?;
        anyhow::ensure!(
            s.suv.is_none() || s.kind.gated(),
            "nGPT's s_uv scales the two GLU pre-activations; set model.ffn = \"glu\""
        );
        let suv = s.suv.map(|v| b.vector(&child(prefix, "suv"), 2 * s.d_ff, Init::Constant(v.stored))).transpose()?;
        // The reference code's `suv · √n_embd`.
        let suv_factor = s.suv.map_or(1.0, |v| v.factor * (s.d_model as f64).sqrt());
        let l = s.lora.as_ref();
        let (d, ff) = (s.d_model, s.d_ff);
        let lora_w1 = LoraPlan::adapter(l, LoraTarget::W1, [d, ff], b, prefix)?;
        let lora_w3 = if s.kind.gated() { LoraPlan::adapter(l, LoraTarget::W3, [d, ff], b, prefix)? } else { None };
        let lora_w2 = LoraPlan::adapter(l, LoraTarget::W2, [ff, d], b, prefix)?;
        Ok(Self { w1, w3, w2, suv, suv_factor, lora_w1, lora_w3, lora_w2 })
    }

    /// `[B, T, d]` → `[B, T, d]`; the matmuls and the hidden activations in `c.precision`, the
    /// GLU gate by the fused SwiGLU kernel where `c.kernels` fuses in f32.
    pub fn forward(&self, x: Tensor<3>, c: &Compute) -> Tensor<3> {
        let (p, k) = (c.precision, c.kernels);
        let project = |x: Tensor<3>, w: &Param<Tensor<2>>, l: &Option<Lora>| adapted(x, w, l, p, k);
        let (l1, l3, l2) = (&self.lora_w1, &self.lora_w3, &self.lora_w2);
        if let (Some(suv), Some(w3)) = (&self.suv, &self.w3) {
            let s = p.compute(suv.val() * self.suv_factor);
            let ff = s.dims()[0] / 2;
            let (s_u, s_nu) = (s.clone().narrow(0, 0, ff).unsqueeze::<3>(), s.narrow(0, ff, ff).unsqueeze::<3>());
            let (u, nu) = (project(x.clone(), w3, l3) * s_u, project(x, &self.w1, l1) * s_nu);
            let hidden = if k.fuse(&u) && p == Precision::F32 { kernels::swiglu(nu, u) } else { silu(nu) * u };
            return project(hidden, &self.w2, l2);
        }
        let hidden = match &self.w3 {
            Some(w3) if k.fuse(&x) && p == Precision::F32 => {
                kernels::swiglu(project(x.clone(), &self.w1, l1), project(x, w3, l3))
            }
            Some(w3) => silu(project(x.clone(), &self.w1, l1)) * project(x, w3, l3),
            None => gelu(project(x, &self.w1, l1)),
        };
        project(hidden, &self.w2, l2)
    }
}
