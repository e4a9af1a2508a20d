//! `[finetune]`: a run that starts from another run's weights (supervised fine-tuning), and
//! the record of where they came from.
//!
//! The parent is a run directory (its final weights, else its latest checkpoint) or one of its
//! `checkpoints/step-N` directories; an imported Hugging Face checkpoint is a run too. The
//! model is the parent's ([`RunConfig`](super::RunConfig)'s `[model]`, with `[model.lora]`
//! for LoRA); every tensor comes from the parent's weights but LoRA's adapters, which start
//! fresh. When the run starts, the weights file and its SHA-256 are written here, so the run's
//! `config.toml` names exactly what it was fine-tuned from.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A fine-tuning run's config as a table: the parent's config (`parent_config`, its own
/// `[finetune]` and corpus-only keys dropped) with `overlay` written over it (a fine-tuning
/// config file: `[train]`, `[optim]`, `[schedule]`, `[model.lora]`, …; a run length it gives
/// replaces the parent's), the conversations in `data` (a file, or `instructions`) as the corpus and `parent` as
/// `finetune.parent`.
pub fn config_table(mut parent_config: toml::Table, overlay: &toml::Table, data: &Path, parent: &Path) -> toml::Table {
    use super::edit::set_value;
    parent_config.remove("finetune");
    if let Some(toml::Value::Table(d)) = parent_config.get_mut("data") {
        d.remove("sources");
        d.remove("val_corpus");
    }
    super::edit::overlay(&mut parent_config, overlay);
    // A file by its absolute path (the run may resume from elsewhere); a built-in name as given.
    let data =
        if data.is_file() { std::path::absolute(data).unwrap_or(data.to_path_buf()) } else { data.to_path_buf() };
    let text = |p: &Path| toml::Value::String(p.display().to_string());
    set_value(&mut parent_config, "data.task", toml::Value::String("chat".into()));
    set_value(&mut parent_config, "data.corpus", text(&data));
    set_value(&mut parent_config, "finetune.parent", text(parent));
    parent_config
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinetuneSection {
    /// The parent run (or checkpoint) directory.
    pub parent: PathBuf,
    /// The weights file the run started from (recorded at the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_weights: Option<PathBuf>,
    /// Its SHA-256: recorded at the start; when given beforehand, the start checks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_sha256: Option<String>,
}
