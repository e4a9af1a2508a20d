//! Seeds added until adjacent recipes separate (`sweep.reseed.until_separated = N`).
//!
//! After the grid and the fixed reseed stage, each round ranks the methods, tests every
//! adjacent pair's final losses ([`super::significance`]) and gives one fresh seed, at its
//! LR*, to every method of a pair that is not yet separated — best-ranked pairs first, so that
//! a budget that runs out mid-round goes to the top of the table. Rounds end when every
//! adjacent pair separates, the budget of `N` runs is spent, or a round's runs did not all
//! finish. Every added run is in the plan (stage `separate`) and every round, with the ties it
//! answered, in `DIR/separation.json`.
//!
//! The rounds are decided from finished runs only, so running the sweep again replays the same
//! decisions, skips the runs already done and goes on where it stopped.

use super::aggregate::summarize;
use super::config::{PlannedRun, Stage, Sweep};
use super::results::{self, RunResult};
use super::runner::{self, Failures};
use super::significance::unseparated;
use serde::{Deserialize, Serialize};

/// `DIR/separation.json`: the rounds of seeds added until adjacent ranks separate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Separation {
    /// `sweep.reseed.until_separated`: the most runs the rounds may add.
    pub budget: usize,
    pub rounds: Vec<Round>,
    /// Why the rounds stopped.
    pub outcome: String,
}

/// One round: the seed it added, the tied pairs that asked for it, and its runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub seed: u64,
    pub ties: Vec<Tie>,
    pub runs: Vec<String>,
}

/// An adjacent pair within noise when its round was planned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tie {
    pub ahead: String,
    pub behind: String,
    /// Welch's two-sided p; `None` with fewer than two seeds on a side.
    pub p: Option<f64>,
}

/// Runs rounds of added seeds while adjacent pairs tie and the budget lasts; `runs` (the
/// sweep's planned runs so far) grows by every added run.
pub fn add_seeds(
    sweep: &Sweep,
    runs: &mut Vec<PlannedRun>,
    failures: &mut Failures,
    log: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<()> {
    let Some(budget) = sweep.section.reseed.as_ref().and_then(|r| r.until_separated) else { return Ok(()) };
    let mut record = Separation { budget, rounds: Vec::new(), outcome: String::new() };
    let mut seed = next_seed(sweep, runs)?;
    let mut spent = 0;
    record.outcome = loop {
        let rows = results::collect(&sweep.section.dir, runs, sweep.section.target_loss)?;
        let Some((round, extra)) = plan_round(sweep, &rows, seed, budget - spent) else {
            break outcome(sweep, &rows, budget, budget - spent);
        };
        log(&format!(
            "separation round {}: {} adjacent pairs within noise; seed {seed} added to {} runs",
            record.rounds.len() + 1,
            round.ties.len(),
            extra.len()
        ));
        spent += extra.len();
        runs.extend(extra.iter().cloned());
        super::plan::write_plan(sweep, runs)?;
        runner::write_configs(sweep, &extra)?;
        failures.extend(runner::execute(sweep, &extra, log)?);
        record.rounds.push(round);
        crate::io::json::write(&super::layout::separation(&sweep.section.dir), &record)?;
        let done = results::collect(&sweep.section.dir, &extra, sweep.section.target_loss)?;
        if crate::stop::requested().is_some() || !results::unfinished(&done).is_empty() {
            break "stopped: a run of the last round did not finish; run the sweep again to go on".into();
        }
        seed += 1;
    };
    log(&format!("separation: {} rounds, {spent} runs added; {}", record.rounds.len(), record.outcome));
    crate::io::json::write(&super::layout::separation(&sweep.section.dir), &record)
}

/// The next round with the room left and its runs, or `None` when nothing is tied or no room
/// is left.
fn plan_round(sweep: &Sweep, rows: &[RunResult], seed: u64, room: usize) -> Option<(Round, Vec<PlannedRun>)> {
    let s = &sweep.section;
    let ties = unseparated(&summarize(rows, &s.group_by, &s.tuned));
    if ties.is_empty() || room == 0 {
        return None;
    }
    // Best-ranked pairs first: `ties` follow the ranking.
    let mut methods: Vec<&str> = Vec::new();
    for m in ties.iter().flat_map(|t| [t.ahead.as_str(), t.behind.as_str()]) {
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    let grid: Vec<RunResult> = rows.iter().filter(|r| r.stage == Stage::Grid).cloned().collect();
    let mut runs = Vec::new();
    for m in &methods {
        runs.extend(super::plan::runs_at_lr_star(sweep, &grid, &[seed], Stage::Separate, |x| x == *m));
    }
    runs.truncate(room);
    let ties = ties.into_iter().map(|t| Tie { ahead: t.ahead, behind: t.behind, p: t.loss.p }).collect();
    let names = runs.iter().map(|r| r.name.clone()).collect();
    (!runs.is_empty()).then_some((Round { seed, ties, runs: names }, runs))
}

/// Why no further round is planned.
fn outcome(sweep: &Sweep, rows: &[RunResult], budget: usize, room: usize) -> String {
    let s = &sweep.section;
    match (unseparated(&summarize(rows, &s.group_by, &s.tuned)).len(), room) {
        (0, _) => "every adjacent pair is separated beyond noise".into(),
        (n, 0) => format!("the budget of {budget} runs is spent; {n} adjacent pairs are still within noise"),
        (n, _) => format!("{n} adjacent pairs are within noise, but none has a learning rate to add seeds at"),
    }
}

/// One more than the largest seed any planned run trains with (model and sampler seeds).
fn next_seed(sweep: &Sweep, runs: &[PlannedRun]) -> anyhow::Result<u64> {
    let mut top = 0;
    for r in runs {
        let c = sweep.run_config(r)?;
        top = top.max(c.train.seed).max(c.train.sampler_seed);
    }
    Ok(top + 1)
}
