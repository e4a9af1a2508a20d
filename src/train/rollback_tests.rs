//! A run that rolled back resumes bit for bit: stopped (as if killed) after its rollback, then
//! resumed from its newest checkpoint, it writes the same records and weights as the run that
//! never stopped.

use super::tests::{quiet, records_without_timings, tiny_cfg};
use super::{Outcome, Resumed, resume, start};
use crate::run::config::RunConfig;
use crate::run::layout;
use crate::run::metrics::MetricsRecord;
use crate::run::rollback::RollbackRule;
use crate::testutil::temp_dir;
use std::path::Path;

/// The planted-spike corpus, 400 steps, checkpoints every 25, a rollback after 2 spikes within
/// 100 steps.
fn planted(root: &Path, dir: &str) -> RunConfig {
    let corpus = root.join("planted.txt");
    if !corpus.exists() {
        crate::testutil::write_planted_corpus(&corpus);
    }
    let mut c = tiny_cfg(root, 400);
    c.run.dir = root.join(dir);
    c.run.eval_every = 100;
    c.run.checkpoint_every = 25;
    c.run.keep_checkpoints = 20;
    c.data.corpus = corpus.display().to_string();
    c.train.divergence_factor = 1000.0;
    c.train.rollback = Some(RollbackRule { spikes: 2, within: 100, lr_factor: 0.5, max: 2 });
    c.probe.tensorboard = false;
    c
}

fn run(cfg: RunConfig, stop: Option<usize>) -> Outcome {
    let mut t = start(cfg, false, &quiet).unwrap();
    t.stop_after = stop;
    t.run(&mut super::progress::Progress::new(400, 0, true)).unwrap()
}

#[test]
fn a_run_stopped_after_its_rollback_resumes_to_the_same_records_and_weights() {
    let root = temp_dir("rollback-resume");
    run(planted(&root, "whole"), None);
    let whole = records_without_timings(&root.join("whole"));
    let first = whole.iter().find_map(|r| match r {
        MetricsRecord::Rollback(rb) => Some(rb.clone()),
        _ => None,
    });
    let rb = first.expect("the planted corpus makes the run roll back");
    // The steps before the rollback never went past its step: the run first reaches this one
    // after the rollback, between two checkpoints.
    let stop = rb.step + 10;
    assert_eq!(run(planted(&root, "part"), Some(stop)), Outcome::Stopped { step: stop });
    let Resumed::Trainer(mut t) = resume(&root.join("part"), &quiet).unwrap() else { panic!("finished") };
    assert!(t.state.step < stop && !t.state.rollbacks.is_empty(), "resumed after the rollback");
    t.run(&mut super::progress::Progress::new(400, 0, true)).unwrap();
    assert_eq!(records_without_timings(&root.join("part")), whole);
    let sha = |d: &str| crate::run::checkpoint::file_sha256(&layout::final_weights(&root.join(d))).unwrap();
    assert_eq!(sha("part"), sha("whole"));
}

/// Stopped inside its rollback (after the later checkpoints are removed, after the outputs are
/// cut, after the rollback is recorded), as a kill there leaves it, the run resumes with a plain
/// resume to the records and weights of the run that never stopped. (With the outputs cut before
/// the later checkpoints were removed, the resume after that phase was refused: the newest
/// checkpoint counted records that metrics.jsonl no longer held.)
#[test]
fn a_run_killed_inside_its_rollback_resumes_to_the_same_records_and_weights() {
    use crate::run::rollback::RollbackPhase;
    let root = temp_dir("rollback-kill");
    run(planted(&root, "whole"), None);
    let whole = records_without_timings(&root.join("whole"));
    let sha = |d: &str| crate::run::checkpoint::file_sha256(&layout::final_weights(&root.join(d))).unwrap();
    for (i, phase) in RollbackPhase::ALL.into_iter().enumerate() {
        let dir = format!("part-{i}");
        let mut t = start(planted(&root, &dir), false, &quiet).unwrap();
        t.rollback_fault = Some(phase);
        let e = t.run(&mut super::progress::Progress::new(400, 0, true)).unwrap_err();
        assert!(format!("{e:#}").contains("stopped after"), "{phase:?}: {e:#}");
        drop(t);
        let Resumed::Trainer(mut t) = resume(&root.join(&dir), &quiet).unwrap() else { panic!("finished") };
        t.run(&mut super::progress::Progress::new(400, 0, true)).unwrap();
        assert_eq!(records_without_timings(&root.join(&dir)), whole, "{phase:?}");
        assert_eq!(sha(&dir), sha("whole"), "{phase:?}");
    }
}
