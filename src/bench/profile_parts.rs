//! The pieces of a train step, each timed alone on the device at the model's own shapes
//! through the model's own code (its layer-0 modules, its attention core, its loss head): the
//! device is synchronised before and after every timed call, so a GPU's queue holds nothing
//! else while a piece runs. A piece with a backward is timed forward and backward together,
//! its output's gradient a fixed random tensor, less the same harness around the identity
//! (the seeding product and its sum), so only the piece remains.

use super::Dims;
use crate::kernels::{Kernels, Precision, widen};
use crate::model::Transformer;
use crate::model::base::context::ForwardContext;
use crate::stats::median;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Distribution, Int, Tensor};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What a piece is, for the per-group rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartGroup {
    Matmul,
    Attention,
    Norm,
    /// A sublayer's function F whole: its matmuls, attention core and elementwise work.
    Sublayer,
    Loss,
    Optimizer,
    GradNorm,
    HostSync,
    Probes,
}

/// One piece, timed alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfilePart {
    pub name: String,
    pub group: PartGroup,
    /// How many times one train step runs it (a fraction for the probes: once every k steps).
    pub per_step: f64,
    /// Median milliseconds of one run.
    pub ms: f64,
    /// Floating-point operations of one run, for the compute-bound pieces.
    pub flops: Option<f64>,
    /// The fewest bytes one run moves, for the memory-bound pieces.
    pub bytes: Option<f64>,
}

/// Times closures on one device: `warmup` untimed calls, then the median of `reps` timed ones.
pub struct Timer {
    pub device: Device,
    pub warmup: usize,
    pub reps: usize,
}

impl Timer {
    /// Median seconds of one call of `f`, the device idle before and drained after each call.
    /// What `f` returns is dropped only after the drain, so a lazy backend (burn's fusion)
    /// cannot skip work whose result nobody holds.
    pub fn time<T>(&self, mut f: impl FnMut() -> T) -> anyhow::Result<f64> {
        for _ in 0..self.warmup {
            let out = f();
            self.sync()?;
            drop(out);
        }
        let mut times = Vec::with_capacity(self.reps);
        for _ in 0..self.reps {
            self.sync()?;
            let t0 = Instant::now();
            let out = f();
            self.sync()?;
            times.push(t0.elapsed().as_secs_f64());
            drop(out);
        }
        Ok(median(&times))
    }

    /// Waits for every queued operation of the device.
    pub fn sync(&self) -> anyhow::Result<()> {
        self.device.sync().map_err(|e| anyhow::anyhow!("device sync failed: {e:?}"))
    }

    /// Median seconds of `f`'s forward and backward at `x`'s shape, the identity's subtracted
    /// (never below 0).
    fn fwd_bwd<const D: usize>(&self, x: &Tensor<D>, f: &dyn Fn(Tensor<D>) -> Tensor<D>) -> anyhow::Result<f64> {
        let dy = Tensor::<D>::random(x.shape(), Distribution::Normal(0.0, 1.0), &x.device());
        let harness = |g: &dyn Fn(Tensor<D>) -> Tensor<D>| {
            let y = widen(g(x.clone().require_grad()));
            (y * dy.clone()).sum().backward()
        };
        let piece = self.time(|| harness(f))?;
        let identity = self.time(|| harness(&|x| x))?;
        Ok((piece - identity).max(0.0))
    }
}

/// A part of `count` runs per step taking `secs` each.
fn part(name: &str, group: PartGroup, per_step: f64, secs: f64) -> ProfilePart {
    ProfilePart { name: name.into(), group, per_step, ms: secs * 1e3, flops: None, bytes: None }
}

/// Every linear map of a layer as (name, in, out, per layer): the attention projections
/// (grouped keys and values at `n_kv` heads) and the GLU's three.
fn layer_linears(d: &Dims) -> [(&'static str, usize, usize, usize); 4] {
    let hd = d.d_model / d.n_heads;
    let kv = d.n_kv_heads.unwrap_or(d.n_heads) * hd;
    [
        ("q, o (d×d)", d.d_model, d.d_model, 2),
        ("k, v (d×kv)", d.d_model, kv, 2),
        ("GLU in (d×ff)", d.d_model, d.d_ff, 2),
        ("GLU out (ff×d)", d.d_ff, d.d_model, 1),
    ]
}

/// The layers' matmuls: each linear map's forward `X W`, input gradient `dY Wᵀ` and weight
/// gradient `Xᵀ dY` at `tokens` rows, in the compute type, operands read as the backward
/// passes them (transposed views), through the product the model calls (`kernels`: the
/// strided gemm of the fused CPU kernels, burn's matmul elsewhere).
pub fn matmuls(t: &Timer, dims: &Dims, p: Precision, kernels: Kernels) -> anyhow::Result<Vec<ProfilePart>> {
    let rows = dims.batch * dims.seq;
    let dev = &t.device;
    let rand = |s: [usize; 2]| p.compute(Tensor::<2>::random(s, Distribution::Normal(0.0, 1.0), dev));
    let mut out = Vec::new();
    for (name, k, n, per_layer) in layer_linears(dims) {
        let (x, w, dy) = (rand([rows, k]), rand([k, n]), rand([rows, n]));
        let per_step = (per_layer * dims.n_layers) as f64;
        let flops = Some(2.0 * (rows * k * n) as f64);
        // (which product, its left and right operands)
        let cases = [("fwd", x.clone(), w.clone()), ("dX", dy.clone(), w.transpose()), ("dW", x.transpose(), dy)];
        for (which, a, b) in cases {
            let secs = t.time(|| kernels.matmul(p, a.clone(), b.clone()))?;
            out.push(ProfilePart { flops, ..part(&format!("{name} {which}"), PartGroup::Matmul, per_step, secs) });
        }
    }
    Ok(out)
}

/// Attention's core `softmax(q kᵀ/√h + M) v` of layer 0 (after projections, QK-norm and
/// RoPE), forward and backward, `[B, H, T, h]`: 12·B·H·T²·h FLOPs, the full T × T the
/// composite ops compute.
pub fn attention_core(t: &Timer, model: &Transformer, dims: &Dims) -> anyhow::Result<ProfilePart> {
    let (b, h, s) = (dims.batch, dims.n_heads, dims.seq);
    let hd = dims.d_model / h;
    let ctx = ForwardContext::new(s, model.meta.rope, model.meta.compute, &t.device);
    let p = model.meta.compute.precision;
    let rand = || Tensor::<4>::random([b, h, s, hd], Distribution::Normal(0.0, 1.0), &t.device);
    let (k, v) = (p.compute(rand()), p.compute(rand()));
    let attn = &model.layers[0].attn.f;
    let secs = t.fwd_bwd(&rand(), &|q| attn.attend(p.compute(q), k.clone(), v.clone(), &ctx))?;
    let flops = Some(12.0 * (b * h * s * s * hd) as f64);
    Ok(ProfilePart {
        flops,
        ..part("attention core (softmax(qkᵀ)v)", PartGroup::Attention, dims.n_layers as f64, secs)
    })
}

/// Layer 0's two sublayer functions F whole (projections, RoPE, attention core, gates; the
/// GLU), forward and backward: the elementwise work inside them is what they take beyond
/// their matmuls and the attention core.
pub fn sublayer_functions(t: &Timer, model: &Transformer, dims: &Dims) -> anyhow::Result<Vec<ProfilePart>> {
    let x = Tensor::<3>::random([dims.batch, dims.seq, dims.d_model], Distribution::Normal(0.0, 1.0), &t.device);
    let ctx = ForwardContext::new(dims.seq, model.meta.rope, model.meta.compute, &t.device);
    let layer = &model.layers[0];
    let attn = t.fwd_bwd(&x, &|x| layer.attn.f.forward(x, &ctx, None))?;
    let ffn = t.fwd_bwd(&x, &|x| layer.ffn.f.forward(x, &ctx))?;
    let l = dims.n_layers as f64;
    Ok(vec![
        part("attention sublayer F", PartGroup::Sublayer, l, attn),
        part("FFN sublayer F", PartGroup::Sublayer, l, ffn),
    ])
}

/// Every norm slot of layer 0 (each runs once per layer) and the embedding and final norms,
/// forward and backward in f32 (norms widen their input): at least 5 values moved per element
/// (x and y forward; x, dY and dX backward).
pub fn norms(t: &Timer, model: &Transformer, dims: &Dims) -> anyhow::Result<Vec<ProfilePart>> {
    let x = Tensor::<3>::random([dims.batch, dims.seq, dims.d_model], Distribution::Normal(0.0, 1.0), &t.device);
    let (layer, k, l) = (&model.layers[0], model.meta.compute.kernels, dims.n_layers as f64);
    let slots = [
        ("attention input norm", &layer.attn.input_norm, l),
        ("attention output norm", &layer.attn.output_norm, l),
        ("attention outer norm", &layer.attn.outer_norm, l),
        ("FFN input norm", &layer.ffn.input_norm, l),
        ("FFN output norm", &layer.ffn.output_norm, l),
        ("FFN outer norm", &layer.ffn.outer_norm, l),
        ("embedding norm", &model.emb_norm, 1.0),
        ("final norm", &model.final_norm, 1.0),
    ];
    let bytes = Some(5.0 * 4.0 * (dims.batch * dims.seq * dims.d_model) as f64);
    let mut out = Vec::new();
    for (name, norm, per_step) in slots {
        if let Some(n) = norm {
            let secs = t.fwd_bwd(&x, &|x| n.forward(x, k))?;
            out.push(ProfilePart { bytes, ..part(name, PartGroup::Norm, per_step, secs) });
        }
    }
    Ok(out)
}

/// The output head: the final hidden state's projection onto the vocabulary and the mean
/// cross-entropy, forward and backward, chunked over tokens when the model's loss is
/// (`Compute::logits_limit`): 6·N·d·V FLOPs.
pub fn loss_head(t: &Timer, model: &Transformer, dims: &Dims) -> anyhow::Result<ProfilePart> {
    use crate::model::chunked_loss::chunked_cross_entropy;
    let (n, d, vocab) = (dims.batch * dims.seq, dims.d_model, dims.vocab);
    let h = Tensor::<2>::random([n, d], Distribution::Normal(0.0, 1.0), &t.device);
    let targets = Tensor::<1, Int>::random([n], Distribution::Uniform(0.0, vocab as f64), &t.device);
    let w = model.output_weight();
    let c = model.meta.compute;
    let chunk = (c.logits_limit / vocab).max(1);
    let secs = t.time(|| {
        let h = h.clone().require_grad();
        let loss = if n * vocab <= c.logits_limit {
            let logits = widen(c.precision.matmul(h, w.clone())).reshape([1, n, vocab]);
            crate::model::transformer::cross_entropy(logits, targets.clone().reshape([1, n]))
        } else {
            chunked_cross_entropy(h, w.clone(), targets.clone(), chunk, c, model.meta.final_softcap, 0.0).objective
        };
        loss.backward()
    })?;
    let flops = Some(6.0 * (n * d * vocab) as f64);
    Ok(ProfilePart { flops, ..part("output head and cross-entropy", PartGroup::Loss, 1.0, secs) })
}

/// AdamW's step over every parameter, and the global and per-parameter gradient norms the
/// trainer measures before it (clipping, the spike detector), each from gradients computed
/// untimed before every call. AdamW moves at least 7 f32 values per parameter (reads θ, g, m,
/// v; writes θ, m, v); the norms read every gradient once.
pub fn optimizer(t: &Timer, model: Transformer, dims: &Dims) -> anyhow::Result<Vec<ProfilePart>> {
    let params = crate::model::base::params::count(&model);
    let (x, y) = dims.lcg_batch(&t.device);
    let mut optim = AdamWConfig::new().with_beta_2(0.95).with_epsilon(1e-8).with_weight_decay(0.1).init();
    let mut model = Some(model);
    let (mut steps, mut norms) = (Vec::new(), Vec::new());
    for i in 0..t.warmup + t.reps {
        let m = model.take().expect("the model is put back after every step");
        let (loss, _, _) = m.loss(x.clone(), y.clone(), false);
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        t.sync()?;
        let t0 = Instant::now();
        let measured = crate::probe::grads::measure(&m, &grads);
        t.sync()?;
        let t1 = Instant::now();
        drop(measured);
        model = Some(optim.step(1e-3, m, grads));
        t.sync()?;
        if i >= t.warmup {
            norms.push((t1 - t0).as_secs_f64());
            steps.push(t1.elapsed().as_secs_f64());
        }
    }
    let f32s = 4.0 * params as f64;
    Ok(vec![
        ProfilePart { bytes: Some(f32s), ..part("gradient norms", PartGroup::GradNorm, 1.0, median(&norms)) },
        ProfilePart { bytes: Some(7.0 * f32s), ..part("AdamW step", PartGroup::Optimizer, 1.0, median(&steps)) },
    ])
}

/// One read of a scalar from the device, the queue empty: what each host synchronisation of
/// a step costs at least. The trainer reads twice a step: the losses with the gradient norms
/// after the backward (`train::step`), and the update's size after the optimizer.
pub fn host_sync(t: &Timer) -> anyhow::Result<ProfilePart> {
    let x = Tensor::<1>::random([1], Distribution::Normal(0.0, 1.0), &t.device);
    let secs = t.time(|| -> f32 { (x.clone() + 1.0).into_scalar() })?;
    Ok(part("device reads (2 a step)", PartGroup::HostSync, 2.0, secs))
}

/// The live probe's traced forward and its statistics read back ([`crate::probe::snapshot`]),
/// run every `every` steps.
pub fn probes(t: &Timer, model: &Transformer, dims: &Dims, every: usize) -> anyhow::Result<ProfilePart> {
    let (x, _) = dims.lcg_batch(&t.device);
    let secs = t.time(|| crate::probe::snapshot::forward_probe(model, x.clone(), 8))?;
    Ok(part(&format!("probe forward (every {every} steps)"), PartGroup::Probes, 1.0 / every as f64, secs))
}
