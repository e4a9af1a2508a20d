//! The rounds of seeds a sweep added until adjacent ranks separate
//! (`sweep.reseed.until_separated`, [`crate::sweep::separate`]): one row per round with the
//! pairs that were within noise and the runs it added, and a finding with the outcome.

use crate::sweep::layout;
use crate::sweep::separate::{Round, Separation};
use crate::sweep::significance::p_text;
use std::path::Path;

/// The section's heading and table and the finding, when the sweep added seeds.
pub fn section(dir: &Path) -> anyhow::Result<Option<(String, String, String)>> {
    let path = layout::separation(dir);
    if !path.is_file() {
        return Ok(None);
    }
    let s: Separation = crate::io::json::read(&path)?;
    let mut t = String::from("| round | seed | pairs within noise (Welch p) | runs added |\n|---|---|---|---|\n");
    for (i, r) in s.rounds.iter().enumerate() {
        t += &format!("| {} | {} | {} | {} |\n", i + 1, r.seed, ties(r), r.runs.len());
    }
    let added: usize = s.rounds.iter().map(|r| r.runs.len()).sum();
    let finding = format!(
        "Seeds added until adjacent ranks separate: {} rounds, {added} runs of a budget of {}; {}.",
        s.rounds.len(),
        s.budget,
        s.outcome
    );
    Ok(Some(("Seeds added until adjacent ranks separate".into(), t, finding)))
}

fn ties(r: &Round) -> String {
    r.ties
        .iter()
        .map(|t| {
            let p = t.p.map(p_text).unwrap_or_else(|| "n < 2".into());
            format!("{} / {} ({p})", t.ahead, t.behind)
        })
        .collect::<Vec<_>>()
        .join("; ")
}
