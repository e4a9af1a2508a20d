//! The fused operations as a burn backend extension: computed by the slice kernels on `Flex`,
//! and differentiated on `Autodiff<Flex>` by hand-written backward passes that reuse the
//! same kernels. Each forward saves only what its backward needs.

use super::simd::Real;
use super::strided::{self, Strided};
use super::tanh_norm::{self, TanhNorm};
use super::{attention, given_rms, norm, rope, softmax, swiglu};
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Flex, backend_extension};
use burn::tensor::{DType, TensorData};

#[backend_extension(Autodiff, Flex)]
pub trait FusedOps: burn::backend::Backend {
    /// `γ ⊙ (x − μ) r + β` over the last axis (see [`norm`]); `gain`, `shift`: `[d]` or `[1]`.
    fn norm_affine(
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        eps: f64,
        centred: bool,
    ) -> FloatTensor<Self>;
    /// The norm of the residual sum `a·x + c·b` (see [`norm::forward_sum`]); `scales` = `[a, c]`.
    #[allow(clippy::too_many_arguments)]
    fn add_norm(
        x: FloatTensor<Self>,
        b: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        scales: [f64; 2],
        eps: f64,
        centred: bool,
    ) -> FloatTensor<Self>;
    /// `γ ⊙ tanh(λ x / D) + β` (see [`tanh_norm`]); `variance`: `[…, 1]` for `Given`, else unused.
    #[allow(clippy::too_many_arguments)]
    fn tanh_norm(
        x: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        variance: FloatTensor<Self>,
        n: TanhNorm,
    ) -> FloatTensor<Self>;
    /// `γ ⊙ x / √(v + ε)` with a given `v` `[…, 1]` per row (see [`given_rms`]); `gain`: `[d]`.
    fn rms_given(x: FloatTensor<Self>, gain: FloatTensor<Self>, v: FloatTensor<Self>, eps: f64) -> FloatTensor<Self>;
    /// `SiLU(a) ⊙ b` (see [`swiglu`]).
    fn swiglu(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self>;
    /// Scaled causal softmax of `[…, T, S]` scores (see [`softmax`]).
    fn causal_softmax(x: FloatTensor<Self>, scale: f64) -> FloatTensor<Self>;
    /// RoPE of `[B, T, n, h]` with `[T, h/2]` tables (see [`rope`]); the tables are constants.
    fn rope(x: FloatTensor<Self>, cos: FloatTensor<Self>, sin: FloatTensor<Self>) -> FloatTensor<Self>;
    /// `a · b` over the last two axes, equal batch axes (see [`strided`]); operands in any layout.
    fn matmul(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self>;
    /// Causal `softmax(s·q kᵀ + M) v` of `[B, H, T, h]` queries and `[B, H, S, h]` keys and
    /// values in any layout (see [`attention`]).
    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self>;
}

/// Runs `$f::<T>` for the tensor's element type (the fused path is only taken for f32 and f64,
/// see [`super::fusable`]).
macro_rules! by_dtype {
    ($dtype:expr, $f:ident($($arg:expr),*)) => {
        match $dtype {
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            other => unreachable!("fused kernels run on f32 and f64 only, not {other:?}"),
        }
    };
}

/// Registers each gradient with its parent node, where that parent is tracked.
macro_rules! register {
    ($grads:expr, $parents:expr, $values:expr) => {
        for (node, grad) in $parents.into_iter().zip($values) {
            if let Some(node) = node {
                $grads.register::<Flex>(node.id, grad);
            }
        }
    };
}

/// A contiguous copy (free when already contiguous).
fn dense(t: &FlexTensor) -> FlexTensor {
    t.to_contiguous()
}

fn view<T: Real>(t: &FlexTensor) -> &[T] {
    t.as_slice::<T>().expect("contiguous tensor of the kernel's type")
}

fn tensor<T: Real>(values: Vec<T>, shape: Vec<usize>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

fn dims(t: &FlexTensor) -> Vec<usize> {
    t.layout().shape().to_vec()
}

/// A parameter of length 1 or `d` as `d` values.
fn broadcast<T: Real>(p: &FlexTensor, d: usize) -> Vec<T> {
    let v = view::<T>(p);
    if v.len() == 1 { vec![v[0]; d] } else { v.to_vec() }
}

/// A `[d]` gradient reduced to the parameter's length (1 for a scalar parameter).
fn reduce<T: Real>(g: Vec<T>, len: usize) -> FlexTensor {
    if len == 1 {
        let s = g.iter().fold(T::zero(), |a, &b| a + b);
        tensor(vec![s], vec![1])
    } else {
        tensor(g, vec![len])
    }
}

/// Norm forward: the output and the per-row (μ, r) as two `[rows]` tensors.
fn norm_fwd<T: Real>(
    x: &FlexTensor,
    g: &FlexTensor,
    b: &FlexTensor,
    eps: f64,
    c: bool,
) -> (FlexTensor, [FlexTensor; 2]) {
    let shape = dims(x);
    let d = *shape.last().expect("a norm input has a feature axis");
    let (y, st) = norm::forward(view::<T>(x), d, &broadcast::<T>(g, d), &broadcast::<T>(b, d), eps, c);
    let rows = st.mean.len();
    (tensor(y, shape), [tensor(st.mean, vec![rows]), tensor(st.rstd, vec![rows])])
}

/// Norm backward: `(∂x, ∂γ, ∂β)`.
fn norm_bwd<T: Real>(dy: &FlexTensor, st: &NormState) -> [FlexTensor; 3] {
    let shape = dims(&st.x);
    let d = *shape.last().expect("feature axis");
    let stats = norm::RowStats { mean: view::<T>(&st.stats[0]).to_vec(), rstd: view::<T>(&st.stats[1]).to_vec() };
    // Both parameters scalar (or absent): their gradients are summed row by row.
    let scalar = st.gain_len == 1 && st.shift_len == 1;
    let g = broadcast::<T>(&st.gain, d);
    let [dx, dg, db] = norm::backward(view::<T>(dy), view::<T>(&st.x), d, &g, &stats, st.centred, scalar);
    [tensor(dx, shape), reduce(dg, st.gain_len), reduce(db, st.shift_len)]
}

/// Residual sum and norm forward: the output, the sum `z` (the norm's input, kept for the
/// backward) and the per-row (μ, r).
#[allow(clippy::too_many_arguments)]
fn add_norm_fwd<T: Real>(
    x: &FlexTensor,
    b: &FlexTensor,
    g: &FlexTensor,
    sh: &FlexTensor,
    [a, c]: [f64; 2],
    eps: f64,
    centred: bool,
) -> (FlexTensor, FlexTensor, [FlexTensor; 2]) {
    let shape = dims(x);
    let d = *shape.last().expect("a norm input has a feature axis");
    let (gain, shift) = (broadcast::<T>(g, d), broadcast::<T>(sh, d));
    let p = norm::Affine { gain: &gain, shift: &shift, eps, centred };
    let (z, y, st) = norm::forward_sum(view::<T>(x), view::<T>(b), [T::of(a), T::of(c)], p);
    let rows = st.mean.len();
    (tensor(y, shape.clone()), tensor(z, shape), [tensor(st.mean, vec![rows]), tensor(st.rstd, vec![rows])])
}

/// `s · t` (the same tensor when `s` is 1).
fn scale<T: Real>(t: FlexTensor, s: f64) -> FlexTensor {
    if s == 1.0 {
        return t;
    }
    let s = T::of(s);
    tensor(view::<T>(&t).iter().map(|&v| v * s).collect(), dims(&t))
}

/// Residual sum and norm backward: the norm's `(∂z, ∂γ, ∂β)`, with `∂x = a ∂z`, `∂b = c ∂z`.
fn add_norm_bwd<T: Real>(dy: &FlexTensor, st: &AddNormState) -> [FlexTensor; 4] {
    let [dz, dg, db] = norm_bwd::<T>(dy, &st.norm);
    let [a, c] = st.scales;
    [scale::<T>(dz.clone(), a), scale::<T>(dz, c), dg, db]
}

/// The inputs of a tanh norm, each contiguous.
#[derive(Clone, Debug)]
struct TanhInputs {
    x: FlexTensor,
    lambda: FlexTensor,
    gain: FlexTensor,
    shift: FlexTensor,
    variance: FlexTensor,
    n: TanhNorm,
}

impl TanhInputs {
    fn new(
        x: &FlexTensor,
        lambda: &FlexTensor,
        gain: &FlexTensor,
        shift: &FlexTensor,
        v: &FlexTensor,
        n: TanhNorm,
    ) -> Self {
        Self { x: dense(x), lambda: dense(lambda), gain: dense(gain), shift: dense(shift), variance: dense(v), n }
    }

    /// The per-row variances (empty unless the denominator is given).
    fn v<T: Real>(&self) -> &[T] {
        if self.n.denominator == tanh_norm::Denominator::Given { view::<T>(&self.variance) } else { &[] }
    }
}

fn tanh_fwd<T: Real>(i: &TanhInputs) -> FlexTensor {
    let shape = dims(&i.x);
    let d = *shape.last().expect("a norm input has a feature axis");
    let (g, b) = (broadcast::<T>(&i.gain, d), broadcast::<T>(&i.shift, d));
    tensor(tanh_norm::forward(view::<T>(&i.x), d, view::<T>(&i.lambda)[0], &g, &b, i.v::<T>(), i.n), shape)
}

/// `(∂x, ∂λ, ∂γ, ∂β, ∂v)`.
fn tanh_bwd<T: Real>(dy: &FlexTensor, i: &TanhInputs) -> [FlexTensor; 5] {
    let shape = dims(&i.x);
    let d = *shape.last().expect("feature axis");
    let g = broadcast::<T>(&i.gain, d);
    let (dx, dg, db, dl, dv) =
        tanh_norm::backward(view::<T>(dy), view::<T>(&i.x), d, view::<T>(&i.lambda)[0], &g, i.v::<T>(), i.n);
    let len = |t: &FlexTensor| t.layout().num_elements();
    let dv = if dv.is_empty() { tensor(vec![T::zero()], vec![1]) } else { tensor(dv, dims(&i.variance)) };
    [tensor(dx, shape), tensor(vec![dl], vec![1]), reduce(dg, len(&i.gain)), reduce(db, len(&i.shift)), dv]
}

/// What RMSNorm with a given variance keeps for its backward: its three inputs and ε.
#[derive(Clone, Debug)]
struct GivenRmsState {
    x: FlexTensor,
    gain: FlexTensor,
    v: FlexTensor,
    eps: f64,
}

fn given_rms_fwd<T: Real>(s: &GivenRmsState) -> FlexTensor {
    let shape = dims(&s.x);
    let d = *shape.last().expect("a norm input has a feature axis");
    let g = broadcast::<T>(&s.gain, d);
    tensor(given_rms::forward(view::<T>(&s.x), d, &g, view::<T>(&s.v), s.eps), shape)
}

/// `(∂x, ∂γ, ∂v)`.
fn given_rms_bwd<T: Real>(dy: &FlexTensor, s: &GivenRmsState) -> [FlexTensor; 3] {
    let shape = dims(&s.x);
    let d = *shape.last().expect("feature axis");
    let g = broadcast::<T>(&s.gain, d);
    let [dx, dg, dv] = given_rms::backward(view::<T>(dy), view::<T>(&s.x), d, &g, view::<T>(&s.v), s.eps);
    [tensor(dx, shape), reduce(dg, s.gain.layout().num_elements()), tensor(dv, dims(&s.v))]
}

fn swiglu_fwd<T: Real>(a: &FlexTensor, b: &FlexTensor) -> FlexTensor {
    tensor(swiglu::forward(view::<T>(a), view::<T>(b)), dims(a))
}

fn swiglu_bwd<T: Real>(dy: &FlexTensor, a: &FlexTensor, b: &FlexTensor) -> [FlexTensor; 2] {
    let (da, db) = swiglu::backward(view::<T>(dy), view::<T>(a), view::<T>(b));
    [tensor(da, dims(a)), tensor(db, dims(a))]
}

/// `(T, S)`: queries and keys of `[…, T, S]` scores.
fn query_keys(shape: &[usize]) -> (usize, usize) {
    let n = shape.len();
    assert!(n >= 2 && shape[n - 1] >= shape[n - 2], "causal softmax needs [.., T, S] scores with S ≥ T, got {shape:?}");
    (shape[n - 2], shape[n - 1])
}

fn softmax_fwd<T: Real>(x: &FlexTensor, scale: f64) -> FlexTensor {
    let shape = dims(x);
    let (t, s) = query_keys(&shape);
    tensor(softmax::forward(view::<T>(x), t, s, scale), shape)
}

fn softmax_bwd<T: Real>(dp: &FlexTensor, p: &FlexTensor, scale: f64) -> FlexTensor {
    let shape = dims(p);
    let (t, s) = query_keys(&shape);
    tensor(softmax::backward(view::<T>(dp), view::<T>(p), t, s, scale), shape)
}

fn rope_run<T: Real>(x: &FlexTensor, cos: &FlexTensor, sin: &FlexTensor, inverse: bool) -> FlexTensor {
    let shape = dims(x);
    let [_, t, n, h] = shape[..] else { panic!("RoPE input must be [B, T, n, h], got {shape:?}") };
    assert_eq!(dims(cos), [t, h / 2], "RoPE tables must be [T, h/2]");
    tensor(rope::rotate(view::<T>(x), t, n, h, view::<T>(cos), view::<T>(sin), inverse), shape)
}

/// `a · b` of two strided views (see [`strided::matmul`]).
fn mm<T: Real>(a: &FlexTensor, b: &FlexTensor) -> FlexTensor {
    let (sa, sb) = (dims(a), dims(b));
    let r = sa.len();
    assert!(
        r >= 2 && sb.len() == r && sa[..r - 2] == sb[..r - 2] && sa[r - 1] == sb[r - 2],
        "matmul needs [.., m, k] × [.., k, n] with equal batch axes, got {sa:?} × {sb:?}"
    );
    let c = strided::matmul(operand::<T>(a), operand(b), &sa[..r - 2], [sa[r - 2], sa[r - 1], sb[r - 1]]);
    tensor(c, [&sa[..r - 1], &sb[r - 1..]].concat())
}

/// `t`'s storage and strides, for [`strided::matmul`].
fn operand<T: Real>(t: &FlexTensor) -> Strided<'_, T> {
    let s = t.layout().strides();
    let r = s.len();
    Strided {
        data: t.storage::<T>(),
        offset: t.layout().start_offset(),
        batch: &s[..r - 2],
        rows: s[r - 2],
        cols: s[r - 1],
    }
}

/// The view of `t` with its last two axes swapped (no copy).
fn transposed(t: &FlexTensor) -> FlexTensor {
    let r = dims(t).len();
    t.transpose(r - 2, r - 1)
}

/// The sizes of an attention call, checked.
fn attention_shape(q: &FlexTensor, k: &FlexTensor, v: &FlexTensor) -> attention::Shape {
    let (sq, sk) = (dims(q), dims(k));
    let [batch, heads, t, h] = sq[..] else { panic!("attention queries must be [B, H, T, h], got {sq:?}") };
    assert!(
        sk.len() == 4 && sk[..2] == sq[..2] && sk[3] == h && sk[2] >= t && dims(v) == sk,
        "attention needs keys and values [B, H, S ≥ T, h] for queries {sq:?}, got {sk:?} and {:?}",
        dims(v)
    );
    attention::Shape { batch, heads, t, s: sk[2], h }
}

/// `[B, ·, H, h]` storage as the `[B, H, ·, h]` tensor it holds (a view).
fn heads_view<T: Real>(values: Vec<T>, sh: &attention::Shape, rows: usize) -> FlexTensor {
    tensor(values, vec![sh.batch, rows, sh.heads, sh.h]).transpose(1, 2)
}

/// Attention forward: the output `[B, H, T, h]` (a view of `[B, T, H, h]` storage) and the
/// log-sum-exp per query.
fn attention_fwd<T: Real>(q: &FlexTensor, k: &FlexTensor, v: &FlexTensor, scale: f64) -> (FlexTensor, FlexTensor) {
    let sh = attention_shape(q, k, v);
    let (o, lse) = attention::forward(operand::<T>(q), operand(k), operand(v), sh, scale);
    (heads_view(o, &sh, sh.t), tensor(lse, vec![sh.batch, sh.heads, sh.t]))
}

/// What attention's backward keeps: the operands as given, the output and the log-sum-exp.
#[derive(Clone, Debug)]
struct AttentionState {
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    o: FlexTensor,
    lse: FlexTensor,
    scale: f64,
}

/// `[∂q, ∂k, ∂v]`, each a `[B, H, ·, h]` view of `[B, ·, H, h]` storage.
fn attention_bwd<T: Real>(d_o: &FlexTensor, st: &AttentionState) -> [FlexTensor; 3] {
    let sh = attention_shape(&st.q, &st.k, &st.v);
    let saved = attention::Saved {
        q: operand::<T>(&st.q),
        k: operand(&st.k),
        v: operand(&st.v),
        o: operand(&st.o),
        lse: view::<T>(&st.lse),
    };
    let [dq, dk, dv] = attention::backward(&saved, operand(d_o), sh, st.scale);
    [heads_view(dq, &sh, sh.t), heads_view(dk, &sh, sh.s), heads_view(dv, &sh, sh.s)]
}

impl FusedOps for Flex {
    fn norm_affine(x: FlexTensor, gain: FlexTensor, shift: FlexTensor, eps: f64, centred: bool) -> FlexTensor {
        let (x, g, b) = (dense(&x), dense(&gain), dense(&shift));
        by_dtype!(x.dtype(), norm_fwd(&x, &g, &b, eps, centred)).0
    }

    fn add_norm(
        x: FlexTensor,
        b: FlexTensor,
        gain: FlexTensor,
        shift: FlexTensor,
        scales: [f64; 2],
        eps: f64,
        centred: bool,
    ) -> FlexTensor {
        let (x, b, g, sh) = (dense(&x), dense(&b), dense(&gain), dense(&shift));
        by_dtype!(x.dtype(), add_norm_fwd(&x, &b, &g, &sh, scales, eps, centred)).0
    }

    fn tanh_norm(
        x: FlexTensor,
        lambda: FlexTensor,
        gain: FlexTensor,
        shift: FlexTensor,
        v: FlexTensor,
        n: TanhNorm,
    ) -> FlexTensor {
        let i = TanhInputs::new(&x, &lambda, &gain, &shift, &v, n);
        by_dtype!(i.x.dtype(), tanh_fwd(&i))
    }

    fn rms_given(x: FlexTensor, gain: FlexTensor, v: FlexTensor, eps: f64) -> FlexTensor {
        let s = GivenRmsState { x: dense(&x), gain: dense(&gain), v: dense(&v), eps };
        by_dtype!(s.x.dtype(), given_rms_fwd(&s))
    }

    fn swiglu(a: FlexTensor, b: FlexTensor) -> FlexTensor {
        let (a, b) = (dense(&a), dense(&b));
        by_dtype!(a.dtype(), swiglu_fwd(&a, &b))
    }

    fn causal_softmax(x: FlexTensor, scale: f64) -> FlexTensor {
        let x = dense(&x);
        by_dtype!(x.dtype(), softmax_fwd(&x, scale))
    }

    fn rope(x: FlexTensor, cos: FlexTensor, sin: FlexTensor) -> FlexTensor {
        let (x, cos, sin) = (dense(&x), dense(&cos), dense(&sin));
        by_dtype!(x.dtype(), rope_run(&x, &cos, &sin, false))
    }

    fn matmul(a: FlexTensor, b: FlexTensor) -> FlexTensor {
        by_dtype!(a.dtype(), mm(&a, &b))
    }

    fn causal_attention(q: FlexTensor, k: FlexTensor, v: FlexTensor, scale: f64) -> FlexTensor {
        by_dtype!(q.dtype(), attention_fwd(&q, &k, &v, scale)).0
    }
}

/// What the norm's backward pass keeps: the input, γ, and (μ, r) per row.
#[derive(Clone, Debug)]
struct NormState {
    x: FlexTensor,
    gain: FlexTensor,
    stats: [FlexTensor; 2],
    gain_len: usize,
    shift_len: usize,
    centred: bool,
}

#[derive(Debug)]
struct NormBackward;

impl Backward<Flex, 3> for NormBackward {
    type State = NormState;

    fn backward(self, ops: Ops<NormState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = dense(&grads.consume::<Flex>(&ops.node));
        register!(grads, ops.parents, by_dtype!(dy.dtype(), norm_bwd(&dy, &ops.state)));
    }
}

/// What the residual sum and norm's backward keeps: the norm's state on the sum, and `[a, c]`.
#[derive(Clone, Debug)]
struct AddNormState {
    norm: NormState,
    scales: [f64; 2],
}

#[derive(Debug)]
struct AddNormBackward;

impl Backward<Flex, 4> for AddNormBackward {
    type State = AddNormState;

    fn backward(self, ops: Ops<AddNormState, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = dense(&grads.consume::<Flex>(&ops.node));
        register!(grads, ops.parents, by_dtype!(dy.dtype(), add_norm_bwd(&dy, &ops.state)));
    }
}

#[derive(Debug)]
struct TanhNormBackward;

impl Backward<Flex, 5> for TanhNormBackward {
    type State = TanhInputs;

    fn backward(self, ops: Ops<TanhInputs, 5>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = dense(&grads.consume::<Flex>(&ops.node));
        register!(grads, ops.parents, by_dtype!(dy.dtype(), tanh_bwd(&dy, &ops.state)));
    }
}

#[derive(Debug)]
struct GivenRmsBackward;

impl Backward<Flex, 3> for GivenRmsBackward {
    type State = GivenRmsState;

    fn backward(self, ops: Ops<GivenRmsState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = dense(&grads.consume::<Flex>(&ops.node));
        register!(grads, ops.parents, by_dtype!(dy.dtype(), given_rms_bwd(&dy, &ops.state)));
    }
}

#[derive(Debug)]
struct SwigluBackward;

impl Backward<Flex, 2> for SwigluBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = dense(&grads.consume::<Flex>(&ops.node));
        let (a, b) = &ops.state;
        register!(grads, ops.parents, by_dtype!(dy.dtype(), swiglu_bwd(&dy, a, b)));
    }
}

#[derive(Debug)]
struct SoftmaxBackward;

impl Backward<Flex, 1> for SoftmaxBackward {
    /// The probabilities and the scale.
    type State = (FlexTensor, f64);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [nx] = ops.parents;
        let dp = dense(&grads.consume::<Flex>(&ops.node));
        if let Some(node) = nx {
            let (p, scale) = &ops.state;
            grads.register::<Flex>(node.id, by_dtype!(dp.dtype(), softmax_bwd(&dp, p, *scale)));
        }
    }
}

#[derive(Debug)]
struct RopeBackward;

impl Backward<Flex, 1> for RopeBackward {
    /// The cos and sin tables.
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [nx] = ops.parents;
        let dy = dense(&grads.consume::<Flex>(&ops.node));
        if let Some(node) = nx {
            let (cos, sin) = &ops.state;
            grads.register::<Flex>(node.id, by_dtype!(dy.dtype(), rope_run(&dy, cos, sin, true)));
        }
    }
}

#[derive(Debug)]
struct MatmulBackward;

impl Backward<Flex, 2> for MatmulBackward {
    /// The operands, as the views they were given.
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dc = grads.consume::<Flex>(&ops.node);
        let (a, b) = &ops.state;
        let [na, nb] = ops.parents;
        // ∂A = ∂C Bᵀ, ∂B = Aᵀ ∂C, each only when its operand is tracked.
        if let Some(node) = na {
            grads.register::<Flex>(node.id, by_dtype!(dc.dtype(), mm(&dc, &transposed(b))));
        }
        if let Some(node) = nb {
            grads.register::<Flex>(node.id, by_dtype!(dc.dtype(), mm(&transposed(a), &dc)));
        }
    }
}

#[derive(Debug)]
struct AttentionBackward;

impl Backward<Flex, 3> for AttentionBackward {
    type State = AttentionState;

    fn backward(self, ops: Ops<AttentionState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let d_o = grads.consume::<Flex>(&ops.node);
        register!(grads, ops.parents, by_dtype!(d_o.dtype(), attention_bwd(&d_o, &ops.state)));
    }
}

impl<C: CheckpointStrategy> FusedOps for Autodiff<Flex, C> {
    fn norm_affine(
        x: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        eps: f64,
        centred: bool,
    ) -> FloatTensor<Self> {
        let prep = NormBackward.prepare::<C>([x.node(), gain.node(), shift.node()]).compute_bound().stateful();
        let (xp, g, b) = (dense(x.primitive()), dense(gain.primitive()), dense(shift.primitive()));
        let (y, stats) = by_dtype!(xp.dtype(), norm_fwd(&xp, &g, &b, eps, centred));
        match prep {
            OpsKind::Tracked(prep) => {
                let (gain_len, shift_len) = (g.layout().num_elements(), b.layout().num_elements());
                prep.finish(NormState { x: xp, gain: g, stats, gain_len, shift_len, centred }, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn add_norm(
        x: FloatTensor<Self>,
        b: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        scales: [f64; 2],
        eps: f64,
        centred: bool,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), b.node(), gain.node(), shift.node()];
        let prep = AddNormBackward.prepare::<C>(nodes).compute_bound().stateful();
        let (xp, bp) = (dense(x.primitive()), dense(b.primitive()));
        let (g, sh) = (dense(gain.primitive()), dense(shift.primitive()));
        let (y, z, stats) = by_dtype!(xp.dtype(), add_norm_fwd(&xp, &bp, &g, &sh, scales, eps, centred));
        match prep {
            OpsKind::Tracked(prep) => {
                let (gain_len, shift_len) = (g.layout().num_elements(), sh.layout().num_elements());
                let norm = NormState { x: z, gain: g, stats, gain_len, shift_len, centred };
                prep.finish(AddNormState { norm, scales }, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn tanh_norm(
        x: FloatTensor<Self>,
        lambda: FloatTensor<Self>,
        gain: FloatTensor<Self>,
        shift: FloatTensor<Self>,
        variance: FloatTensor<Self>,
        n: TanhNorm,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), lambda.node(), gain.node(), shift.node(), variance.node()];
        let prep = TanhNormBackward.prepare::<C>(nodes).compute_bound().stateful();
        let i = TanhInputs::new(
            x.primitive(),
            lambda.primitive(),
            gain.primitive(),
            shift.primitive(),
            variance.primitive(),
            n,
        );
        let y = by_dtype!(i.x.dtype(), tanh_fwd(&i));
        match prep {
            OpsKind::Tracked(prep) => prep.finish(i, y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn rms_given(x: FloatTensor<Self>, gain: FloatTensor<Self>, v: FloatTensor<Self>, eps: f64) -> FloatTensor<Self> {
        let prep = GivenRmsBackward.prepare::<C>([x.node(), gain.node(), v.node()]).compute_bound().stateful();
        let s = GivenRmsState { x: dense(x.primitive()), gain: dense(gain.primitive()), v: dense(v.primitive()), eps };
        let y = by_dtype!(s.x.dtype(), given_rms_fwd(&s));
        match prep {
            OpsKind::Tracked(prep) => prep.finish(s, y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn swiglu(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        let prep = SwigluBackward.prepare::<C>([a.node(), b.node()]).compute_bound().stateful();
        let (ap, bp) = (dense(a.primitive()), dense(b.primitive()));
        let y = by_dtype!(ap.dtype(), swiglu_fwd(&ap, &bp));
        match prep {
            OpsKind::Tracked(prep) => prep.finish((ap, bp), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn causal_softmax(x: FloatTensor<Self>, scale: f64) -> FloatTensor<Self> {
        let prep = SoftmaxBackward.prepare::<C>([x.node()]).compute_bound().stateful();
        let xp = dense(x.primitive());
        let p = by_dtype!(xp.dtype(), softmax_fwd(&xp, scale));
        match prep {
            OpsKind::Tracked(prep) => prep.finish((p.clone(), scale), p),
            OpsKind::UnTracked(prep) => prep.finish(p),
        }
    }

    fn rope(x: FloatTensor<Self>, cos: FloatTensor<Self>, sin: FloatTensor<Self>) -> FloatTensor<Self> {
        let prep = RopeBackward.prepare::<C>([x.node()]).compute_bound().stateful();
        let (xp, c, s) = (dense(x.primitive()), dense(cos.primitive()), dense(sin.primitive()));
        let y = by_dtype!(xp.dtype(), rope_run(&xp, &c, &s, false));
        match prep {
            OpsKind::Tracked(prep) => prep.finish((c, s), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn matmul(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        let prep = MatmulBackward.prepare::<C>([a.node(), b.node()]).compute_bound().stateful();
        let (ap, bp) = (a.primitive().clone(), b.primitive().clone());
        let c = by_dtype!(ap.dtype(), mm(&ap, &bp));
        match prep {
            OpsKind::Tracked(prep) => prep.finish((ap, bp), c),
            OpsKind::UnTracked(prep) => prep.finish(c),
        }
    }

    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        let prep = AttentionBackward.prepare::<C>([q.node(), k.node(), v.node()]).compute_bound().stateful();
        let (qp, kp, vp) = (q.primitive().clone(), k.primitive().clone(), v.primitive().clone());
        let (o, lse) = by_dtype!(qp.dtype(), attention_fwd(&qp, &kp, &vp, scale));
        match prep {
            OpsKind::Tracked(prep) => prep.finish(AttentionState { q: qp, k: kp, v: vp, o: o.clone(), lse, scale }, o),
            OpsKind::UnTracked(prep) => prep.finish(o),
        }
    }
}
