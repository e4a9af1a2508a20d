//! DeepScaleLM's moment-control initialisation (Kedia et al., 2024, "Transformers Get Stable:
//! An End-to-End Signal Propagation Theory for Language Models"; the authors' Megatron-LM code,
//! `moment_control_sigma` and `sigma_attn_v_out`): every weight is drawn so that each component
//! has unit output variance at initialisation, given unit-variance input.
//!
//! ```text
//! embedding        σ = 1                       (one embedding table, no dropout)
//! W_Q, W_K         σ² = 1/d
//! W_V, W_O (layer) σ⁴ = 1/(r·d·d_q)            r: token correlation entering that attention
//! MLP (GeLU, m)    σ₁⁴ = σ₂⁴ = 2/(m·d)         the authors' ReLU moments (m = 4d: σ⁴ = 1/(2d²))
//! GLU (SiLU, m)    σ₁² = σ₃² = 1/d, σ₂² = 1/(m·E[SiLU(z)²])
//! output W_out     σ² = 1/d
//! ```
//!
//! `r` follows the authors' recursion: uniform attention at initialisation makes every position
//! the same average (`r_attn = 1`); the FFN maps `r` by its activation's kernel (ReLU:
//! `r + (√(1−r²) − r·acos r)/π`; GLU: `r·E[SiLU(a)SiLU(b)]/E[SiLU(a)²]`, `corr(a, b) = r`); each
//! residual sum mixes stream and branch by their variances, `r ← (a²·v·r + c²·r_F)/(a²·v + c²)`,
//! `v ← a²·v + c²` (with DeepScaleLM's `λ² + β² = 1`, `v` stays 1). An outer norm resets `v` to 1.
//! The GLU rows are this module's: the authors derive the GeLU MLP only; the GLU gets the same
//! rule (unit output variance) with SiLU's moments by quadrature.

use crate::model::model_config::{FfnKind, ModelConfig};
use crate::recipe::{Branch, MomentControl, SublayerPlan};
use anyhow::ensure;

/// The standard deviations DeepScaleLM draws a model's weights with.
#[derive(Clone, Debug, PartialEq)]
pub struct MomentSigmas {
    pub embedding: f64,
    pub qk: f64,
    /// `W_V` and `W_O` of each Transformer layer (the same σ for both).
    pub attn: Vec<f64>,
    /// `W_1` (and `W_3`).
    pub ffn_in: f64,
    /// `W_2`.
    pub ffn_out: f64,
    pub output: f64,
}

/// The σ's for a model of `cfg` whose sublayers are `plans`.
pub fn sigmas(cfg: &ModelConfig, plans: &[SublayerPlan], mc: MomentControl) -> anyhow::Result<MomentSigmas> {
    ensure!(
        !cfg.tie_embeddings,
        "DeepScaleLM draws the embedding at σ = 1 and the output projection at σ² = 1/d; set model.tie_embeddings \
            = false"
    );
    let (d, dq, m) = (cfg.d_model as f64, (cfg.n_heads * cfg.head_dim()) as f64, cfg.d_ff() as f64);
    let activation = match cfg.ffn {
        FfnKind::Mlp => Activation::Relu,
        FfnKind::Glu => Activation::SiluGlu,
    };
    let (ffn_in, ffn_out) = match activation {
        Activation::Relu => ((2.0 / (m * d)).powf(0.25), (2.0 / (m * d)).powf(0.25)),
        Activation::SiluGlu => (d.powf(-0.5), 1.0 / (m * silu_second_moment()).sqrt()),
    };
    let attn = correlations(plans, mc.r0, activation).into_iter().map(|r| (1.0 / (r * d * dq)).powf(0.25)).collect();
    Ok(MomentSigmas { embedding: 1.0, qk: d.powf(-0.5), attn, ffn_in, ffn_out, output: d.powf(-0.5) })
}

/// The init std of one Transformer layer's matrices, as `std` times a multiplier per matrix:
/// `model.init_std` and the recipe's init scales, or the moment-control σ's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerInit {
    pub std: f64,
    pub attn_qk: f64,
    pub attn_in: f64,
    pub attn_out: f64,
    pub ffn_in: f64,
    pub ffn_out: f64,
}

impl LayerInit {
    /// Layer `layer` (0-based) of a model of `cfg` with sublayers `attn`, `ffn`.
    pub fn new(
        cfg: &ModelConfig,
        attn: &SublayerPlan,
        ffn: &SublayerPlan,
        sigmas: Option<&MomentSigmas>,
        layer: usize,
    ) -> Self {
        match sigmas {
            None => Self {
                std: cfg.init_std,
                attn_qk: 1.0,
                attn_in: attn.init_in,
                attn_out: attn.init_out,
                ffn_in: ffn.init_in,
                ffn_out: ffn.init_out,
            },
            Some(s) => Self {
                std: 1.0,
                attn_qk: s.qk,
                attn_in: s.attn[layer],
                attn_out: s.attn[layer],
                ffn_in: s.ffn_in,
                ffn_out: s.ffn_out,
            },
        }
    }
}

/// The FFN's activation as the moment recursion sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// The authors' treatment of the GeLU MLP: ReLU's moments.
    Relu,
    /// `SiLU(x W_1) ⊙ x W_3`.
    SiluGlu,
}

impl Activation {
    /// The correlation of the FFN's outputs at two positions whose inputs correlate by `r`.
    pub fn correlation(self, r: f64) -> f64 {
        let r = r.clamp(-1.0, 1.0);
        match self {
            Activation::Relu => r + ((1.0 - r * r).sqrt() - r * r.acos()) / std::f64::consts::PI,
            Activation::SiluGlu => r * silu_kernel(r) / silu_second_moment(),
        }
    }
}

/// The token correlation entering each Transformer layer's attention.
pub fn correlations(plans: &[SublayerPlan], r0: f64, activation: Activation) -> Vec<f64> {
    let (mut r, mut v) = (r0, 1.0);
    let mut entering = Vec::with_capacity(plans.len() / 2);
    for p in plans {
        let branch_r = match p.branch {
            Branch::Attn => {
                entering.push(r);
                1.0
            }
            Branch::Ffn => activation.correlation(r),
        };
        let (a2, c2) = (p.skip * p.skip, p.residual * p.residual);
        let mixed = a2 * v + c2;
        r = (a2 * v * r + c2 * branch_r) / mixed;
        v = if p.outer.is_some() { 1.0 } else { mixed };
    }
    entering
}

/// `E[SiLU(z)²]`, `z ~ N(0, 1)`.
pub fn silu_second_moment() -> f64 {
    silu_kernel(1.0)
}

/// `E[SiLU(a)·SiLU(b)]` for standard normal `a`, `b` with correlation `r`, by the trapezoid
/// rule on a grid of step 1/8 over [−10, 10]² (SiLU is analytic in a strip of half-width π, so
/// the rule's error is below 1e-12).
fn silu_kernel(r: f64) -> f64 {
    const H: f64 = 0.125;
    const N: i32 = 80;
    let s = (1.0 - r * r).max(0.0).sqrt();
    let weight = |z: f64| (-0.5 * z * z).exp() * H / (2.0 * std::f64::consts::PI).sqrt();
    let mut total = 0.0;
    for i in -N..=N {
        let x = f64::from(i) * H;
        let inner: f64 = (-N..=N).map(|j| f64::from(j) * H).map(|y| weight(y) * silu(r * x + s * y)).sum();
        total += weight(x) * silu(x) * inner;
    }
    total
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relu_kernel_is_the_arc_cosine_kernel() {
        // Uncorrelated inputs: E[ReLU(a)ReLU(b)] / E[ReLU²] = (1/2π) / (1/2) = 1/π.
        assert!((Activation::Relu.correlation(0.0) - 1.0 / std::f64::consts::PI).abs() < 1e-15);
        assert!((Activation::Relu.correlation(1.0) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn silu_kernel_at_the_ends() {
        // r = 0: E[SiLU(a)]², E[SiLU(z)] = E[z·sigmoid(z)] = E[sigmoid′(z)] (Stein's lemma).
        let stein: f64 = silu_kernel_mean_by_stein();
        assert!((silu_kernel(0.0) - stein * stein).abs() < 1e-10, "{} vs {}", silu_kernel(0.0), stein * stein);
        assert!((Activation::SiluGlu.correlation(1.0) - 1.0).abs() < 1e-12);
    }

    /// The σ's against tools/make_reference_fixtures.py's own recursion (Gauss–Hermite for the
    /// GLU), for the `deepscalelm` preset at three shapes.
    #[test]
    fn sigmas_match_the_pytorch_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reference/moment_control.json");
        let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut checked = 0;
        for case in &cases {
            if let Some(m) = case.get("silu_second_moment") {
                assert!((silu_second_moment() - m.as_f64().unwrap()).abs() < 1e-12);
                let half = case["silu_kernel_half"].as_f64().unwrap();
                assert!((silu_kernel(0.5) - half).abs() < 1e-12);
                continue;
            }
            let (c, want) = (&case["case"], &case["sigmas"]);
            let got = sigmas_for(c);
            let close = |a: f64, b: &serde_json::Value| (a - b.as_f64().unwrap()).abs() <= 1e-12 * a.abs().max(1.0);
            assert!(
                close(got.qk, &want["qk"])
                    && close(got.output, &want["output"])
                    && close(got.embedding, &want["embedding"])
            );
            assert!(close(got.ffn_in, &want["ffn_in"]) && close(got.ffn_out, &want["ffn_out"]), "{c}: {got:?}");
            let attn = want["attn"].as_array().unwrap();
            assert_eq!(got.attn.len(), attn.len());
            for (g, w) in got.attn.iter().zip(attn) {
                assert!(close(*g, w), "{c}: attention σ {g} against {w}");
            }
            checked += 1;
        }
        assert_eq!(checked, 3);
    }

    fn sigmas_for(c: &serde_json::Value) -> MomentSigmas {
        let n = |k: &str| c[k].as_u64().unwrap() as usize;
        let ffn = if c["ffn"] == "mlp" { FfnKind::Mlp } else { FfnKind::Glu };
        let cfg = ModelConfig {
            d_model: n("d_model"),
            n_layers: n("n_layers"),
            n_heads: n("n_heads"),
            head_dim: Some(n("head_dim")),
            ffn,
            d_mlp: Some(n("d_ff")),
            d_glu: Some(n("d_ff")),
            ..Default::default()
        };
        let mut spec = crate::recipe::preset("deepscalelm").unwrap();
        let r0 = c["r0"].as_f64().unwrap();
        spec.init = crate::recipe::InitSpec::MomentControl(crate::recipe::MomentControlSpec { r0 });
        let dims = crate::recipe::Dims { n_layers: cfg.n_layers, d_model: cfg.d_model };
        let plans = crate::recipe::resolve(&spec, dims, 1e-6).unwrap();
        sigmas(&cfg, &plans.sublayers, plans.init.moment_control().unwrap()).unwrap()
    }

    /// `E[sigmoid′(z)]` by a one-dimensional trapezoid of its own (step 1/64).
    fn silu_kernel_mean_by_stein() -> f64 {
        let h = 1.0 / 64.0;
        (-640..=640)
            .map(|i| f64::from(i) * h)
            .map(|z| {
                let s = 1.0 / (1.0 + (-z).exp());
                s * (1.0 - s) * (-0.5 * z * z).exp() * h / (2.0 * std::f64::consts::PI).sqrt()
            })
            .sum()
    }
}
