//! Helpers shared by the unit tests: f64 tensors and central finite differences.
//!
//! - [`scratch`]: a test's scratch directory, removed when the test passes
//! - [`planted`]: a corpus with a planted loss spike

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
    let mut rng = crate::rng::SplitMix64::new(seed);
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

/// Writes a small deterministic English-like corpus (≈ `n_sentences` sentences) to `path`:
/// enough structure for a model to learn in a few steps, no download.
pub fn write_tiny_corpus(path: &std::path::Path, n_sentences: usize) {
    let subjects = ["The council", "Our nation", "The treasury", "Congress", "The people", "This government"];
    let verbs = ["has approved", "will consider", "must protect", "shall review", "has reduced", "can improve"];
    let objects = [
        "the public debt.",
        "the common defense.",
        "our commerce.",
        "the new treaty.",
        "the harbors.",
        "the post roads.",
    ];
    let mut rng = crate::rng::SplitMix64::new(11);
    let mut text = String::new();
    for i in 0..n_sentences {
        let mut pick = |xs: &[&str]| xs[(rng.next_u64() % xs.len() as u64) as usize].to_string();
        text += &format!("{} {} {}", pick(&subjects), pick(&verbs), pick(&objects));
        text.push(if i % 7 == 6 { '\n' } else { ' ' });
    }
    std::fs::write(path, text).unwrap();
}

mod planted;
mod scratch;
pub use planted::write_planted_corpus;
pub use scratch::Scratch;

/// A fresh empty directory for one test, removed when the test passes.
pub fn temp_dir(name: &str) -> Scratch {
    Scratch::new(&format!("test-{name}"))
}
