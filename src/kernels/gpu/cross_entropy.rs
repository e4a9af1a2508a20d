//! Cross-entropy over the vocabulary as one CubeCL kernel per chunk of rows, for the chunked
//! loss ([`crate::model::chunked_loss`]): from a chunk's raw logits `u` (`[n, V]`) and targets
//! it writes each row's loss terms and, in the same launch, the logits' gradient, where the
//! composite path runs a max, a shift, an exponential, a sum, a logarithm, a gather, a second
//! exponential, a scatter and a division over the `[n, V]` buffer. One cube per row, its units
//! striding over the vocabulary:
//!
//! 1. each unit keeps a running maximum `m` and `s = Σ exp(ℓ − m)` of its share of the row
//!    (the online softmax), with `ℓ = c·tanh(u/c)` under a soft-cap, else `ℓ = u`; the cube
//!    combines them into `log Z = M + log Σ_units s·exp(m − M)`, `M` the row maximum;
//! 2. the row's `(log Z − ℓ_t, log²Z)`, zero where the target is not counted;
//! 3. with gradients, `∂ℓ_j = (p_j (1 + 2c_z log Z) − [j = t]) · k / N` with
//!    `p_j = exp(ℓ_j − log Z)`, `k` 1 for a counted row and 0 otherwise, `N` the counted rows
//!    of the whole loss and `c_z` the z-loss coefficient; under a soft-cap times
//!    `1 − (ℓ_j/c)²`, the cap's derivative.
//!
//! The gradient is an output, not a backward: the chunked loss computes it off the autodiff
//! tape, so the op has no backward of its own, and on `Autodiff<Cube>` it computes on the inner
//! values and returns untracked results.
//!
//! # Shapes
//! - `logits`: `[n, V]` f32, `targets`: `[n]` f32 holding token ids (exact below 2²⁴), −1 for
//!   a row not counted; `inv_count`: `[1]`, `1/N`
//! - output: `[n, 2]` rows `(log Z − ℓ_t, log²Z)`, and with gradients `∂ℓ` `[n, V]`

use super::reduce::{cube_max, cube_sum};
use super::rows::{empty, grid, row_index, units};
use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, AutodiffBackend, Cube};
use burn::tensor::Shape;
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

/// What shapes the loss besides the logits: the final soft-cap `c` (`ℓ = c·tanh(u/c)`) and
/// the z-loss coefficient `c_z` (0 without one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossSpec {
    pub softcap: Option<f64>,
    pub z_loss: f64,
}

/// The chunk's loss terms, with or without the logits' gradient, as a burn backend extension.
#[burn::backend::backend_extension(Autodiff, Cube, Fusion)]
pub trait GpuCrossEntropy: burn::backend::Backend {
    /// Each row's `(log Z − ℓ_t, log²Z)`, `[n, 2]`.
    #[fusion(meta = row_terms)]
    fn cross_entropy_rows(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        inv_count: FloatTensor<Self>,
        spec: LossSpec,
    ) -> FloatTensor<Self>;
    /// The row terms and the logits' gradient `∂ℓ` (`[n, V]`).
    #[fusion(meta = terms_and_gradient)]
    fn cross_entropy_grad(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        inv_count: FloatTensor<Self>,
        spec: LossSpec,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

fn row_terms(logits: &TensorSpec, _: &TensorSpec, _: &TensorSpec, _: &LossSpec) -> TensorSpec {
    let [n, _] = logits.shape.dims::<2>();
    TensorSpec::new(Shape::new([n, 2]), logits.dtype)
}

fn terms_and_gradient(
    logits: &TensorSpec,
    targets: &TensorSpec,
    inv_count: &TensorSpec,
    spec: &LossSpec,
) -> (TensorSpec, TensorSpec) {
    (row_terms(logits, targets, inv_count, spec), logits.clone())
}

impl GpuCrossEntropy for CubeBackend {
    fn cross_entropy_rows(
        logits: CubeTensor,
        targets: CubeTensor,
        inv_count: CubeTensor,
        spec: LossSpec,
    ) -> CubeTensor {
        launch(logits, targets, inv_count, spec, false).0
    }

    fn cross_entropy_grad(
        logits: CubeTensor,
        targets: CubeTensor,
        inv_count: CubeTensor,
        spec: LossSpec,
    ) -> (CubeTensor, CubeTensor) {
        let (rows, grad) = launch(logits, targets, inv_count, spec, true);
        (rows, grad.expect("a launch with gradients writes them"))
    }
}

/// On the autodiff backend: the inner values' results, untracked (the gradient is an output).
impl<C: burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy> GpuCrossEntropy for Autodiff<Cube, C> {
    fn cross_entropy_rows(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        inv_count: FloatTensor<Self>,
        spec: LossSpec,
    ) -> FloatTensor<Self> {
        let [l, t, c] = [logits, targets, inv_count].map(Self::inner);
        Self::from_inner(Cube::cross_entropy_rows(l, t, c, spec))
    }

    fn cross_entropy_grad(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        inv_count: FloatTensor<Self>,
        spec: LossSpec,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [l, t, c] = [logits, targets, inv_count].map(Self::inner);
        let (rows, grad) = Cube::cross_entropy_grad(l, t, c, spec);
        (Self::from_inner(rows), Self::from_inner(grad))
    }
}

/// The row layout and the loss's constants.
#[derive(CubeLaunch, CubeType)]
struct Layout {
    rows: u32,
    vocab: u32,
    softcap: f32,
    z_loss: f32,
}

/// `ℓ = c·tanh(u/c)` under a soft-cap, else `u`.
#[cube]
fn capped<F: Float>(u: F, c: F, #[comptime] softcap: bool) -> F {
    let mut l = u;
    if softcap {
        l = c * (u / c).tanh();
    }
    l
}

/// `log Z` of the row at `base`: each unit's online `(m, s)`, combined over the cube.
#[cube]
fn log_partition<F: Float>(
    logits: &Tensor<F>,
    base: usize,
    vocab: usize,
    c: F,
    shared: &mut Shared<[F]>,
    #[comptime] softcap: bool,
) -> F {
    let mut m = F::new(-1.0e30);
    let mut s = F::new(0.0);
    let mut j = UNIT_POS as usize;
    while j < vocab {
        let l = capped::<F>(logits[base + j], c, softcap);
        if l > m {
            s = s * (m - l).exp() + F::new(1.0);
            m = l;
        } else {
            s += (l - m).exp();
        }
        j += CUBE_DIM as usize;
    }
    let top = cube_max::<F>(shared, m);
    let total = cube_sum::<F>(shared, s * (m - top).exp());
    top + total.ln()
}

/// One cube per row: the row's terms, and with `grads` its `∂ℓ` (the module's steps).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn cross_entropy_kernel<F: Float>(
    logits: &Tensor<F>,
    targets: &Tensor<F>,
    inv_count: &Tensor<F>,
    terms: &mut Tensor<F>,
    grad: &mut Tensor<F>,
    layout: Layout,
    #[comptime] softcap: bool,
    #[comptime] grads: bool,
    #[comptime] units: usize,
    #[define(F)] _dtype: ElemType,
) {
    let row = row_index();
    if row >= layout.rows as usize {
        terminate!();
    }
    let vocab = layout.vocab as usize;
    let base = row * vocab;
    let c = F::cast_from(layout.softcap);
    let mut shared = Shared::<[F]>::new_slice(units);
    let log_z = log_partition::<F>(logits, base, vocab, c, &mut shared, softcap);
    let t = targets[row];
    let counted = t >= F::new(0.0);
    let target = select(counted, t, F::new(0.0));
    let k = select(counted, F::new(1.0), F::new(0.0));
    if UNIT_POS == 0 {
        let lt = capped::<F>(logits[base + u32::cast_from(target) as usize], c, softcap);
        terms[row * 2] = (log_z - lt) * k;
        terms[row * 2 + 1] = log_z * log_z * k;
    }
    if grads {
        let factor = k * inv_count[0];
        let z_factor = F::new(1.0) + F::new(2.0) * F::cast_from(layout.z_loss) * log_z;
        let mut j = UNIT_POS as usize;
        while j < vocab {
            let l = capped::<F>(logits[base + j], c, softcap);
            let hit = select(F::cast_from(j as u32) == target, F::new(1.0), F::new(0.0));
            let mut g = ((l - log_z).exp() * z_factor - hit) * factor;
            if softcap {
                let r = l / c;
                g *= F::new(1.0) - r * r;
            }
            grad[base + j] = g;
            j += CUBE_DIM as usize;
        }
    }
}

/// The row terms, and with `grads` the logits' gradient (see [`cross_entropy_kernel`]).
fn launch(
    logits: CubeTensor,
    targets: CubeTensor,
    inv_count: CubeTensor,
    spec: LossSpec,
    grads: bool,
) -> (CubeTensor, Option<CubeTensor>) {
    let [logits, targets, inv_count] = [logits, targets, inv_count].map(into_contiguous);
    let [rows, vocab] = logits.meta.shape().dims::<2>();
    let terms = empty(&logits, Shape::new([rows, 2]));
    // Without gradients the kernel writes none: a one-element stand-in is bound instead.
    let grad = empty(&logits, if grads { Shape::new([rows, vocab]) } else { Shape::new([1]) });
    let units = units(&logits, vocab);
    let layout = LayoutLaunch::new(rows as u32, vocab as u32, spec.softcap.unwrap_or(1.0) as f32, spec.z_loss as f32);
    let dtype = dtype_to_storage_type(logits.dtype);
    cross_entropy_kernel::launch(
        &logits.client.clone(),
        grid(rows),
        CubeDim::new_1d(units),
        logits.into_tensor_arg(),
        targets.into_tensor_arg(),
        inv_count.into_tensor_arg(),
        terms.clone().into_tensor_arg(),
        grad.clone().into_tensor_arg(),
        layout,
        spec.softcap.is_some(),
        grads,
        units as usize,
        dtype,
    );
    (terms, grads.then_some(grad))
}
