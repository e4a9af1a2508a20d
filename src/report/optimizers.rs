//! A sweep that varies `optim.name`: the recipes ranked under each optimizer (each with its own
//! LR* and Welch's test between neighbours), and whether the ranking holds across optimizers —
//! "does your optimizer care how you normalize?".

use super::table::summary_table;
use crate::sweep::aggregate::MethodSummary;
use crate::sweep::group::{GroupBy, axis_label};
use crate::sweep::significance::PairTest;

/// A table per optimizer and one finding, when the sweep's methods differ by `optim.name`.
pub fn section(ms: &[MethodSummary], group_by: &GroupBy) -> Option<(Vec<(String, String)>, String)> {
    let at = group_by.keys().iter().position(|k| k == "optim.name")?;
    let optimizer = |m: &MethodSummary| axis_label(m.group.get(at).and_then(|v| v.as_ref()));
    let mut names: Vec<String> = ms.iter().map(optimizer).collect();
    names.sort();
    names.dedup();
    if names.len() < 2 {
        return None;
    }
    let recipe = |m: &MethodSummary| {
        let parts: Vec<String> =
            (0..m.group.len()).filter(|&i| i != at).map(|i| axis_label(m.group[i].as_ref())).collect();
        parts.join(", ")
    };
    let mut tables = Vec::new();
    let mut orders: Vec<(String, Vec<&MethodSummary>)> = Vec::new();
    for name in &names {
        let mine: Vec<MethodSummary> = ms.iter().filter(|m| &optimizer(m) == name).cloned().collect();
        tables.push((format!("Ranking under {name}"), summary_table(&mine)));
        orders.push((name.clone(), ms.iter().filter(|m| &optimizer(m) == name && m.mean.is_some()).collect()));
    }
    Some((tables, verdict(&orders, &recipe)))
}

/// The rankings side by side and every pair of recipes whose order differs between two
/// optimizers, with whether each order is beyond noise (Welch, p < 0.05) where it is held.
fn verdict(orders: &[(String, Vec<&MethodSummary>)], recipe: &dyn Fn(&MethodSummary) -> String) -> String {
    let rankings: Vec<String> = orders
        .iter()
        .map(|(o, ms)| format!("{o}: {}", ms.iter().map(|m| recipe(m)).collect::<Vec<_>>().join(" < ")))
        .collect();
    let mut swaps = Vec::new();
    for (i, (oa, a)) in orders.iter().enumerate() {
        for (ob, b) in &orders[i + 1..] {
            swaps.extend(swapped(a, b, recipe).into_iter().map(|(x, y, sa, sb)| {
                let held = |s: bool| if s { "beyond noise" } else { "a tie" };
                format!("{x} ahead of {y} under {oa} ({}), behind under {ob} ({})", held(sa), held(sb))
            }));
        }
    }
    let holds = if swaps.is_empty() {
        "The recipes rank in the same order under every optimizer.".to_string()
    } else {
        format!("The ranking changes with the optimizer: {}.", swaps.join("; "))
    };
    format!("Ranking per optimizer (mean final validation loss at each one's LR*) — {}. {holds}", rankings.join("; "))
}

/// Recipe pairs ordered one way in `a` and the other in `b`, each with whether its order is
/// separated by Welch's test in `a` and in `b`.
fn swapped(
    a: &[&MethodSummary],
    b: &[&MethodSummary],
    recipe: &dyn Fn(&MethodSummary) -> String,
) -> Vec<(String, String, bool, bool)> {
    let pos = |v: &[&MethodSummary], r: &str| v.iter().position(|m| recipe(m) == r);
    let mut out = Vec::new();
    for (i, x) in a.iter().enumerate() {
        for y in &a[i + 1..] {
            let (rx, ry) = (recipe(x), recipe(y));
            let (Some(bx), Some(by)) = (pos(b, &rx), pos(b, &ry)) else { continue };
            if bx > by {
                let sep_a = PairTest::of("final_val_loss", &x.finals, &y.finals).separated();
                let sep_b = PairTest::of("final_val_loss", &b[by].finals, &b[bx].finals).separated();
                out.push((rx, ry, sep_a, sep_b));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn method(recipe: &str, optim: &str, finals: &[f64]) -> MethodSummary {
        let mean = finals.iter().sum::<f64>() / finals.len() as f64;
        let mut m = MethodSummary::for_tests(&format!("{recipe}, optim={optim}"), mean, Vec::new());
        m.group = vec![Some(json!(recipe)), Some(json!(optim))];
        m.finals = finals.to_vec();
        m.seeds_at_lr_star = finals.len();
        m
    }

    #[test]
    fn a_swap_between_optimizers_is_named_with_its_significance() {
        let group: GroupBy = serde_json::from_str(r#"["model.recipe", "optim.name"]"#).unwrap();
        // adamw: pre (2.00, 2.01) well ahead of derf (2.30, 2.31); muon: derf ahead of pre by a hair.
        let ms = vec![
            method("pre", "adamw", &[2.00, 2.01]),
            method("derf", "muon", &[2.10, 2.30]),
            method("pre", "muon", &[2.11, 2.31]),
            method("derf", "adamw", &[2.30, 2.31]),
        ];
        let (tables, finding) = section(&ms, &group).unwrap();
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[0].0, "Ranking under adamw");
        assert!(finding.contains("adamw: pre < derf; muon: derf < pre"), "{finding}");
        assert!(
            finding.contains("pre ahead of derf under adamw (beyond noise), behind under muon (a tie)"),
            "{finding}"
        );
    }

    #[test]
    fn one_optimizer_gives_no_section() {
        let group: GroupBy = serde_json::from_str(r#"["model.recipe", "optim.name"]"#).unwrap();
        assert!(section(&[method("pre", "adamw", &[2.0])], &group).is_none());
    }
}
