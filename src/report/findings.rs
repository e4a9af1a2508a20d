//! Plain-language findings: which scheme wins here, and whether the effects the papers
//! describe appear at this scale (and saying so when they do not).

//!
//! Recipes are recognised by their structure ([`Placement`]), not by preset names: a custom
//! recipe equal to Peri-LN is treated as Peri-LN.

use super::data::RunData;
use crate::recipe::Placement;
use crate::sweep::aggregate::MethodSummary;

/// The best-ranked run whose recipe has this placement.
fn run_with(best_runs: &[RunData], p: Placement) -> Option<&RunData> {
    best_runs.iter().find(|r| r.placement == Some(p))
}

/// The method whose best run has this placement.
fn method_with<'a>(ms: &'a [MethodSummary], best_runs: &[RunData], p: Placement) -> Option<&'a MethodSummary> {
    let label = &run_with(best_runs, p)?.label;
    ms.iter().find(|m| &m.method == label)
}

/// Var(X_2L) / Var(X_2) and Var(X_2L) at the end of a run, from its last probe. (X_1 is the
/// raw embedding for recipes without an embedding norm, too small to compare against.)
fn growth(r: &RunData) -> Option<(f64, f64)> {
    let v = RunData::per_layer(r.last_probe()?, |s| Some(s.x.var));
    let (second, last) = (v.get(1)?.1, v.last()?.1);
    Some((last / second, last))
}

pub fn findings(ms: &[MethodSummary], best_runs: &[RunData]) -> Vec<String> {
    let mut f = Vec::new();
    f.extend(winner(ms));
    f.extend(post_vs_pre(ms, best_runs));
    f.push(divergences(ms));
    f.extend(stalls(ms));
    f.extend(variance_growth(best_runs));
    f.extend(rank_collapse(best_runs));
    f.push(spikes(best_runs));
    f
}

fn winner(ms: &[MethodSummary]) -> Option<String> {
    let w = ms.first().filter(|m| m.best.is_some())?;
    let second = ms.get(1).and_then(|m| m.best.map(|b| (m.method.clone(), b)));
    Some(format!(
        "Best here: **{}** with final validation loss {:.4} (ppl {:.2}) at LR* = {}{}.",
        w.method,
        w.best.unwrap(),
        w.best.unwrap().exp(),
        w.lr_star.map(|l| format!("{l:e}")).unwrap_or_default(),
        second.map(|(n, b)| format!(", ahead of {n} ({b:.4}) by {:.4}", b - w.best.unwrap())).unwrap_or_default()
    ))
}

fn post_vs_pre(ms: &[MethodSummary], best_runs: &[RunData]) -> Option<String> {
    let post = method_with(ms, best_runs, Placement::Post)?;
    let pre = method_with(ms, best_runs, Placement::Pre)?;
    match (post.lr_star, pre.lr_star) {
        (Some(a), Some(b)) if a < b => Some(format!(
            "Post-norm's best learning rate ({a:e}) is lower than {}'s ({b:e}), as the papers report.",
            pre.method
        )),
        (Some(a), Some(b)) => Some(format!(
            "Post-norm's best learning rate ({a:e}) is **not** lower than {}'s ({b:e}) at this scale.",
            pre.method
        )),
        _ => None,
    }
}

fn divergences(ms: &[MethodSummary]) -> String {
    let diverged: Vec<String> = ms
        .iter()
        .filter(|m| m.diverged > 0)
        .map(|m| {
            let lrs: Vec<String> = m.curve.iter().filter(|p| p.diverged > 0).map(|p| format!("{:e}", p.lr)).collect();
            format!("{} at LR {}", m.method, lrs.join(", "))
        })
        .collect();
    if diverged.is_empty() {
        "No run diverged on this grid; the instability of post-norm at high learning rates does not show here (extend \
            the grid upwards to look for it)."
            .into()
    } else {
        format!("Diverged runs (excluded from every value above): {}.", diverged.join("; "))
    }
}

fn stalls(ms: &[MethodSummary]) -> Option<String> {
    let stalled: Vec<String> = ms
        .iter()
        .filter_map(|m| {
            let (best, star) = (m.best?, m.lr_star?);
            let lrs: Vec<String> = m
                .curve
                .iter()
                .filter(|p| p.lr > star && p.val_loss.is_some_and(|v| v > best + 0.3))
                .map(|p| format!("{:e} ({:.3})", p.lr, p.val_loss.unwrap()))
                .collect();
            (!lrs.is_empty()).then(|| format!("{} at LR {}", m.method, lrs.join(", ")))
        })
        .collect();
    (!stalled.is_empty()).then(|| {
        format!(
            "Above their best learning rate, these runs finished without diverging but stalled (final loss > 0.3 nats \
                above the recipe's best): {}. A stall is a high-learning-rate failure the divergence detector does \
                not flag.",
            stalled.join("; ")
        )
    })
}

/// Pre-norm's deep variance against the recipes that bound the stream (Peri-LN first, since
/// the next finding compares with it).
fn variance_growth(best_runs: &[RunData]) -> Vec<String> {
    let mut f = Vec::new();
    let Some((pre_growth, pre_last)) = run_with(best_runs, Placement::Pre).and_then(growth) else { return f };
    let mut bounded: Vec<&RunData> = best_runs.iter().filter(|r| r.bounds_stream).collect();
    bounded.sort_by_key(|r| r.placement != Some(Placement::Peri));
    let bounded: Vec<String> = bounded
        .iter()
        .filter_map(|r| growth(r).map(|(gr, last)| format!("{} {last:.3e} (×{gr:.1} from l = 2)", r.label)))
        .collect();
    f.push(format!(
        "Pre-norm's hidden-state variance at the end: Var(X_2L) = {pre_last:.3e}, ×{pre_growth:.1} its value at l = \
            2{}.",
        if bounded.is_empty() { String::new() } else { format!("; compare {}", bounded.join(", ")) }
    ));
    if let Some((_, peri_last)) = run_with(best_runs, Placement::Peri).and_then(growth) {
        f.push(if pre_last > 3.0 * peri_last {
            format!(
                "Peri-LN keeps the deep hidden states bounded: pre-norm's final-layer variance is {:.0}× \
                Peri-LN's.",
                pre_last / peri_last
            )
        } else {
            format!(
                "Pre-norm's final-layer variance is only {:.3}× Peri-LN's here: the escalation the Peri-LN paper \
                shows (§4.4) does not appear at this scale and learning rate.",
                pre_last / peri_last
            )
        });
    }
    f
}

fn rank_collapse(best_runs: &[RunData]) -> Option<String> {
    let collapsed: Vec<String> = best_runs
        .iter()
        .filter_map(|r| {
            r.last_probe()
                .map(|p| p.forward.final_tau)
                .filter(|t| *t > 0.9)
                .map(|t| format!("{} (τ = {t:.2})", r.label))
        })
        .collect();
    (!collapsed.is_empty()).then(|| {
        format!(
            "Near rank collapse at the end (token alignment of the last hidden state > 0.9): {}.",
            collapsed.join(", ")
        )
    })
}

fn spikes(best_runs: &[RunData]) -> String {
    let spikes: Vec<String> = best_runs
        .iter()
        .filter_map(|r| r.last_probe().map(|p| p.spikes_total).filter(|s| *s > 0).map(|s| format!("{} {s}", r.label)))
        .collect();
    if spikes.is_empty() {
        "No gradient-norm spikes (6σ rule) in the best runs.".into()
    } else {
        format!("Gradient-norm spikes (6σ rule) in the best runs: {}.", spikes.join(", "))
    }
}
