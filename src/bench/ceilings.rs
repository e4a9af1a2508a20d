//! What the device can do at best, measured in the same invocation as the profile: one large
//! matrix product (`n × n · n × n` in the compute type) and one large elementwise pass
//! (`y = x + 1`, read once and written once), through burn and, with `--torch-python`, through
//! PyTorch on the same device (`tools/torch_ceilings.py`: cuBLAS on CUDA). A profile's rates
//! are read against these rather than against datasheet peaks no kernel reaches.

use super::profile_parts::Timer;
use crate::kernels::Precision;
use burn::tensor::{Distribution, Tensor};
use serde::{Deserialize, Serialize};

/// One tool's two ceilings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// `2·n³` FLOPs over the median time of one product.
    pub gemm_tflops: f64,
    /// Bytes read and written by the elementwise pass over its median time.
    pub copy_gbs: f64,
}

/// The sizes the ceilings are measured at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CeilingSizes {
    /// The product's `n`.
    pub gemm_n: usize,
    /// The elementwise pass's length (values).
    pub copy_len: usize,
}

impl CeilingSizes {
    /// Large enough to saturate a data-centre GPU (a 4096³ product, 2 GiB moved in f32), or
    /// a CPU core pair (1024³, 256 MiB).
    pub fn for_device(gpu: bool) -> Self {
        if gpu { Self { gemm_n: 4096, copy_len: 1 << 28 } } else { Self { gemm_n: 1024, copy_len: 1 << 25 } }
    }
}

/// burn's ceilings on `t`'s device in `p` (the product's operands in the compute type, the
/// elementwise pass in f32 as the norms and the residual stream run).
pub fn burn(t: &Timer, sizes: CeilingSizes, p: Precision) -> anyhow::Result<Ceiling> {
    let n = sizes.gemm_n;
    let rand = || p.compute(Tensor::<2>::random([n, n], Distribution::Normal(0.0, 1.0), &t.device));
    let (a, b) = (rand(), rand());
    let gemm = t.time(|| a.clone().matmul(b.clone()))?;
    // The tensor is handed back each time, so the backend may write in place: no allocation
    // (and on the CPU no page faults) in the timed pass.
    let mut x = Some(Tensor::<1>::random([sizes.copy_len], Distribution::Normal(0.0, 1.0), &t.device));
    let copy = t.time(|| x = x.take().map(|x| x + 1.0))?;
    Ok(Ceiling { gemm_tflops: 2.0 * (n as f64).powi(3) / gemm / 1e12, copy_gbs: copy_bytes(sizes) / copy / 1e9 })
}

/// Bytes the elementwise pass moves: its f32 input read once, its output written once.
fn copy_bytes(sizes: CeilingSizes) -> f64 {
    2.0 * 4.0 * sizes.copy_len as f64
}

/// PyTorch's ceilings (`script`: `tools/torch_ceilings.py`) on `device` (`cuda` or `cpu`) in
/// `p`, at the same sizes and repetitions.
pub fn torch(
    (python, script): (&str, &str),
    device: &str,
    sizes: CeilingSizes,
    p: Precision,
    reps: usize,
) -> anyhow::Result<Ceiling> {
    let dtype = format!("{p:?}").to_lowercase();
    let args: Vec<String> = [
        "--device",
        device,
        "--dtype",
        &dtype,
        "--gemm-n",
        &sizes.gemm_n.to_string(),
        "--copy-len",
        &sizes.copy_len.to_string(),
        "--reps",
        &reps.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    super::torch::run_json(python, script, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elementwise_pass_moves_its_input_and_output_once() {
        // 2²⁵ f32 values: 128 MiB read and 128 MiB written.
        assert_eq!(copy_bytes(CeilingSizes::for_device(false)), 268_435_456.0);
        assert_eq!(copy_bytes(CeilingSizes { gemm_n: 1, copy_len: 3 }), 24.0);
    }
}
