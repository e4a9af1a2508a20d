//! What a training forward reports beside its cross-entropy, by name: the terms it adds to the
//! loss (KiteNorm's variance regulariser, PaLM's z-loss, a MoE model's balancing loss and
//! router z-loss) and the readings the step combines over its micro-batches and ranks for the
//! after-step hooks and the metrics (QK-clip's logit maxima, TaperNorm's calibration, the
//! experts' load). The trainer and the metrics writer know each only by its name.

use burn::tensor::Tensor;

/// One term of the loss: `weight · value` is in the loss; `value` (`[1]`) is what the metrics
/// report under `name`.
pub struct LossTerm {
    pub name: &'static str,
    pub value: Tensor<1>,
    pub weight: f64,
}

/// How a step combines a reading over its micro-batches and ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The mean over the step's micro-batches.
    Mean,
    /// The sum over the step's micro-batches.
    Sum,
    /// The element-wise largest value.
    Max,
}

/// One row of a reading (a layer's, a slot's): a vector on the device, or already on the host.
/// (A handful per micro-batch: the tensor stays inline.)
#[allow(clippy::large_enum_variant)]
pub enum Row {
    Device(Tensor<1>),
    Host(Vec<f64>),
}

/// A value a training forward reports to its step: one row per layer or slot, each a vector.
pub struct Reading {
    pub name: &'static str,
    pub reduce: Reduce,
    pub rows: Vec<Row>,
}

impl Reading {
    /// A reading whose rows are on the device.
    pub fn device(name: &'static str, reduce: Reduce, rows: Vec<Tensor<1>>) -> Self {
        Self { name, reduce, rows: rows.into_iter().map(Row::Device).collect() }
    }

    /// A reading whose rows are on the host.
    pub fn host(name: &'static str, reduce: Reduce, rows: Vec<Vec<f64>>) -> Self {
        Self { name, reduce, rows: rows.into_iter().map(Row::Host).collect() }
    }
}

/// A step's readings and loss terms combined over its micro-batches and ranks, by name: one
/// vector per row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReadings {
    values: std::collections::BTreeMap<&'static str, Vec<Vec<f64>>>,
}

impl StepReadings {
    pub fn insert(&mut self, name: &'static str, rows: Vec<Vec<f64>>) {
        self.values.insert(name, rows);
    }

    /// The rows of `name` (empty when the step has no such reading).
    pub fn rows(&self, name: &str) -> &[Vec<f64>] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// The value of a one-row, one-value reading or loss term `name`, when the step has it.
    pub fn scalar(&self, name: &str) -> Option<f64> {
        self.rows(name).first().and_then(|r| r.first()).copied()
    }

    /// Every reading's name.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.values.keys().copied()
    }
}
