//! A sweep's fine-tuning stage (`[sweep.finetune]`): once the pretraining runs have finished,
//! each method's runs at its best learning rate (every seed; or every finished run) are
//! fine-tuned on conversations, the Peri-LN and BHyT papers' SFT protocols. Each fine-tuning
//! run is the pretraining run's config with the stage's `config` written over it (as
//! `normlab finetune --config`), for every combination of the stage's own `axes`, e.g. the
//! BHyT paper's C.2 sweep over SFT learning rates and methods:
//!
//! ```toml
//! [sweep.finetune]
//! data = "corpora/chat/instructions.jsonl"    # the conversations (any layout normlab reads)
//! from = "lr-star"                            # or "every"
//! tuned = "optim.lr"                          # the SFT key tuned per method
//! [sweep.finetune.axes]
//! "optim.lr" = [1e-4, 3e-4]
//! [sweep.finetune.config.train]
//! steps = 100
//! [sweep.finetune.config.model.lora]          # LoRA; without it, full fine-tuning
//! rank = 8
//! ```
//!
//! A fine-tuning run is named `finetune-` and its parent's name (and its own axes); its axes
//! are the parent's, `finetune.parent`, then its own, so it keeps its method's label.

use super::config::{Axes, PARENT, Parents, PlannedRun, Stage, Sweep, run_name};
use super::{aggregate, layout, results};

/// The fine-tuning runs of `pretrained` (the grid and its added seeds, finished).
pub fn plan(sweep: &Sweep, pretrained: &[PlannedRun]) -> anyhow::Result<Vec<PlannedRun>> {
    let s = &sweep.section;
    let Some(stage) = &s.finetune else { return Ok(Vec::new()) };
    let rows = results::collect(&s.dir, pretrained, s.target_loss)?;
    let finished: Vec<&results::RunResult> = rows.iter().filter(|r| r.final_val_loss.is_some()).collect();
    let parents: Vec<&results::RunResult> = match stage.from {
        Parents::Every => finished,
        Parents::LrStar => {
            let summaries = aggregate::summarize(&rows, &s.group_by, &s.tuned);
            let at_star = |r: &&&results::RunResult| {
                summaries.iter().any(|m| {
                    s.group_by.label(&r.axes) == m.method
                        && m.lr_star.is_some()
                        && r.axes.get(&s.tuned).and_then(|v| v.as_f64()) == m.lr_star
                })
            };
            finished.into_iter().filter(|r| at_star(&r)).collect()
        }
    };
    let combos = stage.axes.as_ref().map_or(vec![Vec::new()], Axes::combos);
    let mut out = Vec::new();
    for p in parents {
        let Some(planned) = pretrained.iter().find(|r| r.name == p.name) else { continue };
        let dir = layout::run(&s.dir, &p.name).display().to_string();
        for own in &combos {
            let name = match own.is_empty() {
                true => format!("{}-{}", Stage::Finetune, p.name),
                false => format!("{}-{}-{}", Stage::Finetune, p.name, run_name(own)),
            };
            let mut axes = planned.axes.clone();
            axes.push((PARENT.into(), toml::Value::String(dir.clone())));
            axes.extend(own.iter().cloned());
            out.push(PlannedRun { name, stage: Stage::Finetune, axes });
        }
    }
    Ok(out)
}

/// The fine-tuning runs ranked per method as a grid of their own: the best value of `tuned`
/// (the stage's key) per method, the mean (and spread) of the SFT validation loss over the
/// parents' seeds there, and the task headlines.
pub fn summarize(
    rows: &[results::RunResult],
    group_by: &super::group::GroupBy,
    tuned: &str,
) -> Vec<aggregate::MethodSummary> {
    let own: Vec<results::RunResult> = rows
        .iter()
        .filter(|r| r.stage == Stage::Finetune)
        .map(|r| results::RunResult { stage: Stage::Grid, ..r.clone() })
        .collect();
    aggregate::summarize(&own, group_by, tuned)
}

/// The pretraining rows: every stage but the fine-tuning one.
pub fn pretraining(rows: &[results::RunResult]) -> Vec<results::RunResult> {
    rows.iter().filter(|r| r.stage != Stage::Finetune).cloned().collect()
}
