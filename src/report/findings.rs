//! Plain-language findings: which scheme wins here and why (in the probes' terms), whether the
//! effects the papers describe appear at this scale (and saying so when they do not), and what
//! the grid cannot tell (an optimum at its edge, a recipe that never learns).
//!
//! Recipes are recognised by their structure ([`Placement`]), not by preset names: a custom
//! recipe equal to Peri-LN is treated as Peri-LN.

use super::data::RunData;
use crate::recipe::Placement;
use crate::sweep::aggregate::{LrEdge, MethodSummary};
use crate::sweep::significance::{ALPHA, AdjacentPair, PairTest, adjacent_pairs, p_is};

/// A recipe "never learns" when every finished run ends within this many nats of the unigram
/// loss (or above it).
const UNIGRAM_MARGIN: f64 = 0.05;

/// The best-ranked run whose recipe has this placement.
fn run_with(best_runs: &[RunData], p: Placement) -> Option<&RunData> {
    best_runs.iter().find(|r| r.placement == Some(p))
}

/// The method whose best run has this placement.
fn method_with<'a>(ms: &'a [MethodSummary], best_runs: &[RunData], p: Placement) -> Option<&'a MethodSummary> {
    let label = &run_with(best_runs, p)?.label;
    ms.iter().find(|m| &m.method == label)
}

fn run_of<'a>(best_runs: &'a [RunData], m: &MethodSummary) -> Option<&'a RunData> {
    best_runs.iter().find(|r| r.label == m.method)
}

/// Var(X_2L) / Var(X_2) and Var(X_2L) at the end of a run, from its last probe. (X_1 is the
/// raw embedding for recipes without an embedding norm, too small to compare against.)
fn growth(r: &RunData) -> Option<(f64, f64)> {
    let v = RunData::per_layer(r.last_probe()?, |s| Some(s.x.var));
    let (second, last) = (v.get(1)?.1, v.last()?.1);
    Some((last / second, last))
}

/// The unigram loss of the sweep's data, from any run that recorded it.
pub fn unigram_loss(best_runs: &[RunData]) -> Option<f64> {
    best_runs.iter().find_map(|r| r.info.as_ref()?.unigram_loss)
}

pub fn findings(ms: &[MethodSummary], best_runs: &[RunData]) -> Vec<String> {
    let unigram = unigram_loss(best_runs);
    let never = never_learns(ms, unigram);
    let mut f = Vec::new();
    f.extend(winner(ms));
    f.extend(adjacent_verdicts(ms));
    f.extend(why_winner(ms, best_runs));
    f.extend(edges(ms));
    f.extend(post_vs_pre(ms, best_runs));
    f.push(divergences(ms));
    f.extend(never.iter().map(|m| never_learns_why(m, best_runs, unigram.unwrap_or(f64::NAN))));
    f.extend(stalls(ms, &never));
    f.extend(variance_growth(best_runs));
    f.extend(rank_collapse(best_runs));
    f.push(spikes(best_runs));
    f.extend(skipped(best_runs));
    f
}

fn seeds_text(m: &MethodSummary) -> String {
    match m.seeds_at_lr_star {
        1 => "1 seed".into(),
        n => format!("{n} seeds"),
    }
}

fn winner(ms: &[MethodSummary]) -> Option<String> {
    let w = ms.first().filter(|m| m.mean.is_some())?;
    let mean = w.mean?;
    let mut s = format!(
        "Best here: **{}**, mean final validation loss {mean:.4} (ppl {:.2}) over {} at LR* = {} (best seed {:.4}, \
            worst {:.4})",
        w.method,
        mean.exp(),
        seeds_text(w),
        w.lr_star.map(|l| format!("{l:e}")).unwrap_or_default(),
        w.best.unwrap_or(mean),
        w.worst.unwrap_or(mean),
    );
    if let Some((second, second_mean)) = ms.get(1).and_then(|m| Some((m, m.mean?))) {
        let gap = second_mean - mean;
        s += &format!(", ahead of {} (mean {second_mean:.4}) by {gap:.4}", second.method);
        s += &lead_verdict(w, second);
    }
    if w.seeds_at_lr_star == 2 {
        s += ". With n = 2 seeds the sample standard deviation is the range / √2: a spread, not a distribution";
    }
    Some(s + ".")
}

/// Whether the winner's lead over the runner-up is beyond its seeds' noise (Welch's t); where
/// it cannot be tested (a single seed), whether their seed ranges overlap.
fn lead_verdict(w: &MethodSummary, second: &MethodSummary) -> String {
    let pair = adjacent_pairs(&[w.clone(), second.clone()]).pop();
    match pair.map(|p| p.loss) {
        Some(PairTest { p: Some(p), .. }) if p < ALPHA => format!(": beyond noise (Welch {})", p_is(p)),
        Some(PairTest { p: Some(p), .. }) => format!(
            ": not beyond noise (Welch {}), so these seeds do not settle which is better; more seeds may",
            p_is(p)
        ),
        _ => match second.best.filter(|&b| b <= w.worst.unwrap_or(f64::INFINITY)) {
            Some(b) => format!(
                ". The two overlap: {}'s best seed ({b:.4}) beats {}'s worst, so more seeds are needed to call it",
                second.method, w.method
            ),
            None => String::new(),
        },
    }
}

/// Each adjacent pair of the ranking beyond noise or within it, on the loss and each task.
fn adjacent_verdicts(ms: &[MethodSummary]) -> Option<String> {
    let pairs = adjacent_pairs(ms);
    let tested: Vec<&AdjacentPair> = pairs.iter().filter(|p| p.loss.p.is_some()).collect();
    if tested.is_empty() {
        return None;
    }
    let say = |p: &&AdjacentPair| format!("{} over {} ({})", p.ahead, p.behind, p_is(p.loss.p.unwrap_or(1.0)));
    let (apart, ties): (Vec<&&AdjacentPair>, Vec<&&AdjacentPair>) = tested.iter().partition(|p| p.loss.separated());
    let list = |v: &[&&AdjacentPair]| {
        if v.is_empty() { "none".into() } else { v.iter().map(|p| say(p)).collect::<Vec<_>>().join("; ") }
    };
    let mut s = format!(
        "Adjacent ranks by final loss (Welch's t over seeds, p < {ALPHA}): separated — {}; ties within noise — {}.",
        list(&apart),
        list(&ties)
    );
    if let Some(tasks) = task_verdicts(&pairs) {
        s += &format!(" {tasks}");
    }
    Some(s)
}

/// The adjacent pairs' downstream tests: those beyond noise by name (with which side scores
/// higher), the ties counted.
fn task_verdicts(pairs: &[AdjacentPair]) -> Option<String> {
    let tests: Vec<(&AdjacentPair, &PairTest)> =
        pairs.iter().flat_map(|p| p.tasks.iter().filter(|t| t.p.is_some()).map(move |t| (p, t))).collect();
    if tests.is_empty() {
        return None;
    }
    let apart: Vec<String> = tests
        .iter()
        .filter(|(_, t)| t.separated())
        .map(|(p, t)| {
            let (hi, lo) = if t.diff > 0.0 { (&p.ahead, &p.behind) } else { (&p.behind, &p.ahead) };
            format!("{hi} above {lo} on {} ({})", t.measure, p_is(t.p.unwrap_or(1.0)))
        })
        .collect();
    let ties = tests.len() - apart.len();
    Some(if apart.is_empty() {
        format!("Downstream, all {ties} adjacent comparisons on the tasks are within noise.")
    } else {
        format!("Downstream, beyond noise: {}; the other {ties} adjacent comparisons are within it.", apart.join("; "))
    })
}

/// The winner against the runner-up in the probes' terms: stream variance at depth, gradient
/// steadiness, spikes and token alignment at the end of their best runs.
fn why_winner(ms: &[MethodSummary], best_runs: &[RunData]) -> Option<String> {
    let (w, second) = (run_of(best_runs, ms.first()?)?, run_of(best_runs, ms.get(1)?)?);
    let (wp, sp) = (w.last_probe()?, second.last_probe()?);
    let cv = |p: &crate::probe::ProbeRecord| {
        let v: Vec<f64> = p.forward.sublayers.iter().filter_map(|s| s.grad_cv_run).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut parts = Vec::new();
    if let (Some((wg, wl)), Some((sg, sl))) = (growth(w), growth(second)) {
        parts.push(format!(
            "its deepest hidden state has variance {wl:.3e} (×{wg:.1} from l = 2) against {}'s {sl:.3e} (×{sg:.1})",
            second.label
        ));
    }
    if let (Some(a), Some(b)) = (cv(wp), cv(sp)) {
        let how = if a <= b { "less" } else { "more" };
        parts.push(format!("its sublayer gradient norms vary {how} over the run (mean CV {a:.2} vs {b:.2})"));
    }
    parts.push(format!("gradient-norm spikes: {} vs {}", wp.spikes_total, sp.spikes_total));
    if let (Some((a, _)), Some((b, _))) = (attention_collapse(wp), attention_collapse(sp)) {
        parts.push(format!("largest token alignment τ(z_l) in an attention sublayer after layer 1 {a:.2} vs {b:.2}"));
    }
    Some(format!(
        "Why {} leads {}, in the probes at the end of their best runs: {}. These are associations at one scale, the \
            mechanisms the papers propose; they are not proof of cause.",
        w.label,
        second.label,
        parts.join("; ")
    ))
}

fn edges(ms: &[MethodSummary]) -> Option<String> {
    let at: Vec<String> = ms
        .iter()
        .filter_map(|m| {
            let end = match m.lr_edge? {
                LrEdge::Lowest => "the lowest tried",
                LrEdge::Highest => "the highest tried",
            };
            Some(format!("{} at {:e} ({end})", m.method, m.lr_star?))
        })
        .collect();
    (!at.is_empty()).then(|| {
        format!(
            "LR* at an edge of the grid: {}. Their best rate may lie beyond it, so their LR* and their rank are lower \
                bounds on what they can do here; extend the grid (`--set 'sweep.axes.\"optim.lr\"=[…]'`) before \
                reading them.",
            at.join("; ")
        )
    })
}

fn post_vs_pre(ms: &[MethodSummary], best_runs: &[RunData]) -> Option<String> {
    let post = method_with(ms, best_runs, Placement::Post)?;
    let pre = method_with(ms, best_runs, Placement::Pre)?;
    let (a, b) = (post.lr_star?, pre.lr_star?);
    let mut s = if a < b {
        format!("Post-norm's best learning rate ({a:e}) is lower than {}'s ({b:e}), as the papers report", pre.method)
    } else {
        format!("Post-norm's best learning rate ({a:e}) is **not** lower than {}'s ({b:e}) at this scale", pre.method)
    };
    let edge: Vec<&str> = [post, pre].iter().filter(|m| m.lr_edge.is_some()).map(|m| m.method.as_str()).collect();
    if !edge.is_empty() {
        s += &format!(
            "; but this rests on an edge of the grid ({}'s LR* is an end of it), so it is not established here",
            edge.join(" and ")
        );
    }
    Some(s + ".")
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

/// Methods whose every finished grid run ends at (or above) the unigram loss.
fn never_learns(ms: &[MethodSummary], unigram: Option<f64>) -> Vec<&MethodSummary> {
    let Some(u) = unigram else { return Vec::new() };
    ms.iter()
        .filter(|m| {
            let finished: Vec<f64> = m.curve.iter().filter_map(|p| p.val_loss).collect();
            !finished.is_empty() && finished.iter().all(|v| *v > u - UNIGRAM_MARGIN)
        })
        .collect()
}

/// Why a recipe never learned, from its best run's last probe: the stream's variance, the
/// saturated fraction of a DyT final norm, and how many sublayers got no gradient at all.
fn never_learns_why(m: &MethodSummary, best_runs: &[RunData], unigram: f64) -> String {
    let vals: Vec<f64> = m.curve.iter().filter_map(|p| p.val_loss).collect();
    let (lo, hi) = crate::stats::min_max(&vals);
    let mut s = format!(
        "**{} never learns beyond the unigram distribution**: at every learning rate it ends at {lo:.3}–{hi:.3} \
            nats, where predicting each token by its frequency alone gives {unigram:.3}",
        m.method
    );
    if let Some(p) = run_of(best_runs, m).and_then(|r| r.last_probe()) {
        let subs = &p.forward.sublayers;
        let dead = subs.iter().filter(|s| s.grad_norm.is_some_and(|g| g < 1e-12)).count();
        let var = subs.last().map(|s| s.x.var).unwrap_or(f64::NAN);
        s += &format!(". Its probes at step {} say why: the deepest hidden state's variance is {var:.3e}", p.step);
        if let Some(sat) = p.forward.final_saturation {
            s += &format!(", {:.0} % of the final DyT's tanh arguments are saturated (|αx| > 2.65)", 100.0 * sat);
        }
        s += &format!(
            ", and {dead} of {} sublayers receive a gradient norm below 1e-12: no signal reaches the stream, so only \
                the output head and the final norm learn",
            subs.len()
        );
    }
    s + "."
}

fn stalls(ms: &[MethodSummary], never: &[&MethodSummary]) -> Option<String> {
    let stalled: Vec<String> = ms
        .iter()
        .filter(|m| !never.iter().any(|n| n.method == m.method))
        .filter_map(|m| {
            let (best, star) = (m.best?, m.lr_star?);
            let lrs: Vec<String> = m
                .curve
                .iter()
                .filter(|p| p.lr > star)
                .filter_map(|p| p.val_loss.filter(|&v| v > best + 0.3).map(|v| format!("{:e} ({v:.3})", p.lr)))
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

/// The most aligned attention sublayer after layer 1 at the end (KiteNorm E.4: "the first layer
/// is often an exception"): τ(z_l) after the residual addition, and its layer.
pub fn attention_collapse(p: &crate::probe::ProbeRecord) -> Option<(f64, usize)> {
    p.forward
        .sublayers
        .iter()
        .filter(|s| s.branch == crate::recipe::Branch::Attn && s.layer > 1 && s.tau_sum.is_finite())
        .map(|s| (s.tau_sum, s.layer))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn rank_collapse(best_runs: &[RunData]) -> Option<String> {
    let collapsed: Vec<String> = best_runs
        .iter()
        .filter_map(|r| {
            let (tau, layer) = attention_collapse(r.last_probe()?)?;
            (tau > 0.9).then(|| format!("{} (τ(z) = {tau:.2} in layer {layer})", r.label))
        })
        .collect();
    (!collapsed.is_empty()).then(|| {
        format!(
            "Near rank collapse at the end (token alignment τ(z_l) of the hidden state after the residual addition \
                > 0.9 in an attention sublayer after the first layer, KiteNorm E.4): {}.",
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

fn skipped(best_runs: &[RunData]) -> Option<String> {
    let runs: Vec<String> = best_runs
        .iter()
        .filter_map(|r| {
            let s = r.skipped_steps();
            (!s.is_empty()).then(|| {
                let list: Vec<String> = s.iter().map(|x| x.to_string()).collect();
                format!("{} at step {}", r.label, list.join(", "))
            })
        })
        .collect();
    (!runs.is_empty()).then(|| {
        format!(
            "Skip-step refused updates (loss or gradient norm beyond `train.skip_step_sigma` σ of its recent mean): \
                {}. Skipped steps are left out of the probes' gradient statistics.",
            runs.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::aggregate::LrPoint;

    fn method(name: &str, losses: &[(f64, f64)], edge: Option<LrEdge>, seeds: &[f64]) -> MethodSummary {
        let mean = seeds.iter().sum::<f64>() / seeds.len() as f64;
        let curve = losses
            .iter()
            .map(|&(lr, v)| LrPoint { lr, val_loss: Some(v), runs: 1, diverged: 0, tasks: Vec::new() })
            .collect();
        let star = losses.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|p| p.0);
        MethodSummary {
            method: name.into(),
            group: vec![Some(serde_json::Value::String(name.into()))],
            lr_star: star,
            lr_edge: edge,
            best: seeds.iter().copied().reduce(f64::min),
            worst: seeds.iter().copied().reduce(f64::max),
            mean: Some(mean),
            std: None,
            seeds_at_lr_star: seeds.len(),
            runs: losses.len(),
            diverged: 0,
            diverged_runs: Vec::new(),
            curve,
            steps_to_target: None,
            time_to_target_s: None,
            tasks: Vec::new(),
            finals: seeds.to_vec(),
            task_finals: Vec::new(),
            spike_score: None,
            rollbacks: 0,
        }
    }

    #[test]
    fn edges_overlaps_and_recipes_that_never_learn_are_called_out() {
        let grid = [1e-3, 1e-2, 1e-1];
        let ms = vec![
            method("bhyt", &[(1e-3, 2.6), (1e-2, 2.55), (1e-1, 2.7)], None, &[2.55, 2.57]),
            method("pre", &[(1e-3, 2.7), (1e-2, 2.5), (1e-1, 2.9)], None, &[2.50, 2.84]),
            method("dyt", &[(grid[0], 3.12), (grid[1], 3.11), (grid[2], 3.10)], Some(LrEdge::Highest), &[3.10]),
        ];
        let w = winner(&ms).unwrap();
        assert!(w.contains("**bhyt**") && w.contains("mean final validation loss 2.5600"), "{w}");
        // scipy.stats.ttest_ind([2.55, 2.57], [2.50, 2.84], equal_var=False): p = 0.634.
        assert!(w.contains("not beyond noise (Welch p = 0.634)") && w.contains("n = 2"), "{w}");
        let e = edges(&ms).unwrap();
        assert!(e.contains("dyt at 1e-1 (the highest tried)"), "{e}");
        // Unigram loss 3.12: every dyt rate ends within 0.05 of it (or above); pre and bhyt learn.
        let never: Vec<&str> = never_learns(&ms, Some(3.12)).iter().map(|m| m.method.as_str()).collect();
        assert_eq!(never, ["dyt"]);
        let why = never_learns_why(&ms[2], &[], 3.12);
        assert!(why.contains("at every learning rate it ends at 3.100–3.120"), "{why}");
        assert!(never_learns(&ms, None).is_empty(), "no unigram loss recorded: no claim");
    }
}
