//! The row norms as CubeCL kernels on burn's CubeCL backend (wgpu, vulkan, cuda): one cube
//! per row, its units striding over the row's `d` features; row sums by a tree in shared
//! memory (no plane operations, so lavapipe runs them too). The formulas are
//! [`super::RowNorm`]'s.
//!
//! - forward: the row's statistics, then `y_j = γ_j φ(λ c_j w) + β_j` (one launch)
//! - backward: the statistics again, `Σ g` and `Σ g c` by two sums, then `∂x` (one launch);
//!   the same kernel writes `g c w` (the terms of `∂λ`) or the row's `∂v` instead
//!
//! # Shapes
//! `x`, `y`, `∂y`, `∂x`: rows × `d`, contiguous; `gain`, `shift`: `d` or 1 (read with step
//! 0); `λ`: 1; `v`: one per row (`Given`) or 1 (unused).

use super::reduce::cube_sum;
use super::rows::{empty, grid, row_index, units};
use super::spec::{Root, RowNorm};
use burn::backend::cubecl::dtype_to_storage_type;
use burn::tensor::DType;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

/// The comptime shape of a row norm: which statistic, and what the output is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Spec {
    centre: bool,
    root: Root,
    abs_mean: bool,
    tanh: bool,
}

impl Spec {
    fn of(n: &RowNorm) -> Spec {
        Spec { centre: n.centre, root: n.root, abs_mean: n.abs_mean, tanh: n.tanh }
    }

    /// Whether the row mean enters (the centred numerator, the variance or `|μ|`).
    fn needs_mean(self) -> bool {
        self.centre || self.abs_mean || self.root == Root::Variance
    }
}

/// What the backward launch writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Out {
    /// `∂x`, rows × `d`.
    Dx,
    /// `g c w` per element, whose sum is `∂λ`.
    LambdaTerms,
    /// `∂v`, one per row.
    Dv,
}

/// The row layout: `rows` rows of `d`, each parameter read with step 0 (a scalar) or 1.
#[derive(CubeLaunch, CubeType)]
struct RowShape {
    rows: u32,
    d: u32,
    gain_step: u32,
    shift_step: u32,
}

/// The norm's constants: `D = κ √(stat + ε)`.
#[derive(CubeLaunch, CubeType)]
struct Constants {
    kappa: f32,
    eps: f32,
}

/// `Σ_j (x_j − m)` or `Σ_j (x_j − m)²` over the row starting at `base`.
#[cube]
fn row_sum<F: Float>(
    x: &Tensor<F>,
    base: usize,
    d: usize,
    m: F,
    shared: &mut Shared<[F]>,
    #[comptime] square: bool,
) -> F {
    let mut acc = F::new(0.0);
    let mut j = UNIT_POS as usize;
    while j < d {
        let c = x[base + j] - m;
        if square {
            acc += c * c;
        } else {
            acc += c;
        }
        j += CUBE_DIM as usize;
    }
    cube_sum::<F>(shared, acc)
}

/// The row's `(μ, √(stat + ε), w = 1/D)`; μ is 0 where the spec does not need it, the root 1
/// for [`Root::None`].
#[cube]
#[allow(clippy::too_many_arguments)]
fn row_stats<F: Float>(
    x: &Tensor<F>,
    v: &Tensor<F>,
    row: usize,
    d: usize,
    kappa: F,
    eps: F,
    shared: &mut Shared<[F]>,
    #[comptime] spec: Spec,
) -> (F, F, F) {
    let base = row * d;
    let inv_d = F::new(1.0) / F::cast_from(d as u32);
    let zero = F::new(0.0);
    let mut mean = zero;
    if comptime!(spec.needs_mean()) {
        mean = row_sum::<F>(x, base, d, zero, shared, false) * inv_d;
    }
    let mut root = F::new(1.0);
    let mut den = F::new(1.0);
    if comptime!(spec.root == Root::Variance) {
        root = (row_sum::<F>(x, base, d, mean, shared, true) * inv_d + eps).sqrt();
        den = kappa * root;
    }
    if comptime!(spec.root == Root::MeanSquare) {
        root = (row_sum::<F>(x, base, d, zero, shared, true) * inv_d + eps).sqrt();
        den = kappa * root;
    }
    if comptime!(spec.root == Root::Given) {
        root = (v[row] + eps).sqrt();
        den = kappa * root;
    }
    if comptime!(spec.abs_mean) {
        den += mean.abs();
    }
    (mean, root, F::new(1.0) / den)
}

/// `y = γ ⊙ φ(λ (x − m) w) + β`, one cube per row.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn forward_kernel<F: Float>(
    x: &Tensor<F>,
    gain: &Tensor<F>,
    shift: &Tensor<F>,
    lambda: &Tensor<F>,
    v: &Tensor<F>,
    out: &mut Tensor<F>,
    shape: RowShape,
    constants: Constants,
    #[comptime] spec: Spec,
    #[comptime] units: usize,
    #[define(F)] _dtype: ElemType,
) {
    let d = shape.d as usize;
    let gain_step = shape.gain_step as usize;
    let shift_step = shape.shift_step as usize;
    let row = row_index();
    if row >= shape.rows as usize {
        terminate!();
    }
    let mut shared = Shared::<[F]>::new_slice(units);
    let kappa = F::cast_from(constants.kappa);
    let eps = F::cast_from(constants.eps);
    let (mean, _root, w) = row_stats::<F>(x, v, row, d, kappa, eps, &mut shared, spec);
    let mut m = F::new(0.0);
    if comptime!(spec.centre) {
        m = mean;
    }
    let scale = lambda[0] * w;
    let base = row * d;
    let mut j = UNIT_POS as usize;
    while j < d {
        let mut phi = scale * (x[base + j] - m);
        if comptime!(spec.tanh) {
            phi = phi.tanh();
        }
        out[base + j] = gain[j * gain_step] * phi + shift[j * shift_step];
        j += CUBE_DIM as usize;
    }
}

/// `g_j = ∂y_j γ_j φ′(u_j)` with `u_j = s (x_j − m)`.
#[cube]
fn upstream<F: Float>(dy: F, gain: F, u: F, #[comptime] tanh: bool) -> F {
    let mut g = dy * gain;
    if tanh {
        let t = u.tanh();
        g *= F::new(1.0) - t * t;
    }
    g
}

/// `(Σ_j g_j, Σ_j g_j c_j)` over the row at `base` (the first 0 unless the norm centres).
#[cube]
#[allow(clippy::too_many_arguments)]
fn upstream_sums<F: Float>(
    dy: &Tensor<F>,
    x: &Tensor<F>,
    gain: &Tensor<F>,
    base: usize,
    d: usize,
    gain_step: usize,
    m: F,
    s: F,
    shared: &mut Shared<[F]>,
    #[comptime] spec: Spec,
) -> (F, F) {
    let mut acc_g = F::new(0.0);
    let mut acc_gc = F::new(0.0);
    let mut j = UNIT_POS as usize;
    while j < d {
        let c = x[base + j] - m;
        let g = upstream::<F>(dy[base + j], gain[j * gain_step], s * c, spec.tanh);
        acc_g += g;
        acc_gc += g * c;
        j += CUBE_DIM as usize;
    }
    let mut sum_g = F::new(0.0);
    if comptime!(spec.centre) {
        sum_g = cube_sum::<F>(shared, acc_g);
    }
    (sum_g, cube_sum::<F>(shared, acc_gc))
}

/// `∂x`, `g c w` or `∂v` of the row norm (see [`Out`]), one cube per row.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn backward_kernel<F: Float>(
    dy: &Tensor<F>,
    x: &Tensor<F>,
    gain: &Tensor<F>,
    lambda: &Tensor<F>,
    v: &Tensor<F>,
    out: &mut Tensor<F>,
    shape: RowShape,
    constants: Constants,
    #[comptime] spec: Spec,
    #[comptime] what: Out,
    #[comptime] units: usize,
    #[define(F)] _dtype: ElemType,
) {
    let d = shape.d as usize;
    let gain_step = shape.gain_step as usize;
    let row = row_index();
    if row >= shape.rows as usize {
        terminate!();
    }
    let mut shared = Shared::<[F]>::new_slice(units);
    let kappa = F::cast_from(constants.kappa);
    let eps = F::cast_from(constants.eps);
    let (mean, root, w) = row_stats::<F>(x, v, row, d, kappa, eps, &mut shared, spec);
    let mut m = F::new(0.0);
    if comptime!(spec.centre) {
        m = mean;
    }
    let lam = lambda[0];
    let s = lam * w;
    let base = row * d;
    let inv_d = F::new(1.0) / F::cast_from(d as u32);
    let (sum_g, sum_gc) = upstream_sums::<F>(dy, x, gain, base, d, gain_step, m, s, &mut shared, spec);
    let mean_g = sum_g * inv_d;
    // ∂D, and ∂D/∂x_j = a x_j + b.
    let d_den = F::new(0.0) - w * w * lam * sum_gc;
    let (a, b) = statistic_slope::<F>(mean, root, kappa, inv_d, spec);
    if comptime!(what == Out::Dv) {
        if UNIT_POS == 0 {
            out[row] = d_den * kappa / (F::new(2.0) * root);
        }
    } else {
        let mut j = UNIT_POS as usize;
        while j < d {
            let xj = x[base + j];
            let c = xj - m;
            let g = upstream::<F>(dy[base + j], gain[j * gain_step], s * c, spec.tanh);
            if comptime!(what == Out::Dx) {
                out[base + j] = s * (g - mean_g) + d_den * (a * xj + b);
            } else {
                out[base + j] = g * c * w;
            }
            j += CUBE_DIM as usize;
        }
    }
}

/// `(a, b)` with `∂D/∂x_j = a x_j + b`: zero for a statistic that is not the row's own.
#[cube]
fn statistic_slope<F: Float>(mean: F, root: F, kappa: F, inv_d: F, #[comptime] spec: Spec) -> (F, F) {
    let mut a = F::new(0.0);
    let mut b = F::new(0.0);
    if comptime!(spec.root == Root::Variance) {
        a = kappa * inv_d / root;
        b = F::new(0.0) - a * mean;
    }
    if comptime!(spec.root == Root::MeanSquare) {
        a = kappa * inv_d / root;
    }
    if comptime!(spec.abs_mean) {
        let sign = select(mean > F::new(0.0), F::new(1.0), select(mean < F::new(0.0), F::new(-1.0), F::new(0.0)));
        b += sign * inv_d;
    }
    (a, b)
}

/// The step a parameter of length 1 or `d` is read with.
fn step(p: &CubeTensor) -> u32 {
    u32::from(p.meta.shape().num_elements() != 1)
}

fn shape_arg(rows: usize, d: usize, gain: &CubeTensor, shift: &CubeTensor) -> RowShapeLaunch {
    RowShapeLaunch::new(rows as u32, d as u32, step(gain), step(shift))
}

fn constants(n: &RowNorm) -> ConstantsLaunch {
    ConstantsLaunch::new(n.kappa as f32, n.eps as f32)
}

/// Rows and width of a row-norm input.
fn rows_and_width(x: &CubeTensor) -> (usize, usize) {
    let shape = x.meta.shape();
    let d = *shape.last().expect("a norm input has a feature axis");
    (shape.num_elements() / d.max(1), d)
}

/// The forward of `n` (see [`forward_kernel`]).
pub fn forward(
    x: CubeTensor,
    gain: CubeTensor,
    shift: CubeTensor,
    lambda: CubeTensor,
    v: CubeTensor,
    n: RowNorm,
) -> CubeTensor {
    let [x, gain, shift, lambda, v] = [x, gain, shift, lambda, v].map(into_contiguous);
    let (rows, d) = rows_and_width(&x);
    let out = empty(&x, x.meta.shape().clone());
    let units = units(&x, d);
    let dims = shape_arg(rows, d, &gain, &shift);
    let dtype: DType = x.dtype;
    forward_kernel::launch(
        &x.client.clone(),
        grid(rows),
        CubeDim::new_1d(units),
        x.into_tensor_arg(),
        gain.into_tensor_arg(),
        shift.into_tensor_arg(),
        lambda.into_tensor_arg(),
        v.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        dims,
        constants(&n),
        Spec::of(&n),
        units as usize,
        dtype_to_storage_type(dtype),
    );
    out
}

/// The backward pieces of `n` (see [`backward_kernel`]): `∂x` or the `∂λ` terms (shaped as
/// `x`), or `∂v` (shaped as `v`).
#[allow(clippy::too_many_arguments)]
pub fn backward(
    dy: CubeTensor,
    x: CubeTensor,
    gain: CubeTensor,
    lambda: CubeTensor,
    v: CubeTensor,
    n: RowNorm,
    what: Out,
) -> CubeTensor {
    let [dy, x, gain, lambda, v] = [dy, x, gain, lambda, v].map(into_contiguous);
    let (rows, d) = rows_and_width(&x);
    let shape = if what == Out::Dv { v.meta.shape().clone() } else { x.meta.shape().clone() };
    let out = empty(&x, shape);
    let units = units(&x, d);
    // The backward reads no shift: its step is unused.
    let dims = shape_arg(rows, d, &gain, &gain);
    let dtype: DType = x.dtype;
    backward_kernel::launch(
        &x.client.clone(),
        grid(rows),
        CubeDim::new_1d(units),
        dy.into_tensor_arg(),
        x.into_tensor_arg(),
        gain.into_tensor_arg(),
        lambda.into_tensor_arg(),
        v.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        dims,
        constants(&n),
        Spec::of(&n),
        what,
        units as usize,
        dtype_to_storage_type(dtype),
    );
    out
}
