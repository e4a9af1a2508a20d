//! The memory a training step needs, estimated before step 1, and the refusal when it cannot
//! fit: weights, gradients and AdamW's two moments (4 copies of the parameters) plus the
//! activations one micro-batch keeps for its backward pass.
//!
//! Per layer and token the fused path keeps about `7d + 3·d_ff + H·T` values: the normed
//! inputs, q, k, v and the attention output (`d` each), the gate's two inputs and its output
//! (`d_ff` each) and one row of attention probabilities (`H·T`); the output layer keeps the
//! logits, their softmax and gradient for one chunk (≤ 2²⁶ values, see `LOGITS_LIMIT`). On the
//! reference benchmark model (d 256, 6 layers, GLU 688, 8 × 256 tokens) this gives 321 MB
//! against a measured peak RSS of 347 MB (`normlab bench`); the composite kernels keep more.
//! A MoE layer's feed-forward part is [`crate::model::ModelConfig::ffn_values_per_token`].

use crate::model::LOGITS_LIMIT;
use crate::run::config::RunConfig;

/// The estimate, in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Weights, gradients and the two AdamW moments.
    pub parameters: f64,
    /// What one micro-batch keeps for its backward pass.
    pub activations: f64,
}

impl MemoryEstimate {
    pub fn total(&self) -> f64 {
        self.parameters + self.activations
    }
}

/// The estimate for `cfg` with `params` parameters: f32 parameters and state; the layers'
/// activations in `train.precision` (a half type also keeps a half copy of each weight for
/// its matmuls), the logits in f32. In f64 throughout, so that no size overflows.
pub fn estimate(cfg: &RunConfig, params: f64) -> MemoryEstimate {
    let m = &cfg.model;
    let tokens = cfg.train.micro_batch_size.unwrap_or(cfg.train.batch_size) as f64 * cfg.train.seq_len as f64;
    let per_layer = 7.0 * m.d_model as f64 + m.ffn_values_per_token() + m.n_heads as f64 * cfg.train.seq_len as f64;
    let logits = 3.0 * (tokens * m.vocab_size as f64).min(LOGITS_LIMIT as f64);
    let (f32, act) = (4.0, cfg.train.precision.bytes() as f64);
    let half_weights = if act < f32 { params * act } else { 0.0 };
    MemoryEstimate {
        parameters: 4.0 * params * f32 + half_weights,
        activations: m.n_layers as f64 * tokens * per_layer * act + logits * f32,
    }
}

/// Refuses a step that cannot fit in `available` bytes (when the device reports it).
pub fn check(est: MemoryEstimate, available: Option<f64>) -> anyhow::Result<()> {
    let Some(a) = available.filter(|&a| est.total() > a) else { return Ok(()) };
    // What can help: a smaller model when its state alone is too large, else smaller steps.
    let fix = if est.parameters > a {
        "the model alone is too large for this machine: choose fewer layers (model.n_layers) or a smaller width \
         (model.d_model)"
    } else {
        "lower train.micro_batch_size (gradients accumulate to the same batch) or train.seq_len, or set \
         train.checkpoint_activations = true"
    };
    anyhow::bail!(
        "a training step needs about {} ({} parameters, gradients and AdamW state; {} activations per micro-batch) \
         but the device has {} available; {fix}",
        bytes(est.total()),
        bytes(est.parameters),
        bytes(est.activations),
        bytes(a)
    )
}

/// `b` bytes in GB, or in scientific notation past a petabyte.
fn bytes(b: f64) -> String {
    if b < 1e15 { format!("{:.1} GB", b / 1e9) } else { format!("{:.1e} GB", b / 1e9) }
}

/// Memory available to a new allocation on this machine (Linux `MemAvailable`), for the CPU
/// device; `None` where it is not known (GPU backends do not report it through burn).
pub fn available_cpu() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;

    #[test]
    fn the_estimate_counts_parameters_and_activations_by_hand() {
        let mut cfg = RunConfig::default();
        cfg.model = ModelConfig { d_model: 8, n_layers: 2, n_heads: 2, d_glu: Some(16), vocab_size: 10, ..cfg.model };
        cfg.train.batch_size = 4;
        cfg.train.micro_batch_size = Some(2);
        cfg.train.seq_len = 3;
        let e = estimate(&cfg, 1000.0);
        assert_eq!(e.parameters, 16_000.0);
        // 6 tokens; per layer and token 7·8 + 3·16 + 2·3 = 110 values; logits 3 · 6 · 10.
        assert_eq!(e.activations, (2.0 * 6.0 * 110.0 + 180.0) * 4.0);
        assert!(check(e, Some(1e9)).is_ok());
        // 16 000 bytes of state fit in 20 000, with 6 000 of activations they do not.
        let msg = check(e, Some(20_000.0)).unwrap_err().to_string();
        assert!(msg.contains("train.micro_batch_size") && msg.contains("available"), "{msg}");
        let msg = check(e, Some(1000.0)).unwrap_err().to_string();
        assert!(msg.contains("the model alone is too large"), "{msg}");
        assert!(check(e, None).is_ok(), "unknown capacity: no refusal");
        cfg.train.precision = crate::kernels::Precision::Bf16;
        let h = estimate(&cfg, 1000.0);
        // A bf16 copy of the weights (2 bytes each); layer activations at 2 bytes, logits at 4.
        assert_eq!(h.parameters, 18_000.0);
        assert_eq!(h.activations, 2.0 * 6.0 * 110.0 * 2.0 + 180.0 * 4.0);
    }

    #[test]
    fn matrix_params_counts_every_matrix_of_a_built_model() {
        use crate::init::ParamSource;
        use crate::model::{FfnKind, Transformer};
        let base = ModelConfig { d_model: 16, n_layers: 3, n_heads: 4, vocab_size: 40, ..ModelConfig::default() };
        let configs = [
            base.clone(),
            ModelConfig { n_kv_heads: Some(2), attn_bias: true, tie_embeddings: true, ..base.clone() },
            ModelConfig {
                ffn: FfnKind::Mlp,
                recipe: crate::recipe::RecipeConfig::Preset("kitenorm".into()),
                ..base.clone()
            },
            ModelConfig {
                moe: Some(
                    toml::from_str("experts = 4\ntop_k = 2\nd_expert = 8\nshared = 1\nfirst_dense = 1\nrouter = { kind = \"sigmoid\" }")
                        .unwrap(),
                ),
                ..base.clone()
            },
        ];
        // By hand for the MoE: layer 0 dense (3·16·48), layers 1–2 a router 16·4 and 4 + 1
        // experts of 3·16·8.
        let moe_layers = 3.0 * 16.0 * 48.0 + 2.0 * (16.0 * 4.0 + 5.0 * 3.0 * 16.0 * 8.0);
        assert_eq!(configs[3].matrix_params(), 2.0 * 40.0 * 16.0 + 3.0 * 4.0 * 256.0 + moe_layers);
        // By hand for the first: embedding and output 2·40·16, per layer 4·16² + 3·16·48 (GLU 48).
        assert_eq!(configs[0].matrix_params(), 2.0 * 40.0 * 16.0 + 3.0 * (4.0 * 256.0 + 3.0 * 16.0 * 48.0));
        for cfg in configs {
            let model = Transformer::new(&cfg, ParamSource::Seeded(1), &crate::testutil::cpu()).unwrap();
            let exact = crate::model::base::params::count(&model) as f64;
            let norms = exact - cfg.matrix_params();
            // What is left out: gains, shifts and scales, a few d-vectors per sublayer.
            assert!((0.0..=8.0 * 16.0 * (2.0 * 3.0 + 2.0)).contains(&norms), "{norms} for {cfg:?}");
        }
    }

    #[test]
    fn a_model_too_large_for_any_machine_is_refused_from_its_sizes() {
        let mut cfg = RunConfig::default();
        cfg.model.d_model = 1_000_000_000;
        let e = estimate(&cfg, cfg.model.matrix_params());
        assert!(e.total() > 1e18 && e.total().is_finite(), "{e:?}");
        assert!(check(e, Some(24e9)).is_err());
    }
}
