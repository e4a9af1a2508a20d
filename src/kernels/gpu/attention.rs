//! Causal attention `O = softmax(s q kᵀ + M) v` as CubeCL kernels that never hold the T × S
//! probabilities: the forward keeps each query row's log-sum-exp `L`, and the backward
//! recomputes `P_ij = exp(s q_i·k_j − L_i)` from it (FlashAttention-2's backward, one row at a
//! time).
//!
//! ```text
//! forward (per query row i, keys in chunks, online softmax):  O_i = Σ_j P_ij v_j,  L_i = m + ln l
//! Δ_i = Σ_f ∂O_if O_if                      (burn's reduction, before the kernels below)
//! dS_ij = P_ij (∂O_i·v_j − Δ_i)
//! ∂q_i = s Σ_j dS_ij k_j                    (one cube per query row)
//! ∂k_j = s Σ_i dS_ij q_i,  ∂v_j = Σ_i P_ij ∂O_i   (one cube per key row)
//! ```
//!
//! Query `i` of `T` sees keys `0 ..= i + S − T` (the `S − T` first keys cached). A cube's
//! units take one key (or query) each per chunk for the scores, then one feature each for the
//! sums over the chunk: the head width `h` is at most the cube's units.
//!
//! # Shapes
//! `q`, `O`, `∂O`, `∂q`: `[B, H, T, h]`; `k`, `v`, `∂k`, `∂v`: `[B, H, S, h]`; `L`, `Δ`:
//! `[B, H, T, 1]`; all contiguous.

use super::reduce::{cube_max, cube_sum};
use super::rows::empty;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::tensor::Shape;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

/// The largest head width the kernels take (a cube's units).
pub const MAX_HEAD: usize = 256;

/// Queries, keys and the head width.
#[derive(CubeLaunch, CubeType)]
struct Dims {
    t: u32,
    s: u32,
    h: u32,
    scale: f32,
}

/// `Σ_f row_f m_{base + f}` over the head width.
#[cube]
fn dot_row<F: Float>(row: &Shared<[F]>, m: &Tensor<F>, base: usize, h: usize) -> F {
    let mut acc = F::new(0.0);
    let mut f = 0;
    while f < h {
        acc += row[f] * m[base + f];
        f += 1;
    }
    acc
}

/// Copies the `h` values at `base` into `row` (unit `f` copies feature `f`).
#[cube]
fn load_row<F: Float>(row: &mut Shared<[F]>, m: &Tensor<F>, base: usize, h: usize) {
    let u = UNIT_POS as usize;
    if u < h {
        row[u] = m[base + u];
    }
}

/// `Σ_x w_x m_{(first + x) h + f}` over the chunk's `len` rows: unit `f`'s share of a sum of
/// rows weighted by the chunk's values.
#[cube]
fn weighted_rows<F: Float>(w: &Shared<[F]>, m: &Tensor<F>, first: usize, len: usize, h: usize) -> F {
    let f = UNIT_POS as usize;
    let mut acc = F::new(0.0);
    let mut x = 0;
    while x < len {
        acc += w[x] * m[(first + x) * h + f];
        x += 1;
    }
    acc
}

/// The rows of a chunk: `remaining`, at most the cube's units.
#[cube]
fn chunk_len(remaining: usize, cube: usize) -> usize {
    select(remaining < cube, remaining, cube)
}

/// The forward, one cube per query row: `O` and `L`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn forward_kernel<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    out: &mut Tensor<F>,
    lse: &mut Tensor<F>,
    dims: Dims,
    #[comptime] units: usize,
    #[define(F)] _dtype: ElemType,
) {
    let t = dims.t as usize;
    let s = dims.s as usize;
    let h = dims.h as usize;
    let i = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let u = UNIT_POS as usize;
    let cube = CUBE_DIM as usize;
    let mut qs = Shared::<[F]>::new_slice(units);
    let mut ps = Shared::<[F]>::new_slice(units);
    let mut red = Shared::<[F]>::new_slice(units);
    load_row::<F>(&mut qs, q, (bh * t + i) * h, h);
    sync_cube();
    let keys = i + s - t + 1;
    let scale = F::cast_from(dims.scale);
    let lowest = F::new(-1.0e30);
    let mut m = lowest;
    let mut l = F::new(0.0);
    let mut acc = F::new(0.0);
    let mut c = 0;
    while c < keys {
        let j = c + u;
        let mut score = lowest;
        if j < keys {
            score = scale * dot_row::<F>(&qs, k, (bh * s + j) * h, h);
        }
        let top = cube_max::<F>(&mut red, score);
        let new_m = select(top > m, top, m);
        let mut p = F::new(0.0);
        if j < keys {
            p = (score - new_m).exp();
        }
        ps[u] = p;
        // `cube_sum`'s barriers also publish `ps`.
        let chunk = cube_sum::<F>(&mut red, p);
        let alpha = (m - new_m).exp();
        l = l * alpha + chunk;
        if u < h {
            acc = acc * alpha + weighted_rows::<F>(&ps, v, bh * s + c, chunk_len(keys - c, cube), h);
        }
        m = new_m;
        sync_cube();
        c += cube;
    }
    if u < h {
        out[(bh * t + i) * h + u] = acc / l;
    }
    if u == 0 {
        lse[bh * t + i] = m + l.ln();
    }
}

/// `(P, dS)` of one query–key pair: `P = exp(s q·k − L)`, `dS = P (∂O·v − Δ)`. One side's
/// rows are in shared memory (`a` is its `q` or `k`, `b` its `∂O` or `v`), the other's are
/// read at `base` of `m_a` (`k` or `q`) and `m_b` (`v` or `∂O`).
#[cube]
#[allow(clippy::too_many_arguments)]
fn pair<F: Float>(
    a: &Shared<[F]>,
    b: &Shared<[F]>,
    m_a: &Tensor<F>,
    m_b: &Tensor<F>,
    base: usize,
    h: usize,
    scale: F,
    lse: F,
    delta: F,
) -> (F, F) {
    let p = (scale * dot_row::<F>(a, m_a, base, h) - lse).exp();
    (p, p * (dot_row::<F>(b, m_b, base, h) - delta))
}

/// `∂q`, one cube per query row.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn dq_kernel<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    d_o: &Tensor<F>,
    lse: &Tensor<F>,
    delta: &Tensor<F>,
    dq: &mut Tensor<F>,
    dims: Dims,
    #[comptime] units: usize,
    #[define(F)] _dtype: ElemType,
) {
    let t = dims.t as usize;
    let s = dims.s as usize;
    let h = dims.h as usize;
    let i = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let u = UNIT_POS as usize;
    let cube = CUBE_DIM as usize;
    let mut qs = Shared::<[F]>::new_slice(units);
    let mut dos = Shared::<[F]>::new_slice(units);
    let mut dss = Shared::<[F]>::new_slice(units);
    let row = bh * t + i;
    load_row::<F>(&mut qs, q, row * h, h);
    load_row::<F>(&mut dos, d_o, row * h, h);
    sync_cube();
    let keys = i + s - t + 1;
    let scale = F::cast_from(dims.scale);
    let l = lse[row];
    let di = delta[row];
    let mut acc = F::new(0.0);
    let mut c = 0;
    while c < keys {
        let j = c + u;
        let mut ds = F::new(0.0);
        if j < keys {
            let (_, d) = pair::<F>(&qs, &dos, k, v, (bh * s + j) * h, h, scale, l, di);
            ds = d;
        }
        dss[u] = ds;
        sync_cube();
        if u < h {
            acc += weighted_rows::<F>(&dss, k, bh * s + c, chunk_len(keys - c, cube), h);
        }
        sync_cube();
        c += cube;
    }
    if u < h {
        dq[row * h + u] = scale * acc;
    }
}

/// `∂k` and `∂v`, one cube per key row.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn dkv_kernel<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    d_o: &Tensor<F>,
    lse: &Tensor<F>,
    delta: &Tensor<F>,
    dk: &mut Tensor<F>,
    dv: &mut Tensor<F>,
    dims: Dims,
    #[comptime] units: usize,
    #[define(F)] _dtype: ElemType,
) {
    let t = dims.t as usize;
    let s = dims.s as usize;
    let h = dims.h as usize;
    let j = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let u = UNIT_POS as usize;
    let cube = CUBE_DIM as usize;
    let mut ks = Shared::<[F]>::new_slice(units);
    let mut vs = Shared::<[F]>::new_slice(units);
    let mut ps = Shared::<[F]>::new_slice(units);
    let mut dss = Shared::<[F]>::new_slice(units);
    let key = bh * s + j;
    load_row::<F>(&mut ks, k, key * h, h);
    load_row::<F>(&mut vs, v, key * h, h);
    sync_cube();
    // The first query that sees key j: j − (S − T), or 0 for a cached key.
    let mut first = 0;
    if j + t > s {
        first = j + t - s;
    }
    let queries = t - first;
    let scale = F::cast_from(dims.scale);
    let mut acc_k = F::new(0.0);
    let mut acc_v = F::new(0.0);
    let mut c = 0;
    while c < queries {
        let row = bh * t + first + c + u;
        let mut p = F::new(0.0);
        let mut ds = F::new(0.0);
        if c + u < queries {
            let (pp, d) = pair::<F>(&ks, &vs, q, d_o, row * h, h, scale, lse[row], delta[row]);
            p = pp;
            ds = d;
        }
        ps[u] = p;
        dss[u] = ds;
        sync_cube();
        if u < h {
            let start = bh * t + first + c;
            let len = chunk_len(queries - c, cube);
            acc_v += weighted_rows::<F>(&ps, d_o, start, len, h);
            acc_k += weighted_rows::<F>(&dss, q, start, len, h);
        }
        sync_cube();
        c += cube;
    }
    if u < h {
        dk[key * h + u] = scale * acc_k;
        dv[key * h + u] = acc_v;
    }
}

/// The launch of one attention kernel: the cube shape and the sizes.
struct Launch {
    units: u32,
    heads: usize,
    /// `[T, S, h]`.
    dims: [usize; 3],
    scale: f64,
}

impl Launch {
    /// The sizes of `q` `[B, H, T, h]` against `k` `[B, H, S, h]`.
    fn of(q: &CubeTensor, k: &CubeTensor, scale: f64) -> Launch {
        let [b, n, t, h] = q.meta.shape().dims::<4>();
        let s = k.meta.shape().dims::<4>()[2];
        assert!(
            h <= MAX_HEAD && s >= t,
            "attention kernels: head width {h} (at most {MAX_HEAD}), {s} keys for {t} queries"
        );
        let units = h.next_power_of_two().max(32) as u32;
        Launch { units, heads: b * n, dims: [t, s, h], scale }
    }

    fn grid(&self, rows: usize) -> CubeCount {
        CubeCount::Static(rows as u32, self.heads as u32, 1)
    }

    fn dims(&self) -> DimsLaunch {
        let [t, s, h] = self.dims.map(|v| v as u32);
        DimsLaunch::new(t, s, h, self.scale as f32)
    }
}

/// The row statistics' shape `[B, H, T, 1]` of queries `q`.
fn row_shape(q: &CubeTensor) -> Shape {
    let [b, n, t, _] = q.meta.shape().dims::<4>();
    Shape::new([b, n, t, 1])
}

/// `(O, L)` of causal attention with scale `scale`.
pub fn forward(q: CubeTensor, k: CubeTensor, v: CubeTensor, scale: f64) -> (CubeTensor, CubeTensor) {
    let [q, k, v] = [q, k, v].map(into_contiguous);
    let at = Launch::of(&q, &k, scale);
    let (out, lse) = (empty(&q, q.meta.shape().clone()), empty(&q, row_shape(&q)));
    let dtype = dtype_to_storage_type(q.dtype);
    forward_kernel::launch(
        &q.client.clone(),
        at.grid(at.dims[0]),
        CubeDim::new_1d(at.units),
        q.into_tensor_arg(),
        k.into_tensor_arg(),
        v.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        lse.clone().into_tensor_arg(),
        at.dims(),
        at.units as usize,
        dtype,
    );
    (out, lse)
}

/// The saved and upstream tensors of the backward: `q, k, v, ∂O, L, Δ`.
pub type Saved = [CubeTensor; 6];

/// `∂q`.
pub fn dq(saved: Saved, scale: f64) -> CubeTensor {
    let [q, k, v, d_o, lse, delta] = saved.map(into_contiguous);
    let at = Launch::of(&q, &k, scale);
    let dq = empty(&q, q.meta.shape().clone());
    let dtype = dtype_to_storage_type(q.dtype);
    dq_kernel::launch(
        &q.client.clone(),
        at.grid(at.dims[0]),
        CubeDim::new_1d(at.units),
        q.into_tensor_arg(),
        k.into_tensor_arg(),
        v.into_tensor_arg(),
        d_o.into_tensor_arg(),
        lse.into_tensor_arg(),
        delta.into_tensor_arg(),
        dq.clone().into_tensor_arg(),
        at.dims(),
        at.units as usize,
        dtype,
    );
    dq
}

/// `(∂k, ∂v)`.
pub fn dkv(saved: Saved, scale: f64) -> (CubeTensor, CubeTensor) {
    let [q, k, v, d_o, lse, delta] = saved.map(into_contiguous);
    let at = Launch::of(&q, &k, scale);
    let (dk, dv) = (empty(&k, k.meta.shape().clone()), empty(&v, v.meta.shape().clone()));
    let dtype = dtype_to_storage_type(q.dtype);
    dkv_kernel::launch(
        &q.client.clone(),
        at.grid(at.dims[1]),
        CubeDim::new_1d(at.units),
        q.into_tensor_arg(),
        k.into_tensor_arg(),
        v.into_tensor_arg(),
        d_o.into_tensor_arg(),
        lse.into_tensor_arg(),
        delta.into_tensor_arg(),
        dk.clone().into_tensor_arg(),
        dv.clone().into_tensor_arg(),
        at.dims(),
        at.units as usize,
        dtype,
    );
    (dk, dv)
}
