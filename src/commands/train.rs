//! `normlab train`: a new run or `--resume`, trained to its end, a divergence or a stop signal.

use super::log;
use crate::train::progress::Progress;
use crate::train::run_dir;
use crate::train::{EXIT_DIVERGED, Outcome, Resumed, RunConfig};
use std::path::PathBuf;

/// How `normlab train` was asked to run, from its flags.
pub struct TrainHow {
    pub quiet: bool,
    pub force: bool,
    pub resume: crate::train::ResumeOptions,
}

pub fn train(
    config: Option<PathBuf>,
    sets: Vec<String>,
    resume: Option<PathBuf>,
    how: TrainHow,
) -> anyhow::Result<i32> {
    let mut trainer = match resume {
        Some(dir) => match crate::train::resume_with(&dir, how.resume, &log)? {
            Resumed::Trainer(t) => *t,
            Resumed::AlreadyFinished(s) => {
                errln!("{}: {}; nothing to do", dir.display(), run_dir::describe(&s));
                return Ok(0);
            }
        },
        None => crate::train::start(RunConfig::load(config.as_deref(), &sets)?, how.force, &log)?,
    };
    // From here a signal stops the run at a step's end with a checkpoint (a second one at once).
    crate::stop::install();
    errln!("{}", trainer.summary());
    let mut progress = Progress::new(trainer.state.total_steps, trainer.state.step, how.quiet);
    match trainer.run(&mut progress)? {
        Outcome::Finished { val_loss, val_ppl } => {
            let weights = run_dir::final_weights(&trainer.dir);
            errln!(
                "finished {} steps: val loss {val_loss:.4}, val ppl {val_ppl:.2}; weights in {}",
                trainer.state.step,
                weights.display()
            );
            Ok(0)
        }
        Outcome::Diverged { step, reason } => {
            errln!("run diverged at step {step}: {reason} (recorded in {})", run_dir::status(&trainer.dir).display());
            Ok(EXIT_DIVERGED)
        }
        Outcome::Stopped { step } => {
            errln!("stopped at step {step}; continue with `normlab train --resume {}`", trainer.dir.display());
            Ok(0)
        }
        Outcome::Interrupted { step, signal } => {
            errln!(
                "stopped by {} at step {step} with a checkpoint; continue with `normlab train --resume {}`",
                signal.name(),
                trainer.dir.display()
            );
            Ok(signal.exit_code())
        }
    }
}
