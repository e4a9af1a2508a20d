//! `tracking.json` (in a run or sweep directory): the server, experiment and run a directory
//! is tracked as, and how much of its `metrics.jsonl` the server has. A resumed run goes on
//! in the same server run; `normlab track DIR` sends what a run could not.

use crate::io::json;
use crate::run::layout;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrackState {
    /// `run.track` as given (`mlflow:http://…`).
    pub target: String,
    pub experiment: String,
    pub experiment_id: Option<String>,
    pub run_id: Option<String>,
    /// The sweep's run this one belongs to (MLflow's `mlflow.parentRunId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// Bytes of `metrics.jsonl` whose records the server has.
    pub delivered_bytes: u64,
    /// Whether the server has the run's params.
    pub params_sent: bool,
    /// The last status the server was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why sending stopped, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undelivered: Option<String>,
}

impl TrackState {
    /// The directory's state, when it has one.
    pub fn read(dir: &Path) -> anyhow::Result<Option<Self>> {
        let p = layout::tracking(dir);
        if !p.is_file() {
            return Ok(None);
        }
        json::read(&p).map(Some)
    }

    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        json::write(&layout::tracking(dir), self)
    }
}
