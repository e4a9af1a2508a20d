//! Model FLOPs utilisation (MFU): the FLOP rate a training step's model arithmetic implies,
//! over the device's stated peak. FLOPs per token follow the PaLM paper (Chowdhery et al.
//! 2022, appendix B), as nanoGPT's `estimate_mfu` does: `6·N + 12·L·d·T` for a train step
//! (forward and backward), N the parameters that take part in matrix products (all but the
//! input embedding table, which is a lookup), L layers, d the model width, T the sequence
//! length; the attention term counts QKᵀ and AV over the whole T×T square, as PaLM does
//! (causal masking would halve it). The peaks are the vendors' datasheet figures for dense
//! arithmetic: f32 without tensor cores, bf16/f16 with them.

/// Stated dense peaks (TFLOP/s) by device name, as (name fragment, f32, bf16/f16). The first
/// fragment the device's name contains wins, so the specific names come first.
const PEAKS: &[(&str, f64, f64)] = &[
    ("H100 PCIe", 51.2, 756.0),
    ("H100 NVL", 60.0, 835.0),
    ("H100", 66.9, 989.4), // SXM5 (the "H100 80GB HBM3")
    ("H200", 66.9, 989.4), // same Hopper SXM compute as the H100 SXM5
    ("GH200", 66.9, 989.4),
    ("A100", 19.5, 312.0),
    ("L40S", 91.6, 362.1),
    ("RTX 4090", 82.6, 165.2),
];

/// The stated peak of a device named `name` (TFLOP/s), in half precision (bf16/f16 on tensor
/// cores) when `half`, else in f32: `NORMLAB_PEAK_TFLOPS`
/// when set (any device, e.g. one the table lacks), else the table's entry.
pub fn stated_peak(name: &str, half: bool) -> Option<f64> {
    if let Some(v) = std::env::var("NORMLAB_PEAK_TFLOPS").ok().and_then(|v| v.parse::<f64>().ok()) {
        return Some(v);
    }
    let (_, f32, half_peak) = PEAKS.iter().find(|(n, ..)| name.contains(n))?;
    Some(if half { *half_peak } else { *f32 })
}

/// The stated peak (TFLOP/s) of this process's device: a GPU's by the name the CUDA driver
/// gives it, the CPU's by its model name (known only through `NORMLAB_PEAK_TFLOPS`).
pub fn device_peak(gpu: bool, half: bool) -> Option<f64> {
    let name = match gpu {
        true => super::cuda::first_device_name().unwrap_or_default(),
        false => super::machine().cpu,
    };
    stated_peak(&name, half)
}

/// A model's shape, as the FLOP count needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlopShape {
    /// Parameters taking part in matrix products (all but the input embedding table).
    pub matmul_params: usize,
    pub layers: usize,
    pub d_model: usize,
    pub seq_len: usize,
}

/// Model FLOPs of one token's training (forward and backward): `6·N + 12·L·d·T`.
pub fn train_flops_per_token(s: FlopShape) -> f64 {
    6.0 * s.matmul_params as f64 + 12.0 * (s.layers * s.d_model * s.seq_len) as f64
}

/// MFU of `tokens_per_s` training tokens per second against `peak_tflops`.
pub fn mfu(s: FlopShape, tokens_per_s: f64, peak_tflops: f64) -> f64 {
    train_flops_per_token(s) * tokens_per_s / (peak_tflops * 1e12)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KiteNorm's Table-1 model (V 50257, d 512, 12 layers, GLU 1536, untied) at T 2048, by
    /// hand: per layer 4·512² (attention) + 3·512·1536 (SwiGLU) = 3 407 872 weights, 12 layers
    /// 40 894 464, plus the 512 × 50257 head 25 731 584 = 66 626 048 matmul parameters (norm
    /// gains are not matmuls but are counted with N by `6N`; they are 25·512 here and left
    /// out of this hand count). 6N = 399 756 288; 12·12·512·2048 = 150 994 944.
    #[test]
    fn table_one_flops_per_token_by_hand() {
        let s = FlopShape { matmul_params: 66_626_048, layers: 12, d_model: 512, seq_len: 2048 };
        assert_eq!(train_flops_per_token(s), 399_756_288.0 + 150_994_944.0);
        // 100 000 tokens/s on an H100 SXM in bf16: 5.5075e13 / 9.894e14.
        let m = mfu(s, 1e5, 989.4);
        assert!((m - 550_751_232.0 * 1e5 / 989.4e12).abs() < 1e-12, "{m}");
    }

    #[test]
    fn the_specific_name_wins_over_the_family() {
        if std::env::var_os("NORMLAB_PEAK_TFLOPS").is_some() {
            return;
        }
        assert_eq!(stated_peak("NVIDIA H100 PCIe", true), Some(756.0));
        assert_eq!(stated_peak("NVIDIA H100 80GB HBM3", true), Some(989.4));
        assert_eq!(stated_peak("NVIDIA H200", false), Some(66.9));
        assert_eq!(stated_peak("AMD Radeon", false), None);
    }
}
