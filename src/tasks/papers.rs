//! The papers' downstream task sets as named suites (`[eval] tasks = ["periln-table2"]`),
//! each task in the split and with the shots the paper evaluated, read from local copies of the
//! hub's files under `eval.dir` (`DIR/TASK/SPLIT.parquet`, which `tools/get_tasks.py` writes):
//!
//! - `periln-table2`: the Peri-LN paper's Table 2 (App. H: lm-evaluation-harness, zero-shot):
//!   ARC-Easy, HellaSwag, PIQA, SIQA, Winogrande.
//! - `bhyt-table1`: the BHyT paper's Table 1 ("downstream benchmarks in a 5-shot setting",
//!   lm-evaluation-harness's standard task configurations): ARC-Easy, PIQA, HellaSwag,
//!   OpenBookQA, Winogrande, MMLU, BoolQ.
//!
//! The splits are lm-eval's for each task (its `test_split`, else `validation_split`), and the
//! examples come from the split lm-eval draws them from (`training_split`; MMLU's `dev`).

use std::path::Path;

/// One task of a suite: its name (= layout), the split evaluated and, with shots, the split
/// the examples are drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaperTask {
    pub task: &'static str,
    pub split: &'static str,
    pub fewshot_split: &'static str,
}

/// A paper's task set and its shots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaperSuite {
    pub name: &'static str,
    pub shots: usize,
    pub tasks: &'static [PaperTask],
}

const fn t(task: &'static str, split: &'static str, fewshot_split: &'static str) -> PaperTask {
    PaperTask { task, split, fewshot_split }
}

pub const PERILN_TABLE2: PaperSuite = PaperSuite {
    name: "periln-table2",
    shots: 0,
    tasks: &[
        t("arc_easy", "test", "train"),
        t("hellaswag", "validation", "train"),
        t("piqa", "validation", "train"),
        t("social_iqa", "validation", "train"),
        t("winogrande", "validation", "train"),
    ],
};

pub const BHYT_TABLE1: PaperSuite = PaperSuite {
    name: "bhyt-table1",
    shots: 5,
    tasks: &[
        t("arc_easy", "test", "train"),
        t("piqa", "validation", "train"),
        t("hellaswag", "validation", "train"),
        t("openbookqa", "test", "train"),
        t("winogrande", "validation", "train"),
        t("mmlu", "test", "dev"),
        t("boolq", "validation", "train"),
    ],
};

pub const SUITES: [PaperSuite; 2] = [PERILN_TABLE2, BHYT_TABLE1];

/// The suite named `name`.
pub fn suite(name: &str) -> Option<PaperSuite> {
    SUITES.iter().copied().find(|s| s.name == name)
}

/// `DIR/TASK/SPLIT.parquet`.
pub fn file(dir: &Path, task: &str, split: &str) -> std::path::PathBuf {
    dir.join(task).join(format!("{split}.parquet"))
}
