//! Helpers shared by the unit tests: f64 tensors and central finite differences.

use burn::tensor::{DType, Device, Tensor, TensorData};

pub fn cpu() -> Device {
    Device::flex()
}

/// An f64 tensor of the given shape; `grad` makes it a tracked autodiff leaf.
pub fn f64_tensor<const D: usize>(values: &[f64], shape: [usize; D], grad: bool) -> Tensor<D> {
    let device = if grad { cpu().autodiff() } else { cpu() };
    let t = Tensor::<D>::from_data(TensorData::new(values.to_vec(), shape), (&device, DType::F64));
    if grad { t.require_grad() } else { t }
}

pub fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().convert::<f64>().as_slice::<f64>().expect("f64 data").to_vec()
}

/// Deterministic pseudo-random values in (−1, 1).
pub fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = crate::model::init::SplitMix64::new(seed);
    (0..n).map(|_| rng.uniform() * 2.0 - 1.0).collect()
}

/// Central differences of the scalar `f` with respect to each entry of `inputs[which]`.
pub fn finite_diff(inputs: &[Vec<f64>], which: usize, h: f64, f: &dyn Fn(&[Vec<f64>]) -> f64) -> Vec<f64> {
    (0..inputs[which].len())
        .map(|i| {
            let mut plus = inputs.to_vec();
            let mut minus = inputs.to_vec();
            plus[which][i] += h;
            minus[which][i] -= h;
            (f(&plus) - f(&minus)) / (2.0 * h)
        })
        .collect()
}

/// Max |a − b| / max(max |b|, floor).
pub fn rel_err(a: &[f64], b: &[f64], floor: f64) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(floor, |m, v| m.max(v.abs()));
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale
}
