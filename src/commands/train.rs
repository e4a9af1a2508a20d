//! `normlab train`: a new run or `--resume`, trained to its end, a divergence or a stop signal.

use super::log;
use crate::dist::Ranks;
use crate::run::EXIT_DIVERGED;
use crate::run::RunConfig;
use crate::run::layout;
use crate::train::progress::Progress;
use crate::train::{Outcome, Resumed, Trainer};
use std::path::PathBuf;

/// How `normlab train` was asked to run, from its flags.
pub struct TrainHow {
    pub quiet: bool,
    pub force: bool,
    pub resume: crate::train::ResumeOptions,
}

/// `normlab train`: a lone process, or one rank of a job started by `mpirun` or `srun` (every
/// rank runs this; rank 0 writes the run and prints).
pub fn train(
    config: Option<PathBuf>,
    sets: Vec<String>,
    resume: Option<PathBuf>,
    how: TrainHow,
) -> anyhow::Result<i32> {
    let job = crate::dist::Job::start()?;
    let ranks = job.ranks();
    let result = match ranks.size() {
        1 => build_alone(config, sets, resume, &how),
        _ => {
            let asked = crate::train::ranks::Asked { config: config.clone(), sets: &sets, resume: resume.clone() };
            crate::train::ranks::build(ranks, asked, how.resume, || build_alone(config, sets.clone(), resume, &how))
        }
    }
    .and_then(|t| match t {
        Some(mut t) => train_built(&mut t, ranks, how.quiet),
        None => Ok(0),
    });
    result.or_else(|e| ranks.fail(e))
}

/// The trainer of a new run or a resumed one (`None`: the run had already finished).
fn build_alone(
    config: Option<PathBuf>,
    sets: Vec<String>,
    resume: Option<PathBuf>,
    how: &TrainHow,
) -> anyhow::Result<Option<Trainer>> {
    Ok(Some(match resume {
        Some(dir) => match crate::train::resume_with(&dir, how.resume, &log)? {
            Resumed::Trainer(t) => *t,
            Resumed::AlreadyFinished(s) => {
                errln!("{}: {}; nothing to do", dir.display(), layout::describe(&s));
                return Ok(None);
            }
        },
        None => crate::train::start(RunConfig::load(config.as_deref(), &sets)?, how.force, &log)?,
    }))
}

/// Trains a built run to its end and says how it ended (rank 0; the others print nothing).
pub(super) fn train_built(trainer: &mut Trainer, ranks: Ranks, quiet: bool) -> anyhow::Result<i32> {
    // From here a signal stops the run at a step's end with a checkpoint (a second one at once).
    crate::stop::install();
    let writer = ranks.is_writer();
    if writer {
        errln!("{}", trainer.summary());
        if ranks.size() > 1 {
            errln!(
                "{} ranks, each computing {} of every step's micro-batches",
                ranks.size(),
                ranks.share(trainer.cfg.micro_batches()).len()
            );
        }
    }
    let mut progress = match (writer, trainer.mfu_basis(ranks.size())) {
        (true, Some((flops, peak))) => {
            Progress::new(trainer.state.total_steps, trainer.state.step, quiet).with_mfu(flops, peak)
        }
        (true, None) => Progress::new(trainer.state.total_steps, trainer.state.step, quiet),
        (false, _) => Progress::silent(),
    };
    let outcome = trainer.run(&mut progress)?;
    if writer {
        say(&outcome, trainer);
    }
    Ok(match outcome {
        Outcome::Finished { .. } | Outcome::Stopped { .. } => 0,
        Outcome::Diverged { .. } => EXIT_DIVERGED,
        Outcome::Interrupted { signal, .. } => signal.exit_code(),
    })
}

fn say(outcome: &Outcome, trainer: &Trainer) {
    let dir = trainer.dir.display();
    match outcome {
        Outcome::Finished { val_loss, val_ppl } => {
            let weights = layout::final_weights(&trainer.dir);
            errln!(
                "finished {} steps: val loss {val_loss:.4}, val ppl {val_ppl:.2}; weights in {}",
                trainer.state.step,
                weights.display()
            );
        }
        Outcome::Diverged { step, reason } => {
            errln!("run diverged at step {step}: {reason} (recorded in {})", layout::status(&trainer.dir).display());
        }
        Outcome::Stopped { step } => errln!("stopped at step {step}; continue with `normlab train --resume {dir}`"),
        Outcome::Interrupted { step, signal } => errln!(
            "stopped by {} at step {step} with a checkpoint; continue with `normlab train --resume {dir}`",
            signal.name()
        ),
    }
}
