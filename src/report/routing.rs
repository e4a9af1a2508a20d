//! A mixture-of-experts sweep's routing at each method's LR*: how evenly the routers spread the
//! tokens (the load's coefficient of variation over the experts), how many experts no token
//! reached, the balancing loss before its coefficient and the pairs dropped over capacity —
//! each averaged over the run's last steps (`RunResult::routing`) and then over the seeds at
//! LR*, beside the loss the ranking reads.

use crate::sweep::aggregate::MethodSummary;
use crate::sweep::group::GroupBy;
use crate::sweep::results::RunResult;

/// The section's heading and markdown table, when the sweep's runs route through experts.
pub fn section(ms: &[MethodSummary], rows: &[RunResult], group: &GroupBy, tuned: &str) -> Option<(String, String)> {
    if rows.iter().all(|r| r.routing.moe_load_cv.is_none()) {
        return None;
    }
    let mut t = "| method | LR* | val loss | load CV | dead experts | balancing loss | dropped pairs | runs |\n\
                 |---|---|---|---|---|---|---|---|\n"
        .to_string();
    for m in ms {
        let at: Vec<&RunResult> = rows
            .iter()
            .filter(|r| group.label(&r.axes) == m.method && !r.state.is_diverged() && r.final_val_loss.is_some())
            .filter(|r| m.lr_star.is_none() || r.axes.get(tuned).and_then(|v| v.as_f64()) == m.lr_star)
            .collect();
        let mean = |f: fn(&RunResult) -> Option<f64>| crate::stats::mean_of(at.iter().filter_map(|r| f(r)));
        let cell = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            m.method,
            m.lr_star.map_or("–".to_string(), |x| format!("{x:e}")),
            cell(m.mean, 4),
            cell(mean(|r| r.routing.moe_load_cv), 2),
            cell(mean(|r| r.routing.moe_dead), 1),
            cell(mean(|r| r.routing.moe_balance), 3),
            cell(mean(|r| r.routing.moe_dropped), 1),
            at.len()
        );
    }
    Some(("Routing at LR* (mean of each run's last 20 steps, then of the seeds)".into(), t))
}
