//! A mixture's validation loss per source (`data.sources`): the last evaluation of each run,
//! one column per source, in nats per token and bits per byte.

use super::data::RunData;

/// The section's heading and markdown table, where some run trained on a mixture.
pub fn section(runs: &[RunData]) -> Option<(String, String)> {
    let last: Vec<(&str, &crate::run::metrics::EvalRecord)> = runs
        .iter()
        .filter_map(|r| Some((r.label.as_str(), r.eval.last().filter(|e| !e.sources.is_empty())?)))
        .collect();
    let (_, first) = last.first()?;
    let names: Vec<&str> = first.sources.iter().map(|s| s.name.as_str()).collect();
    let mut t = String::from("| run | step | mixture |");
    for n in &names {
        t += &format!(" {n} loss | {n} bits/byte |");
    }
    t += &format!("\n|---|---|---|{}\n", "---|---|".repeat(names.len()));
    for (label, e) in &last {
        t += &format!("| {label} | {} | {:.4} |", e.step, e.val_loss);
        for n in &names {
            let s = e.sources.iter().find(|s| s.name == *n);
            let bpb = s.and_then(|s| s.val_bpb).map_or("–".into(), |b| format!("{b:.4}"));
            t += &format!(" {} | {bpb} |", s.map_or("–".into(), |s| format!("{:.4}", s.val_loss)));
        }
        t.push('\n');
    }
    Some(("Validation loss per source".into(), t))
}
