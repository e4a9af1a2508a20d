//! `normlab probe`: the probes of a saved run (or, with `--init`, of the initial model its
//! training started from) on micro-batches of windows, printed and written to
//! `RUN/probes/{init,step-N}.json`.

use super::log;
use super::windows::eval_windows;
use crate::data::windows::windows;
use crate::io::json;
use crate::probe::offline::{OfflineProbe, probe_model};
use crate::run::{SavedRun, layout, load_run};
use anyhow::ensure;
use burn::tensor::{Int, Tensor, TensorData};
use std::path::{Path, PathBuf};

pub fn probe(path: &Path, data: Option<PathBuf>, batches: usize, init: bool) -> anyhow::Result<()> {
    let (p, out, source) = measure(path, data.as_deref(), batches, init, &log)?;
    outln!("{}", crate::probe::offline::table(&p));
    outln!("windows from {source}; JSON in {}", out.display());
    Ok(())
}

/// The probe on `batches` micro-batches of windows, where it was written and the windows'
/// source.
pub fn measure(
    path: &Path,
    data: Option<&Path>,
    batches: usize,
    init: bool,
    log: &dyn Fn(&str),
) -> anyhow::Result<(OfflineProbe, PathBuf, String)> {
    ensure!(batches > 0, "--batches must be > 0");
    let saved = if init {
        let (cfg, tokenizer) = load_run(path)?;
        SavedRun { run: path.to_path_buf(), weights: PathBuf::new(), cfg, tokenizer }
    } else {
        SavedRun::open(path)?
    };
    let device = saved.cfg.open_device()?;
    let ad = device.clone().autodiff();
    let (model, at) = match init {
        true => (None, "init".to_string()),
        false => {
            let step = crate::io::tensors::read(&saved.weights)?.metadata.get("step").cloned().unwrap_or_default();
            (Some(saved.model(&ad)?), format!("step-{step}"))
        }
    };
    let SavedRun { run, cfg, tokenizer, .. } = saved;
    let (model, tokenizer) = match model {
        Some(m) => (m, tokenizer),
        None => crate::train::setup::initial_model(&cfg, tokenizer, &ad, log)?,
    };
    let w = eval_windows(&cfg, tokenizer, data, Some(batches * cfg.micro_batch_size()), log)?;
    let seq = cfg.train.seq_len;
    let b = windows(&w.tokens, &w.starts, seq);
    let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq]), &device);
    let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, seq]), &device);
    let p = probe_model(&model, x, y, &device, cfg.probe.top_k, at.clone());
    let out = layout::probe_snapshot(&run, &at);
    json::write(&out, &p)?;
    Ok((p, out, w.source))
}
