//! `normlab import` and `normlab export`: Hugging Face checkpoints.

use super::log;
use std::path::Path;

/// `normlab import`: the checkpoint as a run at step 0, and what the placement change did.
pub fn import(hf_dir: &Path, out: &Path, recipe: Option<&str>, sets: &[String], force: bool) -> anyhow::Result<()> {
    let r = crate::hf::import::import(hf_dir, out, recipe, sets, force, &log)?;
    errln!("imported {} ({}) into {} as recipe {}", r.source.display(), r.model_type, out.display(), r.recipe);
    let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join(", ") };
    errln!("  added (initialised: gains 1, shifts 0): {}", list(&r.added));
    errln!("  removed (no place in the recipe): {}", list(&r.removed));
    errln!(
        "continue pretraining: normlab train --resume {o}; fine-tune on conversations: normlab finetune --checkpoint {o} --data FILE; sample: normlab generate --checkpoint {o}; recipe: normlab recipes --config {o}/config.toml",
        o = out.display()
    );
    Ok(())
}

/// `normlab export RUN --hf OUT`.
pub fn export(run: &Path, out: &Path, force: bool) -> anyhow::Result<()> {
    let layout = crate::hf::export::export(run, out, force)?;
    errln!("wrote {} as {}", out.display(), layout.describe());
    Ok(())
}

/// `normlab export RUN --peft OUT [--base HF_DIR]`: a LoRA run's adapters for `peft`.
pub fn export_peft(run: &Path, out: &Path, force: bool, base: Option<&Path>) -> anyhow::Result<()> {
    let base = crate::hf::export::export_peft(run, out, force, base)?;
    errln!(
        "wrote {} as a peft LoRA adapter on the base {}: AutoPeftModelForCausalLM.from_pretrained(\"{}\")",
        out.display(),
        base.display(),
        out.display()
    );
    Ok(())
}

/// `normlab export`: the whole model with `--hf DIR`, a LoRA run's adapters with `--peft DIR`.
pub fn export_command(
    run: &Path,
    hf: Option<&Path>,
    peft: Option<&Path>,
    base: Option<&Path>,
    force: bool,
) -> anyhow::Result<()> {
    match (hf, peft) {
        (Some(hf), _) => export(run, hf, force),
        (None, Some(peft)) => export_peft(run, peft, force, base),
        (None, None) => anyhow::bail!("give --hf DIR (the whole model) or --peft DIR (a LoRA run's adapters)"),
    }
}
