//! What a report reads from a run directory, through the records' own types.

use crate::io::json;
use crate::io::jsonl;
use crate::probe::ProbeRecord;
use crate::probe::snapshot::SublayerProbe;
use crate::recipe::Placement;
use crate::recipe::placement::bounds_stream;
use crate::run::RunConfig;
use crate::run::layout::{self, RunInfo, Status};
use crate::run::metrics::{EvalRecord, LostRecord, Metrics, TasksRecord, TrainRecord};
use std::path::{Path, PathBuf};

pub struct RunData {
    pub label: String,
    pub dir: PathBuf,
    pub train: Vec<TrainRecord>,
    pub eval: Vec<EvalRecord>,
    /// Downstream task evaluations (`[eval]`), in step order.
    pub tasks: Vec<TasksRecord>,
    /// Where records were lost before a resume (`--allow-lost-records`).
    pub lost: Vec<LostRecord>,
    /// Where the run went back to a checkpoint after repeated spikes.
    pub rollbacks: Vec<crate::run::rollback::RollbackRecord>,
    pub probes: Vec<ProbeRecord>,
    pub status: Option<Status>,
    /// The run's recipe as one of the papers' plain placements, if it is one.
    pub placement: Option<Placement>,
    /// Whether the run's recipe normalises every sublayer's contribution to the stream.
    pub bounds_stream: bool,
    /// The run's config and `run.json`, when readable.
    pub config: Option<RunConfig>,
    pub info: Option<RunInfo>,
}

impl RunData {
    /// Reads what there is (a missing file leaves its part empty); a corrupt record is an
    /// error that names its file and line.
    pub fn load(dir: &Path, label: &str) -> anyhow::Result<Self> {
        let m = Metrics::read(&layout::metrics(dir))?;
        let config = RunConfig::load(Some(&layout::config(dir)), &[]).ok();
        let recipe = config.as_ref().and_then(|c| c.model.validate().ok()).map(|(_, r)| r);
        Ok(Self {
            label: label.to_string(),
            dir: dir.to_path_buf(),
            train: m.train,
            eval: m.eval,
            tasks: m.tasks,
            lost: m.lost,
            rollbacks: m.rollbacks,
            probes: jsonl::read_if_exists(&layout::probes(dir))?,
            status: layout::read_status(dir).ok().flatten(),
            placement: recipe.as_ref().and_then(Placement::of),
            bounds_stream: recipe.as_ref().is_some_and(bounds_stream),
            config,
            info: json::read::<RunInfo>(&layout::info(dir)).ok(),
        })
    }

    /// The label with the run's learning rate and seed: `pre (lr 3e-3, seed 7)`.
    pub fn legend(&self) -> String {
        match &self.config {
            Some(c) => format!("{} (lr {:e}, seed {})", self.label, c.optim.lr, c.train.seed),
            None => self.label.clone(),
        }
    }

    /// The gaps in the run's records, in words (empty when none).
    pub fn gaps(&self) -> Vec<String> {
        self.lost
            .iter()
            .map(|l| {
                format!(
                    "{}: {} bytes of records before step {} were lost and the run resumed without them \
                     (--allow-lost-records); its curves have a gap there",
                    self.label, l.bytes, l.step
                )
            })
            .collect()
    }

    /// Steps whose update the skip-step rule refused.
    pub fn skipped_steps(&self) -> Vec<usize> {
        self.train.iter().filter(|t| t.skipped.is_some()).map(|t| t.step).collect()
    }

    /// `(step, value)` of a field of the train records.
    pub fn train_series(&self, field: impl Fn(&TrainRecord) -> f64) -> Vec<(f64, f64)> {
        self.train.iter().map(|r| (r.step as f64, field(r))).collect()
    }

    /// [`RunData::train_series`] of a field some records lack (skipped steps, older runs).
    pub fn train_series_some(&self, field: impl Fn(&TrainRecord) -> Option<f64>) -> Vec<(f64, f64)> {
        self.train.iter().filter_map(|r| Some((r.step as f64, field(r)?))).collect()
    }

    pub fn eval_series(&self) -> Vec<(f64, f64)> {
        self.eval.iter().map(|r| (r.step as f64, r.val_loss)).collect()
    }

    /// `(l, value)` over the sublayers of one probe record.
    pub fn per_layer(probe: &ProbeRecord, value: impl Fn(&SublayerProbe) -> Option<f64>) -> Vec<(f64, f64)> {
        probe.forward.sublayers.iter().filter_map(|s| Some((s.l as f64, value(s)?))).collect()
    }

    pub fn first_probe(&self) -> Option<&ProbeRecord> {
        self.probes.first()
    }

    pub fn last_probe(&self) -> Option<&ProbeRecord> {
        self.probes.last()
    }

    /// Up to `n` probe records evenly spread over training (first and last included).
    pub fn probe_steps(&self, n: usize) -> Vec<&ProbeRecord> {
        let k = self.probes.len();
        if k <= n {
            return self.probes.iter().collect();
        }
        let mut idx: Vec<usize> = (0..n).map(|i| i * (k - 1) / (n - 1)).collect();
        idx.dedup();
        idx.into_iter().map(|i| &self.probes[i]).collect()
    }
}
