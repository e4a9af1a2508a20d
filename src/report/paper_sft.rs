//! Published fine-tuning results a sweep's fine-tuning stage is put beside
//! (`sweep.finetune.paper`):
//!
//! - `bhyt-table2-1b`, `bhyt-table2-3b`: the BHyT paper's Table 2 (LoRA SFT on LIMA after
//!   pretraining Llama-1B / -3B; mean over five seeds): PT eval loss, SFT train and eval loss,
//!   the seven 5-shot tasks' average;
//! - `bhyt-table4-3b`: its Table 4 (Llama-3B pretrained on 20B tokens, Peri-LN and BHyT);
//! - `periln-table2-400m`, `-1.5b`, `-3.2b`: the Peri-LN paper's Table 2, "SFT Avg." (full SFT on
//!   LIMA). The text normlab is built from gives that column for Peri-LN only; Pre- and Post-LN
//!   are shown as not given.

/// One method's published row.
#[derive(Clone, Debug, PartialEq)]
pub struct SftRow {
    pub name: &'static str,
    pub pt_eval: Option<f64>,
    pub sft_train: Option<f64>,
    pub sft_eval: Option<f64>,
    /// The task average after SFT, percent.
    pub avg: Option<f64>,
}

const fn row(name: &'static str, pt: f64, train: f64, eval: f64, avg: f64) -> SftRow {
    SftRow { name, pt_eval: Some(pt), sft_train: Some(train), sft_eval: Some(eval), avg: Some(avg) }
}

const fn avg_only(name: &'static str, avg: Option<f64>) -> SftRow {
    SftRow { name, pt_eval: None, sft_train: None, sft_eval: None, avg }
}

/// Every table by its name in a sweep file, with its title.
pub const TABLES: [(&str, &str); 6] = [
    ("bhyt-table2-1b", "the BHyT paper's Table 2 (Llama-1B, LoRA SFT on LIMA)"),
    ("bhyt-table2-3b", "the BHyT paper's Table 2 (Llama-3B, LoRA SFT on LIMA)"),
    ("bhyt-table4-3b", "the BHyT paper's Table 4 (Llama-3B, 20B tokens, SFT on LIMA)"),
    ("periln-table2-400m", "the Peri-LN paper's Table 2 (400M, SFT on LIMA)"),
    ("periln-table2-1.5b", "the Peri-LN paper's Table 2 (1.5B, SFT on LIMA)"),
    ("periln-table2-3.2b", "the Peri-LN paper's Table 2 (3.2B, SFT on LIMA)"),
];

/// The rows of table `name`.
pub fn rows(name: &str) -> Vec<SftRow> {
    let periln = |peri: f64| vec![avg_only("Post-LN", None), avg_only("Pre-LN", None), avg_only("Peri-LN", Some(peri))];
    match name {
        "bhyt-table2-1b" => vec![
            row("RMSNorm", 3.272, 3.200, 3.664, 35.01),
            row("Peri-LN", 3.279, 3.113, 3.594, 38.20),
            row("LNS", 3.271, 3.118, 3.619, 35.77),
            row("DyT", 3.696, 3.226, 3.747, 40.22),
            row("BHyT", 3.254, 2.841, 3.288, 42.48),
        ],
        "bhyt-table2-3b" => vec![
            row("RMSNorm", 3.272, 2.646, 3.217, 39.83),
            row("Peri-LN", 3.279, 2.614, 3.178, 42.45),
            row("LNS", 3.271, 2.652, 3.157, 41.78),
            row("DyT", 3.855, 3.361, 3.971, 38.87),
            row("BHyT", 3.254, 2.693, 3.130, 42.88),
        ],
        "bhyt-table4-3b" => vec![row("Peri-LN", 2.812, 2.477, 2.830, 45.90), row("BHyT", 2.760, 2.468, 2.764, 48.31)],
        "periln-table2-400m" => periln(51.96),
        "periln-table2-1.5b" => periln(56.94),
        "periln-table2-3.2b" => periln(59.02),
        _ => Vec::new(),
    }
}

/// The rank of `v` among `all` (1 = best; `lower` when lower is better).
pub fn rank(v: f64, all: &[f64], lower: bool) -> usize {
    1 + all.iter().filter(|&&x| if lower { x < v } else { x > v }).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_table_has_rows_and_ranks_follow_the_paper() {
        for (name, _) in TABLES {
            assert!(!rows(name).is_empty(), "{name}");
        }
        // Table 2 (1B): BHyT's SFT eval loss 3.288 is the lowest of the five; DyT's 3.747 the highest.
        let evals: Vec<f64> = rows("bhyt-table2-1b").iter().filter_map(|r| r.sft_eval).collect();
        assert_eq!((rank(3.288, &evals, true), rank(3.747, &evals, true)), (1, 5));
        assert_eq!(rank(42.48, &[35.01, 38.20, 35.77, 40.22, 42.48], false), 1);
        let names: Vec<&str> = TABLES.iter().map(|t| t.0).collect();
        assert_eq!(names, crate::sweep::config::FINETUNE_PAPERS, "the names a sweep file may give");
    }
}
