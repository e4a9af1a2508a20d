//! Published tables a sweep's results are put beside (`sweep.paper`): the paper's value next
//! to the one measured here, per method, and the rank correlation of the two orderings.

use super::paper_tasks::{self, TaskTable};
use crate::sweep::aggregate::MethodSummary;
use crate::sweep::config::Paper;

/// One method's row of a published table: the preset that implements it, the paper's name,
/// its best learning rate and best / worst final validation perplexity over seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperRow {
    pub preset: &'static str,
    pub name: &'static str,
    pub lr_star: f64,
    pub best: f64,
    pub worst: f64,
}

/// KiteNorm Fig. 1b: 48 layers, three seeds at each method's LR* (Table 2's recipes).
pub const KITENORM_FIG1B: [PaperRow; 7] = [
    PaperRow { preset: "gpt2-pre", name: "GPT-2 pre-norm", lr_star: 5e-3, best: 20.240, worst: 20.343 },
    PaperRow { preset: "keel", name: "KEEL", lr_star: 5e-3, best: 20.316, worst: 20.420 },
    PaperRow { preset: "peri-norm", name: "Peri-norm", lr_star: 1e-3, best: 21.365, worst: 21.699 },
    PaperRow { preset: "mix", name: "Mix-norm", lr_star: 1e-3, best: 22.011, worst: 22.211 },
    PaperRow { preset: "post", name: "Post-norm", lr_star: 5e-4, best: 24.807, worst: 24.882 },
    PaperRow { preset: "lns", name: "LayerNorm-Scaling", lr_star: 1e-2, best: 19.834, worst: 19.970 },
    PaperRow { preset: "kitenorm", name: "KiteNorm", lr_star: 5e-3, best: 19.080, worst: 19.156 },
];

/// What a published table holds.
pub enum Published {
    /// Final validation perplexity per method (KiteNorm Fig. 1b).
    Loss(&'static [PaperRow], &'static str),
    /// Downstream accuracy per method and task.
    Tasks(TaskTable),
}

impl Paper {
    pub fn published(self) -> Published {
        match self {
            Paper::KitenormFig1b => Published::Loss(&KITENORM_FIG1B, "KiteNorm Fig. 1b, 48 layers"),
            Paper::PerilnTable2_400m => Published::Tasks(paper_tasks::periln_table2("400M")),
            Paper::PerilnTable2_1_5b => Published::Tasks(paper_tasks::periln_table2("1.5B")),
            Paper::PerilnTable2_3_2b => Published::Tasks(paper_tasks::periln_table2("3.2B")),
            Paper::BhytTable1_1b => Published::Tasks(paper_tasks::bhyt_table1("1B")),
            Paper::BhytTable1_3b => Published::Tasks(paper_tasks::bhyt_table1("3B")),
        }
    }
}

/// The side-by-side table of `paper` and this sweep, with its finding (`None` when no method is
/// in both).
pub fn side_by_side(paper: Paper, ms: &[MethodSummary]) -> Option<(String, String, String)> {
    match paper.published() {
        Published::Loss(rows, title) => loss_side_by_side(rows, title, ms),
        Published::Tasks(table) => paper_tasks::side_by_side(&table, ms),
    }
}

/// The side-by-side table of a loss table and the finding on the ranking; `None` when no
/// method of the sweep is in the paper's table.
fn loss_side_by_side(rows: &[PaperRow], title: &str, ms: &[MethodSummary]) -> Option<(String, String, String)> {
    let both: Vec<(&PaperRow, &MethodSummary)> = rows
        .iter()
        .filter_map(|p| ms.iter().find(|m| m.method == p.preset && m.mean.is_some()).map(|m| (p, m)))
        .collect();
    if both.is_empty() {
        return None;
    }
    let paper_best: Vec<f64> = both.iter().map(|(p, _)| p.best).collect();
    let ours: Vec<f64> = both.iter().map(|(_, m)| m.mean.unwrap_or(f64::NAN)).collect();
    let (rp, ro) = (crate::probe::fit::ranks(&paper_best), crate::probe::fit::ranks(&ours));
    let mut t = String::from(
        "| method | preset | paper LR* | LR* here | paper best / worst ppl | best / worst ppl here | paper rank | rank \
         here |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (i, (p, m)) in both.iter().enumerate() {
        let ppl = |v: Option<f64>| v.map_or("–".into(), |l| format!("{:.3}", l.exp()));
        t += &format!(
            "| {} | {} | {:e} | {} | {:.3} / {:.3} | {} / {} | {} | {} |\n",
            p.name,
            p.preset,
            p.lr_star,
            m.lr_star.map_or("–".into(), |v| format!("{v:e}")),
            p.best,
            p.worst,
            ppl(m.best),
            ppl(m.worst),
            rp[i],
            ro[i]
        );
    }
    Some((format!("Against {title}"), t, ranking_finding(title, &both, &rp, &ro)))
}

/// Spearman's ρ of the two orderings (the paper's by best perplexity, this sweep's by the mean
/// over seeds), and whether the winners agree.
fn ranking_finding(title: &str, both: &[(&PaperRow, &MethodSummary)], rp: &[f64], ro: &[f64]) -> String {
    let n = both.len();
    let first = |r: &[f64]| r.iter().position(|&v| v == 1.0).map(|i| both[i].0.preset).unwrap_or("–");
    let winners = if first(rp) == first(ro) {
        format!("both rank {} first", first(rp))
    } else {
        format!("the paper ranks {} first, this sweep {}", first(rp), first(ro))
    };
    if n < 3 {
        return format!("Against {title}: only {n} methods in common, too few for a rank correlation; {winners}.");
    }
    let rho = crate::probe::fit::pearson(rp, ro);
    format!(
        "Against {title}: Spearman rank correlation ρ = {rho:.2} over {n} methods in common (1 = the same order, −1 \
            reversed); {winners}."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(method: &str, mean_ppl: f64, lr: f64) -> MethodSummary {
        let l = mean_ppl.ln();
        MethodSummary {
            method: method.into(),
            group: Vec::new(),
            lr_star: Some(lr),
            lr_edge: None,
            best: Some(l - 0.01),
            worst: Some(l + 0.01),
            mean: Some(l),
            std: None,
            seeds_at_lr_star: 3,
            runs: 3,
            diverged: 0,
            diverged_runs: Vec::new(),
            curve: Vec::new(),
            steps_to_target: None,
            time_to_target_s: None,
            tasks: Vec::new(),
            finals: vec![l - 0.01, l, l + 0.01],
            task_finals: Vec::new(),
            spike_score: None,
            rollbacks: 0,
        }
    }

    #[test]
    fn fig_1b_side_by_side_with_spearman_by_hand() {
        // Paper order of these four (best ppl): kitenorm 19.080 (1), lns 19.834 (2), gpt2-pre
        // 20.240 (3), post 24.807 (4). Here: lns 1, kitenorm 2, gpt2-pre 3, post 4; `pre` is not
        // in the paper's table and is left out. d = (1, 1, 0, 0): ρ = 1 − 6·2/(4·15) = 0.8.
        let ms = vec![
            summary("lns", 30.0, 1e-2),
            summary("kitenorm", 31.0, 5e-3),
            summary("gpt2-pre", 32.0, 5e-3),
            summary("post", 40.0, 1e-3),
            summary("pre", 29.0, 1e-3),
        ];
        let (heading, table, finding) = side_by_side(Paper::KitenormFig1b, &ms).unwrap();
        assert!(heading.contains("Fig. 1b"));
        assert_eq!(table.lines().count(), 2 + 4, "{table}");
        assert!(
            table.contains("| KiteNorm | kitenorm | 5e-3 | 5e-3 | 19.080 / 19.156 | 30.692 / 31.312 | 1 | 2 |"),
            "{table}"
        );
        assert!(finding.contains("ρ = 0.80 over 4 methods"), "{finding}");
        assert!(finding.contains("the paper ranks kitenorm first, this sweep lns"), "{finding}");
        assert!(side_by_side(Paper::KitenormFig1b, &[summary("pre", 29.0, 1e-3)]).is_none());
    }

    #[test]
    fn the_table_is_fig_1b() {
        // KiteNorm Fig. 1b, row by row, and every preset named exists.
        let names: Vec<&str> = KITENORM_FIG1B.iter().map(|r| r.preset).collect();
        assert_eq!(names, ["gpt2-pre", "keel", "peri-norm", "mix", "post", "lns", "kitenorm"]);
        assert!(names.iter().all(|n| crate::recipe::preset(n).is_some()));
        assert_eq!(KITENORM_FIG1B[4].lr_star, 5e-4, "post-norm's LR*");
    }
}
