//! The applied update's size on a probe step, by layer and by parameter kind: `RMS(ΔW)` and
//! the update/weight ratio `‖ΔW‖/‖W‖` (the trainer measures them; see `train::update`).

use crate::io::json::nan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One group's update size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UpdateStat {
    #[serde(deserialize_with = "nan")]
    pub rms: f64,
    #[serde(deserialize_with = "nan")]
    pub ratio: f64,
}

/// By parameter kind (`wq`, `wk`, `wv`, `wo`, `w1`, `w2`, `w3`, `tok_emb`, `lm_head`, `vector`)
/// and by Transformer layer (1-based, in order; every parameter under `layers.{i}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateBreakdown {
    pub by_kind: BTreeMap<String, UpdateStat>,
    pub by_layer: Vec<UpdateStat>,
}

impl UpdateBreakdown {
    /// The TensorBoard tags `update_ratio/kind/wq`, `update_ratio/l001`…
    pub fn tags(&self) -> Vec<(String, f32)> {
        let kinds = self.by_kind.iter().map(|(k, s)| (format!("update_ratio/kind/{k}"), s.ratio as f32));
        let layers =
            self.by_layer.iter().enumerate().map(|(i, s)| (format!("update_ratio/l{:03}", i + 1), s.ratio as f32));
        kinds.chain(layers).collect()
    }
}
