//! Gradient-norm spikes against the learning rate (the Peri-LN paper's Fig. 3 and C.3: Pre-LN
//! spikes at every rate, Peri-LN rarely): each method's spike count (6σ rule, `probe` settings)
//! in each run of the tuned axis, summed over its seeds; and the runs' rollbacks after repeated
//! SpikeScore spikes (`[train.rollback]`).

use crate::run::rollback::RollbackRecord;
use crate::sweep::group::GroupBy;
use crate::sweep::results::RunResult;

/// The section's heading and markdown table, where the sweep tried two or more values of the
/// tuned key and its runs counted spikes.
pub fn section(rows: &[RunResult], group: &GroupBy, tuned: &str) -> Option<(String, String)> {
    let rate = |r: &RunResult| r.axes.get(tuned).and_then(|v| v.as_f64());
    let mut rates: Vec<f64> = rows.iter().filter_map(rate).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    if rates.len() < 2 || rows.iter().all(|r| r.grad_spikes.is_none()) {
        return None;
    }
    let mut methods: Vec<String> = rows.iter().map(|r| group.label(&r.axes)).collect();
    methods.sort();
    methods.dedup();
    let short = tuned.rsplit('.').next().unwrap_or(tuned);
    let mut t = format!(
        "| method |{}\n|---|{}\n",
        rates.iter().map(|x| format!(" {short} {x:e} |")).collect::<String>(),
        "---|".repeat(rates.len())
    );
    for m in &methods {
        t += &format!("| {m} |");
        for &x in &rates {
            let runs: Vec<&RunResult> =
                rows.iter().filter(|r| group.label(&r.axes) == *m && rate(r) == Some(x)).collect();
            t += &format!(" {} |", cell(&runs));
        }
        t.push('\n');
    }
    Some(("Gradient-norm spikes per learning rate".into(), t))
}

/// The spikes of the runs at one rate (summed over seeds, with the count of runs when more than
/// one), and how many diverged.
fn cell(runs: &[&RunResult]) -> String {
    if runs.is_empty() {
        return "–".into();
    }
    let counted: Vec<usize> = runs.iter().filter_map(|r| r.grad_spikes).collect();
    let diverged = runs.iter().filter(|r| r.state.is_diverged()).count();
    let mut s = if counted.is_empty() { "–".to_string() } else { counted.iter().sum::<usize>().to_string() };
    if runs.len() > 1 {
        s += &format!(" ({} runs)", runs.len());
    }
    if diverged > 0 {
        s += &format!(", {diverged} diverged");
    }
    s
}

/// The rollbacks of `runs` (label, records), one row each, when any run rolled back.
pub fn rollbacks(runs: &[(String, Vec<RollbackRecord>)]) -> Option<(String, String)> {
    let mut t = String::from(
        "| run | at step | back to step | spikes in the window (step: loss / grad norm) | batches skipped (steps) | \
            lr × |\n|---|---|---|---|---|---|\n",
    );
    let mut any = false;
    for (label, rs) in runs {
        for r in rs {
            any = true;
            let spikes: Vec<String> = r
                .spikes
                .iter()
                .map(|s| {
                    let what = match (s.loss_spike, s.grad_spike) {
                        (true, true) => "both",
                        (true, false) => "loss",
                        _ => "grad",
                    };
                    format!("{}: {:.3} / {:.3} ({what})", s.step, s.loss, s.grad_norm)
                })
                .collect();
            t += &format!(
                "| {label} | {} | {} | {} | {} | {} |\n",
                r.step,
                r.to_step,
                spikes.join("; "),
                r.skipped_steps,
                r.lr_scale
            );
        }
    }
    any.then(|| ("Rollbacks after repeated spikes".into(), t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::config::Stage;
    use crate::sweep::results::RunState;

    fn run(recipe: &str, lr: f64, seed: i64, spikes: usize, diverged: bool) -> RunResult {
        let axes = [
            ("model.recipe", serde_json::json!(recipe)),
            ("optim.lr", serde_json::json!(lr)),
            ("train.seed", serde_json::json!(seed)),
        ];
        RunResult {
            name: format!("{recipe}-{lr}-{seed}"),
            stage: Stage::Grid,
            axes: axes.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            state: if diverged { RunState::Diverged } else { RunState::Finished },
            diverged_step: None,
            diverged_reason: None,
            final_val_loss: None,
            final_train_loss: None,
            best_val_loss: None,
            final_val_ppl: None,
            best_val_ppl: None,
            steps: 100,
            wall_s: 1.0,
            tokens_per_s: None,
            steps_to_target: None,
            time_to_target_s: None,
            max_abs_last_layer: None,
            grad_spikes: Some(spikes),
            spike_score: None,
            rollbacks: 0,
            grad_cv: None,
            final_tau: None,
            routing: Default::default(),
            failure: None,
            tasks: Vec::new(),
        }
    }

    #[test]
    fn spikes_by_method_and_rate_summed_over_seeds() {
        let rows = vec![
            run("pre-rms", 1e-3, 1, 3, false),
            run("pre-rms", 1e-3, 2, 4, false),
            run("pre-rms", 3e-3, 1, 9, true),
            run("peri-rms", 1e-3, 1, 0, false),
            run("peri-rms", 3e-3, 1, 1, false),
        ];
        let (heading, t) = section(&rows, &GroupBy::default(), "optim.lr").unwrap();
        assert_eq!(heading, "Gradient-norm spikes per learning rate");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| method | lr 1e-3 | lr 3e-3 |");
        assert_eq!(lines[2], "| peri-rms | 0 | 1 |");
        assert_eq!(lines[3], "| pre-rms | 7 (2 runs) | 9, 1 diverged |");
        assert!(section(&rows[..1], &GroupBy::default(), "optim.lr").is_none(), "one rate: no section");
    }
}
