//! `normlab track DIR`: a run or sweep directory sent to a tracking server after the fact —
//! a run trained without `run.track`, or the rest of one whose server went away.

use crate::run::track_target::TrackTarget;
use crate::sweep::{self, Sweep, layout};
use crate::track::replay::{Sent, send_run};
use std::path::Path;

pub fn track(dir: &Path, to: Option<&str>) -> anyhow::Result<i32> {
    let target = to.map(|t| TrackTarget::try_from(t.to_string())).transpose().map_err(anyhow::Error::msg)?;
    if sweep::is_sweep(dir) || layout::plan(dir).is_file() {
        return track_sweep(dir, target.as_ref());
    }
    anyhow::ensure!(
        crate::run::layout::status(dir).is_file(),
        "{} is neither a run (no status.json) nor a sweep (no plan.json); give a run or sweep directory",
        dir.display()
    );
    let sent = send_run(dir, target.as_ref(), None)?;
    Ok(say(dir, &sent))
}

/// The sweep's parent run, then each of its runs as a child.
fn track_sweep(dir: &Path, target: Option<&TrackTarget>) -> anyhow::Result<i32> {
    let mut s = Sweep::load(&layout::sweep_file(dir), &[])?;
    if let Some(t) = target {
        s.base.entry("run").or_insert_with(|| toml::Value::Table(Default::default()));
        if let Some(run) = s.base.get_mut("run").and_then(|r| r.as_table_mut()) {
            run.insert("track".into(), toml::Value::String(t.to_string()));
        }
    }
    sweep::tracking::open(&s, &super::log)?;
    let parent = crate::track::parent::id(dir);
    let plan: sweep::Plan = crate::io::json::read(&layout::plan(dir))?;
    let mut code = 0;
    for r in &plan.runs {
        let run = layout::run(dir, &r.name);
        if crate::run::layout::status(&run).is_file() {
            code = code.max(say(&run, &send_run(&run, target, parent.clone())?));
        }
    }
    sweep::tracking::finish(&s, &super::log)?;
    Ok(code)
}

/// One line for the directory (and its warnings); 1 when the server stopped answering.
fn say(dir: &Path, sent: &Sent) -> i32 {
    for w in &sent.warnings {
        errln!("warning: {w}");
    }
    match (&sent.undelivered, &sent.run_id) {
        (None, Some(id)) => {
            errln!("{}: {} records sent to run {id}", dir.display(), sent.records);
            0
        }
        (why, _) => {
            errln!(
                "{}: not sent ({}); run the same command again once the server answers",
                dir.display(),
                why.as_deref().unwrap_or("no run on the server")
            );
            1
        }
    }
}
