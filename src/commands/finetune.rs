//! `normlab finetune`: supervised fine-tuning of a saved run on conversations, as a new run.
//!
//! The new run's config is the parent's, with the fine-tuning config file's keys written over
//! it (`--config`: `[train]`, `[optim]`, `[schedule]`, `[model.lora]`, …), the conversations as
//! its data (`data.task = "chat"`, `data.corpus = --data`), `[finetune] parent` naming the
//! parent, then the `--set` edits. Without a `run.dir` of its own it writes `PARENT-sft`.

use super::log;
use crate::run::RunConfig;
use crate::run::edit::set_value;
use crate::run::finetune::config_table;
use crate::run::layout;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// What `normlab finetune` was given.
pub struct FinetuneArgs {
    pub checkpoint: PathBuf,
    pub data: PathBuf,
    pub config: Option<PathBuf>,
    pub sets: Vec<String>,
    pub quiet: bool,
    pub force: bool,
}

pub fn finetune(a: FinetuneArgs) -> anyhow::Result<i32> {
    let cfg = config(&a)?;
    let mut trainer = crate::train::start(cfg, a.force, &log)?;
    super::train::train_built(&mut trainer, crate::dist::Ranks::single(), a.quiet)
}

/// The fine-tuning run's config, as the module doc builds it.
fn config(a: &FinetuneArgs) -> anyhow::Result<RunConfig> {
    let parent = crate::run::saved::SavedRun::open(&a.checkpoint)?;
    let top = a.config.as_deref().map(read_table).transpose()?.unwrap_or_default();
    let own_dir = top.get("run").and_then(|r| r.get("dir")).is_some();
    let mut table = config_table(read_table(&layout::config(&parent.run))?, &top, &a.data, &a.checkpoint);
    if !own_dir {
        let dir = format!("{}-sft", parent.run.display().to_string().trim_end_matches('/'));
        set_value(&mut table, "run.dir", toml::Value::String(dir));
    }
    let origin = a.config.as_deref().map_or("the parent's config".into(), |p| p.display().to_string());
    RunConfig::from_parts(&table, &origin, None, &a.sets)
}

fn read_table(path: &Path) -> anyhow::Result<toml::Table> {
    let text = crate::io::read_text(path, "config")?;
    toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))
}
