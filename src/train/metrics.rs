//! `metrics.jsonl`: one JSON object per line, `"type": "train"` for each step and
//! `"type": "eval"` for each validation pass. A resumed run truncates the file to the length
//! recorded in its checkpoint, so the file always matches the checkpointed state.

use anyhow::Context;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Serialize)]
pub struct TrainRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// 1-based: the number of optimizer steps taken after this one.
    pub step: usize,
    /// Cross-entropy + λ·R, mean over the batch.
    pub loss: f64,
    pub ce: f64,
    /// The variance regulariser R (seed 000 eq. 24), before λ; null without a regulariser.
    pub reg: Option<f64>,
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
    pub tokens: u64,
    pub tokens_per_s: f64,
    /// Seconds since the run started (summed over resumed sessions).
    pub wall_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct EvalRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub step: usize,
    pub val_loss: f64,
    pub val_ppl: f64,
    pub val_tokens: usize,
    pub wall_s: f64,
}

pub struct MetricsWriter {
    path: PathBuf,
    file: std::fs::File,
}

impl MetricsWriter {
    /// Opens for appending after truncating to `keep_bytes` (0 for a fresh run).
    pub fn open(path: &Path, keep_bytes: u64) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.set_len(keep_bytes)?;
        let mut w = Self { path: path.to_path_buf(), file };
        use std::io::Seek;
        w.file.seek(std::io::SeekFrom::End(0))?;
        Ok(w)
    }

    pub fn write<T: Serialize>(&mut self, record: &T) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line).with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Current length; saved in checkpoints.
    pub fn len(&mut self) -> anyhow::Result<u64> {
        self.file.flush()?;
        Ok(self.file.metadata()?.len())
    }
}

/// Reads every record of a metrics file (for tests, reports and `eval`).
pub fn read(path: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines().map(|l| Ok(serde_json::from_str(l)?)).collect()
}
