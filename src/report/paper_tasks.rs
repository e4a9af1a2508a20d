//! Published downstream-task tables a sweep's task results are put beside (`sweep.paper`):
//! per method, each task's accuracy in the paper and here (percent), their averages and ranks,
//! and Spearman's ρ of the two orderings by average.
//!
//! - `periln-table2-400m`, `-1.5b`, `-3.2b`: the Peri-LN paper's Table 2, pre-training rows:
//!   the mean over the seeds App. H.2.1 lists, diverged seeds excluded (as Table 2 says).
//! - `bhyt-table1-1b`, `-3b`: the BHyT paper's Table 1 (Llama-1B / Llama-3B, 5-shot, mean ±
//!   sd over five seeds).
//!
//! Neither paper says whether a task's accuracy is lm-eval's `acc` or `acc_norm`; the value
//! here is each task's headline (`acc_norm` where lm-eval reports it: ARC, HellaSwag, PIQA,
//! OpenBookQA; `acc` elsewhere), which the table's note says.

use crate::sweep::aggregate::MethodSummary;

/// Each seed's ARC-Easy, HellaSwag, PIQA, SIQA and Winogrande accuracy (`None`: diverged).
type Seeds = [Option<[f64; 5]>; 5];

/// The Peri-LN paper's App. H.2.1 (pre-training), per model size and architecture.
#[rustfmt::skip]
pub const PERILN_APP_H: [(&str, &str, Seeds); 9] = [
    ("400M", "Post-LN", [Some([0.3413, 0.2881, 0.6311, 0.3378, 0.5067]), Some([0.3691, 0.2886, 0.6132, 0.3337, 0.5099]), Some([0.3632, 0.2889, 0.6257, 0.3603, 0.5051]), Some([0.3603, 0.2920, 0.6262, 0.3490, 0.5012]), Some([0.3510, 0.2880, 0.6170, 0.3434, 0.5209])]),
    ("400M", "Pre-LN", [Some([0.5669, 0.3609, 0.7008, 0.4002, 0.5359]), None, Some([0.5354, 0.3328, 0.6741, 0.3905, 0.4957]), None, Some([0.5438, 0.3314, 0.6888, 0.4012, 0.4949])]),
    ("400M", "Peri-LN", [Some([0.5758, 0.3803, 0.6980, 0.4115, 0.5225]), Some([0.5728, 0.3739, 0.6915, 0.4017, 0.5367]), Some([0.5842, 0.3745, 0.6986, 0.4125, 0.5249]), Some([0.5800, 0.3722, 0.6959, 0.4038, 0.5209]), Some([0.5627, 0.3719, 0.6899, 0.4028, 0.5320])]),
    ("1.5B", "Post-LN", [Some([0.4268, 0.3121, 0.6659, 0.3628, 0.5185]), Some([0.4196, 0.3150, 0.6654, 0.3639, 0.5004]), None, Some([0.4285, 0.3212, 0.6730, 0.3511, 0.4775]), Some([0.4419, 0.3193, 0.6643, 0.3557, 0.5154])]),
    ("1.5B", "Pre-LN", [Some([0.6326, 0.4259, 0.7242, 0.4263, 0.5691]), Some([0.6019, 0.3924, 0.7111, 0.3992, 0.5627]), Some([0.6077, 0.3932, 0.7008, 0.4125, 0.5272]), Some([0.6111, 0.3886, 0.7187, 0.4135, 0.5225]), Some([0.6221, 0.3941, 0.7160, 0.4099, 0.5438])]),
    ("1.5B", "Peri-LN", [Some([0.6599, 0.4437, 0.7339, 0.4304, 0.5714]), Some([0.6591, 0.4394, 0.7399, 0.4145, 0.5699]), Some([0.6625, 0.4357, 0.7372, 0.4166, 0.5627]), Some([0.6633, 0.4367, 0.7345, 0.4222, 0.5667]), Some([0.6637, 0.4416, 0.7361, 0.4335, 0.5612])]),
    ("3.2B", "Post-LN", [Some([0.4731, 0.3427, 0.6774, 0.3664, 0.5343]), Some([0.4638, 0.3326, 0.6779, 0.3577, 0.4917]), Some([0.3956, 0.3321, 0.6143, 0.3408, 0.5067]), Some([0.4663, 0.3380, 0.6692, 0.3685, 0.5178]), Some([0.4663, 0.3340, 0.6839, 0.3577, 0.5043])]),
    ("3.2B", "Pre-LN", [Some([0.6688, 0.4588, 0.7470, 0.4273, 0.5919]), None, None, Some([0.6359, 0.4259, 0.7301, 0.4263, 0.5564]), None]),
    ("3.2B", "Peri-LN", [Some([0.6953, 0.4734, 0.7443, 0.4417, 0.5872]), Some([0.6839, 0.4684, 0.7427, 0.4324, 0.6054]), Some([0.6902, 0.4680, 0.7486, 0.4243, 0.5967]), Some([0.6864, 0.4700, 0.7427, 0.4273, 0.5935]), Some([0.6806, 0.4698, 0.7372, 0.4243, 0.6054])]),
];

/// The Peri-LN paper's tasks, in its column order (normlab's task names).
pub const PERILN_TASKS: [&str; 5] = ["arc_easy", "hellaswag", "piqa", "social_iqa", "winogrande"];

/// Each task's mean ± sd over seeds (percent), in [`BHYT_TASKS`]' order.
type MeanSd = [(f64, f64); 7];

/// The BHyT paper's Table 1, per size and method.
#[rustfmt::skip]
pub const BHYT_TABLE1: [(&str, &str, MeanSd); 10] = [
    ("1B", "RMSNorm", [(30.97, 0.20), (62.89, 0.74), (32.77, 0.09), (32.32, 0.94), (50.54, 0.48), (25.70, 0.01), (56.26, 0.44)]),
    ("1B", "Peri-LN", [(31.63, 0.32), (63.07, 0.43), (32.05, 0.17), (32.40, 0.80), (49.41, 1.64), (24.91, 0.00), (58.05, 0.34)]),
    ("1B", "LNS", [(31.39, 0.24), (62.94, 0.64), (32.80, 0.16), (33.50, 0.58), (50.37, 0.91), (24.88, 0.01), (56.67, 0.37)]),
    ("1B", "DyT", [(29.28, 0.48), (58.84, 0.58), (26.51, 0.20), (30.85, 0.87), (50.34, 0.68), (24.90, 0.00), (39.08, 0.31)]),
    ("1B", "BHyT", [(30.50, 0.16), (62.42, 0.41), (32.11, 0.10), (33.88, 0.73), (50.15, 0.34), (25.19, 0.02), (61.86, 0.17)]),
    ("3B", "RMSNorm", [(31.01, 0.21), (66.57, 0.41), (41.52, 0.25), (33.92, 0.33), (50.50, 0.78), (25.67, 0.02), (37.94, 0.12)]),
    ("3B", "Peri-LN", [(31.82, 0.38), (64.52, 0.24), (36.05, 0.11), (32.28, 0.59), (49.30, 0.52), (25.99, 0.00), (57.46, 0.31)]),
    ("3B", "LNS", [(31.88, 0.42), (64.68, 0.46), (36.25, 0.10), (32.45, 0.53), (51.18, 0.75), (26.87, 0.01), (37.83, 0.08)]),
    ("3B", "DyT", [(27.69, 0.27), (59.20, 0.15), (25.96, 0.17), (31.85, 0.38), (49.17, 1.28), (25.87, 0.02), (48.05, 0.56)]),
    ("3B", "BHyT", [(31.84, 0.15), (65.08, 0.39), (36.48, 0.04), (31.76, 0.33), (51.62, 0.66), (25.70, 0.01), (60.84, 0.29)]),
];

/// The BHyT paper's tasks, in its column order.
pub const BHYT_TASKS: [&str; 7] = ["arc_easy", "piqa", "hellaswag", "openbookqa", "winogrande", "mmlu", "boolq"];

/// One method's row: the preset with its placement, the paper's name, each task's accuracy (%).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub preset: &'static str,
    pub name: &'static str,
    pub values: Vec<f64>,
}

/// A published table of downstream accuracies.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskTable {
    pub title: String,
    pub tasks: &'static [&'static str],
    pub rows: Vec<TaskRow>,
}

/// The preset of a paper method: its RMSNorm form where normlab has one (both papers use RMSNorm
/// throughout); a run of the LayerNorm form of the same placement also matches the row (see
/// [`matches`]).
pub(super) fn preset_of(method: &str) -> &'static str {
    match method {
        "Post-LN" => "post",
        "Pre-LN" | "RMSNorm" => "pre-rms",
        "Peri-LN" => "peri-rms",
        "LNS" => "lns-rms",
        "DyT" => "dyt",
        _ => "bhyt",
    }
}

/// The sweep's method for a row's preset: the preset itself, else its LayerNorm form (`pre`
/// for `pre-rms`).
pub(super) fn method_of<'a>(ms: &'a [MethodSummary], preset: &str) -> Option<&'a MethodSummary> {
    let base = preset.strip_suffix("-rms");
    ms.iter().find(|m| m.method == preset).or_else(|| ms.iter().find(|m| Some(m.method.as_str()) == base))
}

/// The mean over the seeds that did not diverge, in percent.
fn seed_mean(seeds: &Seeds) -> Vec<f64> {
    let ok: Vec<&[f64; 5]> = seeds.iter().flatten().collect();
    (0..5).map(|t| 100.0 * ok.iter().map(|s| s[t]).sum::<f64>() / ok.len() as f64).collect()
}

/// The Peri-LN paper's Table 2 at `size` ("400M", "1.5B", "3.2B").
pub fn periln_table2(size: &str) -> TaskTable {
    let rows = PERILN_APP_H
        .iter()
        .filter(|(s, _, _)| *s == size)
        .map(|(_, name, seeds)| TaskRow { preset: preset_of(name), name, values: seed_mean(seeds) })
        .collect();
    TaskTable { title: format!("the Peri-LN paper's Table 2 ({size}, zero-shot)"), tasks: &PERILN_TASKS, rows }
}

/// The BHyT paper's Table 1 at `size` ("1B", "3B").
pub fn bhyt_table1(size: &str) -> TaskTable {
    let rows = BHYT_TABLE1
        .iter()
        .filter(|(s, _, _)| *s == size)
        .map(|(_, name, v)| TaskRow { preset: preset_of(name), name, values: v.iter().map(|x| x.0).collect() })
        .collect();
    TaskTable { title: format!("the BHyT paper's Table 1 (Llama-{size}, 5-shot)"), tasks: &BHYT_TASKS, rows }
}

/// The value measured here for `task` (percent), if the method was evaluated on it.
fn here(m: &MethodSummary, task: &str) -> Option<f64> {
    m.tasks.iter().find(|s| s.task == task && s.metric.starts_with("acc")).map(|s| 100.0 * s.value)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The side-by-side table and its finding; `None` when no method of the sweep is in the
/// paper's table with every one of its tasks evaluated.
pub fn side_by_side(table: &TaskTable, ms: &[MethodSummary]) -> Option<(String, String, String)> {
    let both: Vec<(&TaskRow, &MethodSummary, Vec<f64>)> = table
        .rows
        .iter()
        .filter_map(|p| {
            let m = method_of(ms, p.preset)?;
            let v: Option<Vec<f64>> = table.tasks.iter().map(|t| here(m, t)).collect();
            Some((p, m, v?))
        })
        .collect();
    if both.is_empty() {
        return None;
    }
    // Ranks by average accuracy, the highest first.
    let neg = |v: Vec<f64>| v.into_iter().map(|x| -x).collect::<Vec<_>>();
    let rp = crate::probe::fit::ranks(&neg(both.iter().map(|(p, _, _)| mean(&p.values)).collect()));
    let rh = crate::probe::fit::ranks(&neg(both.iter().map(|(_, _, v)| mean(v)).collect()));
    let mut t = format!(
        "| method | preset |{} avg. (paper / here) | rank (paper / here) |\n|---|---|",
        table.tasks.iter().map(|x| format!(" {x} (paper / here) |")).collect::<String>()
    );
    t += &"---|".repeat(table.tasks.len() + 2);
    t += "\n";
    for (i, (p, m, v)) in both.iter().enumerate() {
        let cells: String = p.values.iter().zip(v).map(|(a, b)| format!(" {a:.2} / {b:.2} |")).collect();
        t += &format!(
            "| {} | {} |{cells} {:.2} / {:.2} | {} / {} |\n",
            p.name,
            m.method,
            mean(&p.values),
            mean(v),
            rp[i],
            rh[i]
        );
    }
    let n = both.len();
    let first = |r: &[f64]| r.iter().position(|&x| x == 1.0).map(|i| both[i].1.method.as_str()).unwrap_or("–");
    let winners = match first(&rp) == first(&rh) {
        true => format!("both put {} first", first(&rp)),
        false => format!("the paper puts {} first, this sweep {}", first(&rp), first(&rh)),
    };
    let finding = match n {
        0..=2 => format!("Against {}: {n} methods in common, too few for a rank correlation; {winners}.", table.title),
        _ => format!(
            "Against {}: Spearman rank correlation ρ = {:.2} of the average accuracies over {n} methods in common; {winners}.",
            table.title,
            crate::probe::fit::pearson(&rp, &rh)
        ),
    };
    Some((format!("Against {}", table.title), t, finding))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 2's printed Peri-LN rows (the only rows of Table 2 the paper's text keeps) are
    /// the means of App. H's seeds: 400M 57.51 37.46 69.48 40.64 52.74, 1.5B 66.17 43.94 73.63
    /// 42.34 56.64, 3.2B 68.73 46.99 74.31 43.00 59.76 (SIQA at 400M: 40.646, printed 40.64).
    #[test]
    fn periln_means_are_table_2s() {
        let printed = [
            ("400M", [57.51, 37.46, 69.48, 40.64, 52.74]),
            ("1.5B", [66.17, 43.94, 73.63, 42.34, 56.64]),
            ("3.2B", [68.73, 46.99, 74.31, 43.00, 59.76]),
        ];
        for (size, want) in printed {
            let t = periln_table2(size);
            let peri = t.rows.iter().find(|r| r.name == "Peri-LN").unwrap();
            for (g, w) in peri.values.iter().zip(want) {
                assert!((g - w).abs() <= 0.01, "{size}: {g} vs {w}");
            }
        }
        // Pre-LN at 3.2B: seeds 2, 3 and 5 diverged; the mean of seeds 1 and 4.
        let pre = periln_table2("3.2B").rows.into_iter().find(|r| r.name == "Pre-LN").unwrap();
        assert!((pre.values[0] - 100.0 * (0.6688 + 0.6359) / 2.0).abs() < 1e-9);
    }

    fn summary(method: &str, acc: f64) -> MethodSummary {
        let tasks = PERILN_TASKS
            .iter()
            .map(|t| crate::tasks::TaskScore {
                task: t.to_string(),
                metric: "acc".into(),
                value: acc,
                stderr: Some(0.01),
                chance: None,
            })
            .collect();
        MethodSummary::for_tests(method, 3.0, tasks)
    }

    /// At 400M the paper's averages rank Peri-LN (51.57) over Pre-LN (49.69) over Post-LN
    /// (42.45); a sweep measuring the reverse order has ρ = −1 and names both winners; a method
    /// not evaluated on every task of the table is left out.
    #[test]
    fn task_tables_side_by_side_with_spearman_by_hand() {
        let ms = vec![summary("post", 0.6), summary("pre", 0.5), summary("peri", 0.4), summary("dyt", 0.9)];
        let (heading, table, finding) = side_by_side(&periln_table2("400M"), &ms).unwrap();
        assert_eq!(heading, "Against the Peri-LN paper's Table 2 (400M, zero-shot)");
        assert!(table.contains("| Peri-LN | peri | 57.51 / 40.00 |"), "{table}");
        assert!(table.contains("| 51.57 / 40.00 | 1 / 3 |"), "{table}");
        assert!(
            finding.contains("ρ = -1.00") && finding.contains("the paper puts peri first, this sweep post"),
            "{finding}"
        );
        let mut partial = summary("peri", 0.5);
        partial.tasks.pop();
        assert!(side_by_side(&periln_table2("400M"), &[partial]).is_none());
    }
}
