//! A sweep file: a run config (every section of [`crate::run::RunConfig`]) plus a `[sweep]`
//! section with the axes to expand as a grid, and an optional reseed stage (KiteNorm's
//! protocol: rerun the best learning rate of each recipe with more seeds).
//!
//! ```toml
//! [sweep]
//! dir = "runs/sweeps/lr"
//! jobs = 2
//! target_loss = 2.5                    # report steps and time to reach this validation loss
//! [sweep.axes]                         # any config key → values; the grid is their product
//! "model.recipe" = ["post", "pre", "peri"]
//! "optim.lr" = [1e-3, 3e-3, 1e-2]
//! # keys joined by `+` vary together: each value lists one value per key (a method with its
//! # own settings, e.g. the BHyT paper's C.3)
//! "model.recipe+schedule.warmup_fraction" = [["pre-rms", 0.1], ["lns-rms", 0.05]]
//! [sweep.reseed]
//! seeds = [8, 9]                       # sets train.seed and train.sampler_seed
//! until_separated = 12                 # then up to 12 more runs, a seed at a time, while
//!                                      # adjacent ranks are within noise (sweep::separate)
//! [model]                              # … the base run config …
//! n_layers = 8
//! ```

use super::group::GroupBy;
use crate::run::edit::set_value;
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The most runs one sweep's grid may hold (each is a directory and a process).
pub const MAX_RUNS: usize = 10_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSection {
    /// Sweep directory: plan, run directories, logs, results and report.
    pub dir: PathBuf,
    /// Runs executed at the same time, each a separate process.
    #[serde(default = "default_jobs")]
    pub jobs: usize,
    /// Axis key → values, in order; the grid is their Cartesian product.
    pub axes: Axes,
    /// The key, or keys, whose values name a method (its best learning rate is chosen per
    /// method): `"model.recipe"` or `["model.recipe", "model.n_layers"]`.
    #[serde(default)]
    pub group_by: GroupBy,
    /// The key tuned per method.
    #[serde(default = "default_tuned")]
    pub tuned: String,
    /// Validation loss for "steps and time to target" (BHyT D.1).
    pub target_loss: Option<f64>,
    /// A published table the report puts this sweep's results beside (`"kitenorm-fig1b"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<Paper>,
    pub reseed: Option<Reseed>,
    /// The fine-tuning stage: pretrained runs fine-tuned on conversations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finetune: Option<FinetuneStage>,
    /// Where the runs execute: processes on this machine, or a Slurm job array.
    #[serde(default)]
    pub executor: Executor,
    /// Slurm settings (with `executor = "slurm"`).
    #[serde(default)]
    pub slurm: SlurmSection,
}

/// A published results table (see `report::paper`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum Paper {
    /// KiteNorm Fig. 1b: final validation perplexity of seven methods at 48 layers.
    #[serde(rename = "kitenorm-fig1b")]
    KitenormFig1b,
    /// The Peri-LN paper's Table 2: zero-shot accuracy of Post-, Pre- and Peri-LN at one size.
    #[serde(rename = "periln-table2-400m")]
    PerilnTable2_400m,
    #[serde(rename = "periln-table2-1.5b")]
    PerilnTable2_1_5b,
    #[serde(rename = "periln-table2-3.2b")]
    PerilnTable2_3_2b,
    /// The BHyT paper's Table 1: 5-shot accuracy of five methods at Llama-1B or Llama-3B.
    #[serde(rename = "bhyt-table1-1b")]
    BhytTable1_1b,
    #[serde(rename = "bhyt-table1-3b")]
    BhytTable1_3b,
}

impl Paper {
    /// Every table, with its name in a sweep file.
    pub const ALL: [(&'static str, Paper); 6] = [
        ("kitenorm-fig1b", Paper::KitenormFig1b),
        ("periln-table2-400m", Paper::PerilnTable2_400m),
        ("periln-table2-1.5b", Paper::PerilnTable2_1_5b),
        ("periln-table2-3.2b", Paper::PerilnTable2_3_2b),
        ("bhyt-table1-1b", Paper::BhytTable1_1b),
        ("bhyt-table1-3b", Paper::BhytTable1_3b),
    ];
}

impl TryFrom<String> for Paper {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        Paper::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p).ok_or_else(|| {
            let known: Vec<&str> = Paper::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown published table `{name}`; normlab has {}", known.join(", "))
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Executor {
    #[default]
    Local,
    Slurm,
}

/// `[sweep.slurm]`: how each array task is requested.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmSection {
    pub account: Option<String>,
    pub partition: Option<String>,
    /// Wall-time limit of one run, e.g. `"04:00:00"`.
    pub time: Option<String>,
    /// CPU cores per run (its threads).
    pub cpus_per_task: usize,
    /// GPUs per rank (then set `run.device` to `wgpu` or `cuda`).
    pub gpus_per_task: Option<usize>,
    /// Processes per run (MPI ranks, data-parallel; `cpus_per_task` and `gpus_per_task` each):
    /// above 1, each array task is `#SBATCH --ntasks=N` and its run is started by `srun`.
    pub ranks_per_run: usize,
    /// srun's MPI plugin for runs over several ranks (`srun --mpi=…`; `srun --mpi=list` shows
    /// the cluster's).
    pub mpi: String,
    /// Runs at a time (`--array=…%K`); default `sweep.jobs`.
    pub max_parallel: Option<usize>,
    /// Further `#SBATCH` options, one per entry (e.g. `"--qos=short"`, `"--mem=16G"`).
    pub extra: Vec<String>,
    /// Seconds between progress polls (`squeue`) while following the sweep.
    pub poll_seconds: u64,
}

impl Default for SlurmSection {
    fn default() -> Self {
        Self {
            account: None,
            partition: None,
            time: None,
            cpus_per_task: 1,
            gpus_per_task: None,
            ranks_per_run: 1,
            mpi: "pmix".into(),
            max_parallel: None,
            extra: Vec::new(),
            poll_seconds: 10,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reseed {
    /// Extra seeds run at each method's best `tuned` value; each sets `train.seed` and
    /// `train.sampler_seed`.
    #[serde(default)]
    pub seeds: Vec<u64>,
    /// After them, the most runs [`super::separate`] may add, one fresh seed at a time, to the
    /// methods of adjacent ranks whose final losses are not yet separated beyond noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_separated: Option<usize>,
}

impl Reseed {
    /// Refuses a budget of no runs and rounds a Slurm sweep cannot run. (`seeds = []` alone
    /// is a reseed stage of no runs, as a sweep file may say.)
    pub fn check(&self, executor: Executor) -> anyhow::Result<()> {
        ensure!(
            self.until_separated != Some(0),
            "sweep.reseed.until_separated = 0 allows no run; give a budget of runs ≥ 1, or remove it"
        );
        ensure!(
            self.until_separated.is_none() || executor != Executor::Slurm,
            "sweep.reseed.until_separated decides each round of seeds from the last round's results, which the \
                Slurm executor does not wait for; run the sweep with executor = \"local\", or give fixed seeds = [..]"
        );
        Ok(())
    }
}

fn default_jobs() -> usize {
    1
}
fn default_tuned() -> String {
    "optim.lr".into()
}

/// `plan.json`: every run of the sweep and how its results are grouped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub group_by: GroupBy,
    pub tuned: String,
    pub target_loss: Option<f64>,
    /// The published table the report compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<Paper>,
    /// The key the fine-tuning stage tunes per method, when the sweep has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finetune_tuned: Option<String>,
    /// The published fine-tuning table the report compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finetune_paper: Option<String>,
    pub runs: Vec<PlannedRun>,
}

/// The axis that names a fine-tuning run's parent.
pub const PARENT: &str = "finetune.parent";

/// Which pretraining runs are fine-tuned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Parents {
    /// Each method's runs at its best learning rate: every seed there.
    #[default]
    LrStar,
    /// Every finished pretraining run.
    Every,
}

/// `[sweep.finetune]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinetuneStage {
    /// The conversations.
    pub data: PathBuf,
    #[serde(default)]
    pub from: Parents,
    /// The fine-tuning stage's own axes (their product, for every parent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axes: Option<Axes>,
    /// The key whose best value is chosen per method when the stage's runs are ranked.
    #[serde(default = "default_finetune_tuned")]
    pub tuned: String,
    /// Written over each parent's config.
    #[serde(default)]
    pub config: toml::Table,
    /// A published fine-tuning table the report puts the stage beside (`"bhyt-table2-1b"`;
    /// `report::paper_sft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<String>,
}

fn default_finetune_tuned() -> String {
    "optim.lr".into()
}

/// The published fine-tuning tables `sweep.finetune.paper` may name (their values live in the
/// report: `report::paper_sft`).
pub const FINETUNE_PAPERS: [&str; 6] = [
    "bhyt-table2-1b",
    "bhyt-table2-3b",
    "bhyt-table4-3b",
    "periln-table2-400m",
    "periln-table2-1.5b",
    "periln-table2-3.2b",
];

impl FinetuneStage {
    pub fn check(&self, executor: Executor) -> anyhow::Result<()> {
        if let Some(p) = &self.paper {
            ensure!(
                FINETUNE_PAPERS.contains(&p.as_str()),
                "sweep.finetune.paper = \"{p}\" names no published fine-tuning table; give one of {}",
                FINETUNE_PAPERS.join(", ")
            );
        }
        ensure!(
            executor != Executor::Slurm,
            "sweep.finetune starts from the pretraining runs' results, which the Slurm executor does not wait for; \
             run the sweep with executor = \"local\" (or fine-tune its runs with normlab finetune)"
        );
        ensure!(
            self.data.is_file() || self.data == Path::new(crate::data::chat::builtin::NAME),
            "sweep.finetune.data {} does not exist; give a file of conversations (.jsonl, .json, .parquet; LIMA: \
             python tools/get_lima.py DIR) or `instructions` (built in)",
            self.data.display()
        );
        Ok(())
    }
}

/// The stage a run belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// The grid of the sweep's axes.
    Grid,
    /// The extra seeds at each method's best `tuned` value.
    Reseed,
    /// Seeds added to tied adjacent methods (`sweep.reseed.until_separated`).
    Separate,
    /// Pretrained runs fine-tuned on conversations (`[sweep.finetune]`).
    Finetune,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Stage::Grid => "grid",
            Stage::Reseed => "reseed",
            Stage::Separate => "separate",
            Stage::Finetune => "finetune",
        })
    }
}

/// One run of the sweep: its name, its axis values and the `--set` edits that make its config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedRun {
    pub name: String,
    pub stage: Stage,
    pub axes: Vec<(String, toml::Value)>,
}

pub struct Sweep {
    pub section: SweepSection,
    /// The base run config as a TOML table (without `[sweep]`).
    pub base: toml::Table,
    /// Retrain runs whose directory was made from another config (`--rerun-changed`); they
    /// are refused otherwise.
    pub rerun_changed: bool,
}

/// Refuses what would make a sweep's results silently wrong: an axis on `run.dir` (every run
/// would share one directory), a `group_by` key that is no config key (every run would pool
/// into one method), and a `tuned` key given in the file that is not an axis (no value would
/// be tuned).
fn check_keys(section: &SweepSection, tuned_given: bool) -> anyhow::Result<()> {
    let axes: Vec<&str> = section.axes.0.iter().flat_map(|(k, _)| k.split('+')).collect();
    ensure!(
        !axes.contains(&"run.dir"),
        "sweep.axes varies run.dir, but a sweep places every run in its own directory under sweep.dir; remove that axis"
    );
    for key in section.group_by.keys().iter().filter(|k| !axes.contains(&k.as_str())) {
        ensure!(
            is_config_key(key),
            "sweep.group_by names `{key}`, which is not a config key (nor an axis); use a key such as \"model.recipe\""
        );
    }
    ensure!(
        !tuned_given || axes.contains(&section.tuned.as_str()),
        "sweep.tuned = \"{}\" is not an axis of the sweep ({}); tune one of its axes",
        section.tuned,
        axes.join(", ")
    );
    Ok(())
}

/// Whether `key` names a field of a run config (a value of any type may be refused for its
/// type, but not as an unknown field).
fn is_config_key(key: &str) -> bool {
    let probe = crate::run::RunConfig::from_parts(&toml::Table::new(), "group_by", None, &[format!("{key}=0")]);
    probe
        .err()
        .is_none_or(|e| !format!("{e:#}").contains("unknown field") && !format!("{e:#}").contains("not a valid key"))
}

impl Sweep {
    /// Reads a sweep file; `sets` edit it first.
    pub fn load(path: &Path, sets: &[String]) -> anyhow::Result<Self> {
        let text = crate::io::read_text(path, "sweep config")?;
        Self::parse(&text, path, sets)
    }

    /// The built-in study (`normlab compare`): `configs/sweeps/compare.toml`, or with `full`
    /// the GPU-scale `compare-full.toml`; both are compiled in.
    /// `recipes`, when given, replace its recipe axis (`normlab compare --recipes rezero,pre`).
    pub fn compare(full: bool, recipes: &[String], sets: &[String]) -> anyhow::Result<Self> {
        const COMPARE: &str = include_str!("../../configs/sweeps/compare.toml");
        const COMPARE_FULL: &str = include_str!("../../configs/sweeps/compare-full.toml");
        let (text, name) = if full {
            (COMPARE_FULL, "configs/sweeps/compare-full.toml")
        } else {
            (COMPARE, "configs/sweeps/compare.toml")
        };
        Self::parse(&with_recipes(text, recipes)?, Path::new(name), sets)
    }

    /// `normlab textnorm`'s study (the Normalization chapter's build); `recipes`, when given, replace its
    /// recipe axis.
    pub fn textnorm(full: bool, recipes: &[String], sets: &[String]) -> anyhow::Result<Self> {
        const STUDY: &str = include_str!("../../configs/sweeps/textnorm.toml");
        const STUDY_FULL: &str = include_str!("../../configs/sweeps/textnorm-full.toml");
        let (text, name) = if full {
            (STUDY_FULL, "configs/sweeps/textnorm-full.toml")
        } else {
            (STUDY, "configs/sweeps/textnorm.toml")
        };
        Self::parse(&with_recipes(text, recipes)?, Path::new(name), sets)
    }

    /// Parses a sweep file's text; `sets` edit it first (`sweep.dir=…`, `train.steps=…`).
    pub fn parse(text: &str, path: &Path, sets: &[String]) -> anyhow::Result<Self> {
        let mut table: toml::Table =
            toml::from_str(text).with_context(|| format!("{} is not valid TOML", path.display()))?;
        for s in sets {
            crate::run::edit::apply_set(&mut table, s)?;
        }
        let tuned_given = table.get("sweep").and_then(|s| s.get("tuned")).is_some();
        let section = table
            .remove("sweep")
            .with_context(|| format!("{} has no [sweep] section; see configs/sweeps/", path.display()))?;
        let mut section: SweepSection = section
            .try_into()
            .map_err(|e: toml::de::Error| anyhow::anyhow!("{} [sweep]: {}", path.display(), e.message()))?;
        ensure!(section.jobs > 0, "sweep.jobs must be > 0");
        section.group_by = section.group_by.with_method_axes(&section.axes.0, &section.tuned);
        check_keys(&section, tuned_given)?;
        if let Some(r) = &section.reseed {
            r.check(section.executor)?;
        }
        if let Some(f) = &section.finetune {
            f.check(section.executor)?;
        }
        let runs = section.axes.0.iter().fold(1usize, |n, (_, vs)| n.saturating_mul(vs.len()));
        ensure!(
            runs <= MAX_RUNS,
            "sweep.axes make a grid of {runs} runs, more than {MAX_RUNS}; split the sweep into several sweep.dir"
        );
        // The base config as the file gives it, with the edits that are not the sweep's: its
        // errors cite the file's lines, or the `--set` that caused them.
        let origin = format!("{}", path.display());
        let mut file_base: toml::Table = toml::from_str(text)?;
        file_base.remove("sweep");
        let run_sets: Vec<String> = sets.iter().filter(|s| !s.trim_start().starts_with("sweep.")).cloned().collect();
        crate::run::RunConfig::from_parts(&file_base, &origin, Some(text), &run_sets)?;
        let s = Self { section, base: table, rerun_changed: false };
        let grid = s.grid();
        check_names(&grid)?;
        for run in grid {
            let check = |c: crate::run::RunConfig| c.check().map(|_| ());
            s.run_config(&run).and_then(check).with_context(|| format!("sweep run {}", run.name))?;
        }
        Ok(s)
    }

    /// The sweep file as it is run (every `--set` applied), to be read back by [`Sweep::load`].
    pub fn to_toml(&self) -> anyhow::Result<String> {
        let mut table = self.base.clone();
        table.insert("sweep".into(), toml::Value::try_from(&self.section)?);
        Ok(toml::to_string(&table)?)
    }

    /// The grid, first axis slowest.
    pub fn grid(&self) -> Vec<PlannedRun> {
        let combos = self.section.axes.combos();
        combos.into_iter().map(|axes| PlannedRun { name: run_name(&axes), stage: Stage::Grid, axes }).collect()
    }

    /// A fine-tuning run's config: its parent's (the axes before [`PARENT`]), the stage's config
    /// and conversations over it ([`crate::run::finetune::config_table`]), then its own axes.
    fn finetune_config(&self, run: &PlannedRun) -> anyhow::Result<crate::run::RunConfig> {
        let stage = self.section.finetune.as_ref().ok_or_else(|| {
            anyhow::anyhow!("the plan holds fine-tuning run {} but the sweep file has no [sweep.finetune]", run.name)
        })?;
        let at = run.axes.iter().position(|(k, _)| k == PARENT).unwrap_or(run.axes.len());
        let parent = match run.axes.get(at) {
            Some((_, toml::Value::String(p))) => PathBuf::from(p),
            _ => anyhow::bail!("fine-tuning run {} names no parent", run.name),
        };
        let mut table = self.base.clone();
        for (k, v) in &run.axes[..at] {
            set_value(&mut table, k, v.clone());
        }
        let mut table = crate::run::finetune::config_table(table, &stage.config, &stage.data, &parent);
        for (k, v) in run.axes.iter().skip(at + 1) {
            set_value(&mut table, k, v.clone());
        }
        let dir = super::layout::run(&self.section.dir, &run.name);
        set_value(&mut table, "run.dir", toml::Value::String(dir.display().to_string()));
        crate::run::RunConfig::from_table(&table, &format!("the sweep's fine-tuning run {}", run.name))
    }

    /// The config of one run, with its directory inside the sweep.
    pub fn run_config(&self, run: &PlannedRun) -> anyhow::Result<crate::run::RunConfig> {
        if run.stage == Stage::Finetune {
            return self.finetune_config(run);
        }
        let dir = super::layout::run(&self.section.dir, &run.name);
        let mut table = self.base.clone();
        for (k, v) in &run.axes {
            set_value(&mut table, k, v.clone());
        }
        set_value(&mut table, "run.dir", toml::Value::String(dir.display().to_string()));
        let axes: Vec<String> = run.axes.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        crate::run::RunConfig::from_table(&table, &format!("the sweep's run with {}", axes.join(", ")))
    }
}

/// A built-in study's text with its recipe axis replaced by `recipes` (unchanged when empty).
fn with_recipes(text: &str, recipes: &[String]) -> anyhow::Result<String> {
    if recipes.is_empty() {
        return Ok(text.to_string());
    }
    ensure!(recipes.iter().all(|r| !r.trim().is_empty()), "--recipes has an empty name; give e.g. pre,post,peri");
    let mut table: toml::Table = toml::from_str(text)?;
    let list = toml::Value::Array(recipes.iter().map(|r| toml::Value::String(r.trim().into())).collect());
    if let Some(axes) = table.get_mut("sweep").and_then(|s| s.get_mut("axes")).and_then(|a| a.as_table_mut()) {
        axes.insert("model.recipe".into(), list);
    }
    Ok(toml::to_string(&table)?)
}

/// An axis value in a run name: strings as they are, a table by its `name` when it has one (a
/// named recipe) else as `key-value` pairs joined by `+`, other values as TOML writes them.
/// A label longer than [`MAX_LABEL`] bytes keeps its start and a hash of the whole, so that
/// run directories stay within file-name limits and distinct.
fn value_label(v: &toml::Value) -> String {
    let label = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Table(t) => match t.get("name") {
            Some(toml::Value::String(n)) => n.clone(),
            _ => t.iter().map(|(k, v)| format!("{k}-{}", value_label(v))).collect::<Vec<_>>().join("+"),
        },
        other => other.to_string(),
    };
    if label.len() <= MAX_LABEL {
        return label;
    }
    let mut cut = MAX_LABEL - 9;
    while !label.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}", &label[..cut], &crate::data::cache::sha256_hex(v.to_string().as_bytes())[..8])
}

/// Refuses a grid two of whose runs get one name: the same value listed twice, or two values
/// a run name cannot tell apart (characters other than letters, digits and `=,.-_+` become
/// `_`, so `a/b` and `a_b` meet).
fn check_names(grid: &[PlannedRun]) -> anyhow::Result<()> {
    let mut names: std::collections::BTreeMap<&str, &PlannedRun> = std::collections::BTreeMap::new();
    for r in grid {
        let Some(first) = names.insert(r.name.as_str(), r) else { continue };
        if first.axes == r.axes {
            bail!("two runs of the grid are both named {}: an axis lists the same value twice", r.name);
        }
        let values = |p: &PlannedRun| p.axes.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ");
        bail!(
            "two runs of the grid would share the directory name {} ({} and {}): their values differ only in \
             characters a run name replaces by `_`; rename one (e.g. its file) so that they differ in letters or digits",
            r.name,
            values(first),
            values(r)
        );
    }
    Ok(())
}

/// The longest axis label in a run name (file names are limited to 255 bytes).
const MAX_LABEL: usize = 48;

/// `recipe=peri,lr=0.003`: each axis's last key part and value. A name depends on the run's
/// own values only, so it stays the same when the grid grows (a learning rate added).
pub fn run_name(axes: &[(String, toml::Value)]) -> String {
    let parts: Vec<String> = axes
        .iter()
        .map(|(k, v)| {
            let key = k.rsplit('.').next().unwrap_or(k);
            format!("{key}={}", value_label(v))
        })
        .collect();
    let name = parts.join(",");
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "=,.-_+".contains(c) { c } else { '_' }).collect()
}

/// The `(key, value)` pairs one axis value sets: itself, or for linked keys `a+b` (whose values
/// are lists, checked by [`Axes`]) each key with its entry.
fn linked(key: &str, v: &toml::Value) -> Vec<(String, toml::Value)> {
    match (key.contains('+'), v) {
        (true, toml::Value::Array(vs)) => key.split('+').map(str::to_string).zip(vs.iter().cloned()).collect(),
        _ => vec![(key.to_string(), v.clone())],
    }
}

/// `[sweep.axes]`: each config key with its non-empty list of values, in the file's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table", into = "toml::Table")]
pub struct Axes(pub Vec<(String, Vec<toml::Value>)>);

impl Axes {
    /// Every combination of the axes' values, first axis slowest.
    pub fn combos(&self) -> Vec<Vec<(String, toml::Value)>> {
        let mut combos: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
        for (k, vs) in &self.0 {
            combos =
                combos.into_iter().flat_map(|c| vs.iter().map(move |v| [c.clone(), linked(k, v)].concat())).collect();
        }
        combos
    }
}

impl TryFrom<toml::Table> for Axes {
    type Error = String;

    fn try_from(t: toml::Table) -> Result<Self, String> {
        if t.is_empty() {
            return Err("sweep.axes is empty; give at least one key with a list of values".into());
        }
        let mut axes = Vec::with_capacity(t.len());
        for (k, v) in t {
            let toml::Value::Array(vs) = v else { return Err(format!("sweep.axes.\"{k}\" must be a list of values")) };
            if vs.is_empty() {
                return Err(format!("sweep.axes.\"{k}\" is an empty list"));
            }
            let keys = k.split('+').count();
            let fits = |v: &toml::Value| matches!(v, toml::Value::Array(a) if a.len() == keys);
            if keys > 1 && !vs.iter().all(fits) {
                return Err(format!(
                    "sweep.axes.\"{k}\" links {keys} keys: each of its values must be a list of {keys} values, one per key"
                ));
            }
            axes.push((k, vs));
        }
        Ok(Axes(axes))
    }
}

impl From<Axes> for toml::Table {
    fn from(a: Axes) -> Self {
        a.0.into_iter().map(|(k, vs)| (k, toml::Value::Array(vs))).collect()
    }
}

impl Axes {
    /// The values of axis `key`, when the sweep has it.
    pub fn get(&self, key: &str) -> Option<&[toml::Value]> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, vs)| vs.as_slice())
    }
}
