//! The loader beside the step: batches drawn from a prepared corpus's memory-mapped shards (the
//! sampler training uses), and the reference model's training step on the same shards. The
//! loader runs inside the step, so its time per batch is what a step waits on data.

use crate::bench::Dims;
use crate::data::{Sampler, prepared};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoaderResult {
    pub train_tokens: usize,
    pub shards: usize,
    /// (batch, seq_len, median milliseconds per batch) for the reference and Table-1 shapes.
    pub batches: Vec<(usize, usize, f64)>,
    /// The reference model (`pre`, 8 × 256) training on the prepared shards: median
    /// milliseconds per step, loader included.
    pub step_ms: Option<f64>,
    /// The loader's share of that step.
    pub loader_share: Option<f64>,
}

/// Loader and step times on the prepared directory `dir`.
pub fn measure(dir: &Path, trainer_steps: usize) -> anyhow::Result<LoaderResult> {
    let ds = prepared::open_prepared(dir, None)?;
    let mut batches = Vec::new();
    for (b, s) in [(Dims::REFERENCE.batch, Dims::REFERENCE.seq), (4, 2048)] {
        let mut sampler = Sampler::new(7);
        let mut times = Vec::new();
        for _ in 0..200 {
            let t = std::time::Instant::now();
            std::hint::black_box(sampler.next_batch(&ds.train, b, s));
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        batches.push((b, s, crate::stats::median(&times)));
    }
    let step_ms = match trainer_steps {
        0 => None,
        n => {
            let corpus = dir.display().to_string();
            let t = crate::bench::bench_trainer_on("pre", crate::device::DeviceName::Cpu, 3, n, 0, Some(&corpus))?;
            Some((Dims::REFERENCE.batch * Dims::REFERENCE.seq) as f64 / t.train_tok_s * 1e3)
        }
    };
    let loader_share = step_ms.map(|s| batches[0].2 / s);
    Ok(LoaderResult { train_tokens: ds.train.len(), shards: ds.train.shard_count(), batches, step_ms, loader_share })
}

pub fn table(l: &LoaderResult) -> String {
    let mut t = format!("\nLoader on {} training tokens in {} shards:\n", l.train_tokens, l.shards);
    for (b, s, ms) in &l.batches {
        t += &format!("- a {b} × {s} batch: {:.3} ms\n", ms);
    }
    if let (Some(s), Some(share)) = (l.step_ms, l.loader_share) {
        t +=
            &format!("- reference model step on these shards: {s:.1} ms; the loader is {:.3} % of it\n", share * 100.0);
    }
    t
}
