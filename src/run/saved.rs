//! Opening a saved run (finished, stopped or still training): find its weights, verify them
//! against the digest recorded for them, read its checked config and tokenizer, rebuild its
//! model.

use super::checked::CheckedConfig;
use super::checkpoint::{self, load_weights};
use super::config::RunConfig;
use super::layout;
use crate::data::Tokenizer;
use crate::model::Transformer;
use anyhow::{Context, bail};
use burn::tensor::Device;
use std::path::{Path, PathBuf};

/// A run and the weights to use: the final weights, else the latest checkpoint; a
/// `checkpoints/step-N` directory selects that checkpoint.
pub struct SavedRun {
    pub run: PathBuf,
    pub weights: PathBuf,
    /// The run's config, checked when the run was opened.
    pub cfg: CheckedConfig,
    pub tokenizer: Tokenizer,
}

impl SavedRun {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let (run, weights) = resolve_weights(path)?;
        verify_weights(&run, &weights)?;
        let (cfg, tokenizer) = load_run(&run)?;
        Ok(Self { run, weights, cfg, tokenizer })
    }

    /// The run's model with the saved weights, on `device`.
    /// The chat template the run's conversations were rendered with (`run.json`); `None` for a
    /// run that was not trained on conversations.
    pub fn chat_template(&self) -> Option<crate::data::chat::template::ChatTemplate> {
        let info = crate::io::json::read::<layout::RunInfo>(&layout::info(&self.run)).ok()?;
        info.data.chat.map(|c| c.template)
    }

    pub fn model(&self, device: &Device) -> anyhow::Result<Transformer> {
        load_weights(&self.weights, &self.cfg.model, self.cfg.recipe(), &self.tokenizer.fingerprint()?, device)
    }
}

/// Checks `weights` against the digest recorded for them: the final weights against the one in
/// `status.json`, a checkpoint's against its `state.json`.
fn verify_weights(run: &Path, weights: &Path) -> anyhow::Result<()> {
    if weights == layout::final_weights(run) {
        let Some(layout::Status::Finished { weights_sha256: Some(want), .. }) = layout::read_status(run)? else {
            return Ok(());
        };
        let have = checkpoint::file_sha256(weights)?;
        anyhow::ensure!(
            have == want,
            "{} does not match the SHA-256 recorded when the run finished ({}…, now {}…): the file was changed or \
             damaged; use a checkpoint instead (--checkpoint {})",
            weights.display(),
            &want[..12],
            &have[..12],
            layout::checkpoints(run).join("step-N").display()
        );
        return Ok(());
    }
    match weights.parent().and_then(checkpoint::damage) {
        Some(why) => bail!("the checkpoint {} cannot be used: {why}", weights.parent().unwrap_or(weights).display()),
        None => Ok(()),
    }
}

fn resolve_weights(path: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    if layout::checkpoint_state(path).is_file() {
        let run = path.parent().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
        return Ok((run, layout::checkpoint_weights(path)));
    }
    if layout::final_weights(path).is_file() {
        return Ok((path.to_path_buf(), layout::final_weights(path)));
    }
    match checkpoint::latest(path, &|m| crate::io::term::err(format_args!("{m}")))? {
        Some(c) => Ok((path.to_path_buf(), layout::checkpoint_weights(&c))),
        None if layout::config(path).is_file() => match layout::read_status(path).ok().flatten() {
            Some(layout::Status::Diverged { step, reason }) => bail!(
                "{} diverged at step {step} ({reason}) before its first checkpoint, so it has no weights; start a \
                    new run with a lower optim.lr (or a smaller run.checkpoint_every to keep weights from before \
                    a divergence)",
                path.display()
            ),
            _ => bail!(
                "{} has no weights yet (no checkpoint); train longer or wait for the first checkpoint",
                path.display()
            ),
        },
        None => bail!("{} is not a normlab run directory; give the run.dir of a run", path.display()),
    }
}

/// A run's checked config and its tokenizer, as saved in its directory.
pub fn load_run(dir: &Path) -> anyhow::Result<(CheckedConfig, Tokenizer)> {
    let cfg_path = layout::config(dir);
    if !cfg_path.is_file() {
        bail!("{} is not a normlab run directory (no config.toml)", dir.display());
    }
    let cfg = RunConfig::load(Some(&cfg_path), &[])?.check()?;
    let tokenizer = match Tokenizer::fixed(cfg.data.tokenizer) {
        Some(t) => t,
        None => {
            let p = layout::tokenizer(dir);
            if !p.is_file() {
                bail!(
                    "{} uses a BPE tokenizer but {} is missing; it cannot be evaluated or resumed without it",
                    dir.display(),
                    p.display()
                );
            }
            Tokenizer::load_bpe(&p).with_context(|| {
                format!("{} is damaged; restore the run's tokenizer.json from a backup", dir.display())
            })?
        }
    };
    Ok((cfg, tokenizer))
}

/// Opens a fine-tuning run's parent (`section.parent`), refuses a run directory that is the
/// parent's own, and records (or checks) the digest of the parent's weights in `section`.
pub fn open_parent(section: &mut super::finetune::FinetuneSection, run_dir: &Path) -> anyhow::Result<SavedRun> {
    let parent = SavedRun::open(&section.parent).with_context(|| {
        format!("the fine-tune's parent (finetune.parent = {}) cannot be opened", section.parent.display())
    })?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    anyhow::ensure!(
        !same(run_dir, &parent.run),
        "run.dir {} is the parent run's own directory; a fine-tuning run writes a new one (set run.dir)",
        run_dir.display()
    );
    let sha = checkpoint::file_sha256(&parent.weights)?;
    if let Some(want) = &section.parent_sha256 {
        anyhow::ensure!(
            *want == sha,
            "the parent's weights {} have SHA-256 {}…, not the {}… finetune.parent_sha256 asks for; they were \
             changed since, or name another run",
            parent.weights.display(),
            &sha[..12],
            want.chars().take(12).collect::<String>()
        );
    }
    section.parent_weights = Some(parent.weights.clone());
    section.parent_sha256 = Some(sha);
    Ok(parent)
}
