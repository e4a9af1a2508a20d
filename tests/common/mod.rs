//! Helpers shared by the integration tests; each test crate uses a subset of them.
#![allow(dead_code)]

use std::path::Path;

#[path = "../../src/testutil/scratch.rs"]
mod scratch;
pub use scratch::Scratch;

/// A sweep's `results.jsonl` without the timing columns (they differ from run to run).
pub fn results_without_timings(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            for k in ["wall_s", "tokens_per_s", "time_to_target_s"] {
                v.as_object_mut().unwrap().remove(k);
            }
            v
        })
        .collect()
}

/// A run's `metrics.jsonl` records without their timing fields (they differ from run to run;
/// no other field may).
pub fn metrics_without_timings(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("tokens_per_s");
            o.remove("wall_s");
            v
        })
        .collect()
}
