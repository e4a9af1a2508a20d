//! The token windows a saved run is read on: its fixed validation windows, or a text tiled into
//! windows of its context (`normlab perplexity --data`, `normlab probe --data`).

use crate::data::windows::{tiling_starts, validation_starts};
use crate::data::{DataConfig, Dataset, TokenFile, Tokenizer, corpus, dataset};
use crate::run::RunConfig;
use anyhow::ensure;
use std::path::Path;

/// Token windows to evaluate or probe on, and where they come from in words.
pub struct Windows {
    pub tokens: TokenFile,
    pub starts: Vec<usize>,
    pub source: String,
}

/// The run's fixed validation windows, or all of `data` tiled (at most `limit` windows).
pub fn eval_windows(
    cfg: &RunConfig,
    tokenizer: Tokenizer,
    data: Option<&Path>,
    limit: Option<usize>,
    log: &dyn Fn(&str),
) -> anyhow::Result<Windows> {
    let seq = cfg.train.seq_len;
    ensure!(limit != Some(0), "--windows must be ≥ 1");
    let Some(p) = data else {
        let ds = Dataset::prepare(&cfg.data, Some(tokenizer), log)?;
        let starts = validation_starts(ds.val.len(), seq, limit.unwrap_or(cfg.run.eval_windows));
        return Ok(Windows {
            tokens: ds.val,
            starts,
            source: format!("the run's validation split ({})", ds.info.split_rule),
        });
    };
    ensure!(p.exists(), "--data {} does not exist", p.display());
    let dcfg = DataConfig { corpus: p.display().to_string(), ..cfg.data.clone() };
    let docs = corpus::read_documents(p, &dcfg)?;
    let ids = dataset::tokenize(&tokenizer, &docs)?;
    ensure!(ids.len() > seq, "{} has {} tokens, fewer than one window of {} tokens", p.display(), ids.len(), seq + 1);
    let starts = tiling_starts(ids.len(), seq, limit);
    Ok(Windows {
        tokens: TokenFile::from_tokens(&ids),
        starts,
        source: format!("{} ({} documents)", p.display(), docs.len()),
    })
}
