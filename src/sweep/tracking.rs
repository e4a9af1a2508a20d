//! A sweep on its runs' tracking server (`run.track` in the sweep's base config): a parent
//! run opened before the first run, each run its child ([`crate::track::PARENT_ENV`] names
//! the parent to the processes the runner starts), and at the end each method's mean final
//! loss as the parent's metrics with the report, results and plan as its artifacts.

use super::config::Sweep;
use super::layout;
use crate::track::parent::{self, SweepOpening};
use std::path::PathBuf;

/// The server and experiment the sweep's runs are sent to, when they are.
fn target(sweep: &Sweep) -> Option<(crate::run::track_target::TrackTarget, String)> {
    let first = sweep.grid().into_iter().next()?;
    let cfg = sweep.run_config(&first).ok()?;
    let experiment = cfg.run.experiment.unwrap_or_else(|| crate::run::track_target::DEFAULT_EXPERIMENT.into());
    Some((cfg.run.track?, experiment))
}

/// Opens the parent run (or finds it again); a server that does not answer costs the sweep
/// nothing but a warning.
pub fn open(sweep: &Sweep, log: &dyn Fn(&str)) -> anyhow::Result<()> {
    let Some((target, experiment)) = target(sweep) else { return Ok(()) };
    let s = SweepOpening {
        dir: &sweep.section.dir,
        target: &target,
        experiment: &experiment,
        sweep_toml: sweep.to_toml()?,
    };
    match parent::open(&s) {
        Ok(id) => log(&format!("tracking: the sweep is run {id} of experiment `{experiment}` at {target}")),
        Err(warnings) => {
            for w in warnings {
                log(&format!("warning: tracking: {w}"));
            }
        }
    }
    Ok(())
}

/// Ends the parent run with the methods' mean final losses and the sweep's files.
pub fn finish(sweep: &Sweep, log: &dyn Fn(&str)) -> anyhow::Result<()> {
    let Some((target, experiment)) = target(sweep) else { return Ok(()) };
    if parent::id(&sweep.section.dir).is_none() {
        return Ok(());
    }
    let dir = &sweep.section.dir;
    let rows = super::results::read(dir)?;
    let ms = super::aggregate::summarize(&rows, &sweep.section.group_by, &sweep.section.tuned);
    let metrics: Vec<(String, f64)> =
        ms.iter().filter_map(|m| Some((format!("final_val_loss/{}", m.method), m.mean?))).collect();
    let mut files: Vec<(String, PathBuf)> = vec![
        ("sweep.toml".into(), layout::sweep_file(dir)),
        ("plan.json".into(), layout::plan(dir)),
        ("results.csv".into(), layout::results_csv(dir)),
        ("results.jsonl".into(), layout::results_jsonl(dir)),
        ("separation.json".into(), layout::separation(dir)),
    ];
    files.extend(crate::track::report_files(&layout::report(dir)));
    let status = match (crate::stop::requested(), super::results::unfinished(&rows).is_empty()) {
        (Some(_), _) => "KILLED",
        (None, true) => "FINISHED",
        (None, false) => "FAILED",
    };
    let s = SweepOpening { dir, target: &target, experiment: &experiment, sweep_toml: sweep.to_toml()? };
    for w in parent::finish(&s, &metrics, &files, status) {
        log(&format!("warning: tracking: {w}"));
    }
    Ok(())
}
