//! `normlab import HF_DIR --out RUN_DIR [--recipe NAME]`: a Hugging Face checkpoint as a
//! normlab run at step 0 (config, tokenizer, a step-0 checkpoint with fresh AdamW state), which
//! `train --resume` fine-tunes and `perplexity`, `generate`, `probe` read like any run.
//!
//! Under the family's own recipe every weight keeps its meaning. Under another recipe the
//! projections, embeddings and QK-norms are kept; norm slots the source had and the recipe
//! lacks are removed; norm slots the recipe has and the source lacked start at their init
//! (gain 1, shift 0; DyT α and BHyT λ at the recipe's initial values). Both lists are printed
//! and written to `RUN/import.json`.

use super::config::{Family, HfConfig, recipe_for};
use super::weights::{mappings, read_checkpoint, to_normlab};
use crate::data::{Tokenizer, TokenizerKind};
use crate::init::ParamSource;
use crate::io::json;
use crate::model::base::params::param_table;
use crate::run::RunConfig;
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// `RUN/import.json`: where the run's weights came from and what the placement change did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportRecord {
    pub source: PathBuf,
    pub model_type: String,
    /// The recipe the run was built with (its name).
    pub recipe: String,
    /// Parameters the recipe has and the checkpoint lacked (initialised).
    pub added: Vec<String>,
    /// Checkpoint tensors the recipe has no place for (dropped).
    pub removed: Vec<String>,
}

pub fn record_path(run: &Path) -> PathBuf {
    run.join("import.json")
}

/// The run config of an import: the checkpoint's model under `recipe`, its tokenizer, the
/// defaults elsewhere, then `sets`.
fn run_config(
    hf: &HfConfig,
    family: Family,
    recipe: Option<&str>,
    out: &Path,
    sets: &[String],
) -> anyhow::Result<RunConfig> {
    let mut cfg = RunConfig { model: hf.model_config(family, recipe_for(family, recipe)?)?, ..Default::default() };
    cfg.data.tokenizer = TokenizerKind::Bpe;
    cfg.run.dir = out.to_path_buf();
    // Through the TOML text, so `--set` edits apply and `model.vocab_size` counts as given.
    RunConfig::from_text(&cfg.to_toml()?, "the imported checkpoint's config", sets)
}

/// Refuses an `--out` that holds something: a run unless `force`, anything else always.
fn check_out(out: &Path, force: bool) -> anyhow::Result<()> {
    let holds = out.is_dir() && std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
    if !holds && !out.is_file() {
        return Ok(());
    }
    let is_run = crate::run::layout::holds_run(out);
    ensure!(is_run, "{} exists and is not a normlab run; give --out a new or empty directory", out.display());
    ensure!(
        force,
        "{} already holds a run; give --out another directory, or pass --force to replace it",
        out.display()
    );
    Ok(())
}

/// Imports `hf_dir` into a new run directory `out` (replacing a run there with `force`).
pub fn import(
    hf_dir: &Path,
    out: &Path,
    recipe: Option<&str>,
    sets: &[String],
    force: bool,
    log: &dyn Fn(&str),
) -> anyhow::Result<ImportRecord> {
    check_out(out, force)?;
    let hf = HfConfig::read(hf_dir)?;
    let family = hf.family()?;
    let tok_path = hf_dir.join("tokenizer.json");
    ensure!(tok_path.is_file(), "{} has no tokenizer.json; the checkpoint's own tokenizer is needed", hf_dir.display());
    let tokenizer = Tokenizer::load_bpe(&tok_path).context(
        "the checkpoint's tokenizer is damaged; copy its tokenizer.json again from where the checkpoint came from",
    )?;
    let raw = read_checkpoint(hf_dir)?;
    super::shapes::check(&hf, &raw)?;
    let cfg = run_config(&hf, family, recipe, out, sets)?;
    // The checkpoint's own structure, whatever `sets` changed in the run.
    let maps = mappings(family, &hf.model_config(family, recipe_for(family, None)?)?);
    let (weights, unused) = to_normlab(&raw, &maps)?;
    // A tied checkpoint may still carry a copy of the embedding as lm_head.weight.
    let unused: Vec<String> =
        unused.into_iter().filter(|n| !(hf.tie_word_embeddings && n == "lm_head.weight")).collect();
    ensure!(
        unused.is_empty(),
        "the checkpoint has tensors a {} model does not (first: `{}`); it is not a plain {} checkpoint",
        family.model_type(),
        unused[0],
        family.model_type()
    );
    let names: BTreeSet<String> = weights.keys().cloned().collect();
    let seed = cfg.train.seed;
    let mut trainer =
        crate::train::start_with(cfg, force, Some((ParamSource::Overlay(weights, seed), tokenizer)), log)?;
    let have: BTreeSet<String> = param_table(&trainer.model).into_iter().map(|p| p.name).collect();
    let record = ImportRecord {
        source: std::fs::canonicalize(hf_dir).unwrap_or(hf_dir.to_path_buf()),
        model_type: family.model_type().into(),
        recipe: trainer.state.recipe.clone(),
        added: have.difference(&names).cloned().collect(),
        removed: names.difference(&have).cloned().collect(),
    };
    trainer.save_checkpoint().context("writing the imported weights as the run's step-0 checkpoint")?;
    json::write(&record_path(out), &record)?;
    Ok(record)
}
