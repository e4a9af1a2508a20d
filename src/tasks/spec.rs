//! Which tasks to evaluate, as a run config (`[eval]`) or `normlab evaluate --tasks` names
//! them, and their loading: a built-in task by name, or a local file in a published layout
//! (nothing is downloaded).
//!
//! ```toml
//! [eval]
//! every = 500                        # also every 500 steps (0: only at the end)
//! tasks = ["builtin",                # the built-in suite
//!          { name = "arc_easy", path = "data/arc_easy/test.parquet" },
//!          { name = "mmlu_5shot", layout = "mmlu", path = "data/mmlu/test.parquet", num_fewshot = 5 }]
//! ```

use super::builtin;
use super::fewshot;
use super::item::{Item, Task};
use super::layouts;
use super::papers;
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[eval]` of a run config: downstream tasks evaluated at the end of training, and every
/// `every` steps when it is not 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalSection {
    pub tasks: Vec<TaskSpec>,
    pub every: usize,
    /// Where the papers' suites (`periln-table2`, `bhyt-table1`) find their files:
    /// `DIR/TASK/SPLIT.parquet`.
    pub dir: PathBuf,
}

impl Default for EvalSection {
    fn default() -> Self {
        Self { tasks: Vec::new(), every: 0, dir: PathBuf::from(DEFAULT_DIR) }
    }
}

/// Where the papers' suites look for their files unless `eval.dir` says otherwise.
pub const DEFAULT_DIR: &str = "data/tasks";

/// Items of a built-in task when the spec gives no `limit`.
pub const BUILTIN_ITEMS: usize = 300;
/// lm-eval's default seed (its `--seed` and few-shot sampler).
pub const DEFAULT_SEED: u64 = 1234;

/// One task to evaluate: a built-in one by name, or a file in a published layout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "SpecForm", into = "SpecForm")]
pub struct TaskSpec {
    /// The name results are reported under (and the layout, unless `layout` says another).
    pub name: String,
    /// The task file (`.parquet`, `.jsonl`, `.json`, `.txt`); none: a built-in task.
    pub path: Option<PathBuf>,
    pub layout: Option<String>,
    /// The first `limit` items only (built-in tasks: how many are made).
    pub limit: Option<usize>,
    /// Examples before each item, chosen with `seed` as lm-eval chooses them
    /// ([`super::fewshot`]).
    pub num_fewshot: usize,
    /// The file the examples come from (a train or dev split in the same layout); none: the
    /// task file itself.
    pub fewshot_path: Option<PathBuf>,
    pub seed: u64,
}

/// A spec as written: a name, or a table.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum SpecForm {
    Name(String),
    Table {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layout: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
        #[serde(default)]
        num_fewshot: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fewshot_path: Option<PathBuf>,
        #[serde(default = "default_seed")]
        seed: u64,
    },
}

fn default_seed() -> u64 {
    DEFAULT_SEED
}

impl From<SpecForm> for TaskSpec {
    fn from(f: SpecForm) -> Self {
        match f {
            SpecForm::Name(name) => TaskSpec::named(&name),
            SpecForm::Table { name, path, layout, limit, num_fewshot, fewshot_path, seed } => {
                TaskSpec { name, path, layout, limit, num_fewshot, fewshot_path, seed }
            }
        }
    }
}

impl From<TaskSpec> for SpecForm {
    fn from(s: TaskSpec) -> Self {
        let plain = s.path.is_none()
            && s.layout.is_none()
            && s.limit.is_none()
            && s.num_fewshot == 0
            && s.fewshot_path.is_none();
        if plain && s.seed == DEFAULT_SEED {
            return SpecForm::Name(s.name);
        }
        SpecForm::Table {
            name: s.name,
            path: s.path,
            layout: s.layout,
            limit: s.limit,
            num_fewshot: s.num_fewshot,
            fewshot_path: s.fewshot_path,
            seed: s.seed,
        }
    }
}

impl TaskSpec {
    /// A built-in task by name.
    pub fn named(name: &str) -> Self {
        TaskSpec {
            name: name.into(),
            path: None,
            layout: None,
            limit: None,
            num_fewshot: 0,
            fewshot_path: None,
            seed: DEFAULT_SEED,
        }
    }

    /// `name` or `name=PATH` (`normlab evaluate --tasks`); `builtin` is the whole suite.
    pub fn parse_list(list: &[String]) -> Vec<TaskSpec> {
        list.iter()
            .map(|s| match s.split_once('=') {
                Some((name, path)) => TaskSpec { path: Some(path.into()), ..TaskSpec::named(name) },
                None => TaskSpec::named(s),
            })
            .collect()
    }
}

/// The `[eval]` table of the TOML file `path` (a run config, or a file of its own); other
/// tables are ignored.
pub fn read_eval_file(path: &Path) -> anyhow::Result<EvalSection> {
    #[derive(Deserialize)]
    struct File {
        eval: Option<EvalSection>,
    }
    let text = crate::io::read_text(path, "task list")?;
    let f: File = toml::from_str(&text).with_context(|| format!("{} is not a valid TOML task list", path.display()))?;
    let eval =
        f.eval.with_context(|| format!("{} has no [eval] table; give one with tasks = [...]", path.display()))?;
    ensure!(!eval.tasks.is_empty(), "{}: [eval] names no tasks", path.display());
    Ok(eval)
}

/// The specs with `builtin` expanded into the suite's tasks and a paper's suite into its tasks
/// (files under `dir`).
pub fn expand(specs: &[TaskSpec], dir: &Path) -> Vec<TaskSpec> {
    specs
        .iter()
        .flat_map(|s| match (s.name.as_str(), &s.path, papers::suite(&s.name)) {
            ("builtin", None, _) => {
                builtin::SUITE.iter().map(|n| TaskSpec { name: n.to_string(), ..s.clone() }).collect()
            }
            (_, None, Some(suite)) => suite_specs(&suite, dir),
            _ => vec![s.clone()],
        })
        .collect()
}

/// A paper's suite as specs reading its files under `dir`.
fn suite_specs(suite: &papers::PaperSuite, dir: &Path) -> Vec<TaskSpec> {
    suite
        .tasks
        .iter()
        .map(|p| TaskSpec {
            path: Some(papers::file(dir, p.task, p.split)),
            num_fewshot: suite.shots,
            fewshot_path: (suite.shots > 0).then(|| papers::file(dir, p.task, p.fewshot_split)),
            ..TaskSpec::named(p.task)
        })
        .collect()
}

/// Names a task may have without a path: the built-in ones, the suites.
fn pathless_names() -> String {
    let papers = papers::SUITES.iter().map(|s| s.name);
    ["builtin"].into_iter().chain(builtin::SUITE).chain(papers).collect::<Vec<_>>().join(", ")
}

/// A missing task file, with where a published layout's file comes from.
fn missing(s: &TaskSpec, layout: &str, p: &Path) -> String {
    let source = match layouts::hub(layout) {
        Some((id, config)) => {
            let split = p.file_stem().map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
            let config = config.map(|c| format!(" ({c})")).unwrap_or_default();
            format!(
                "; it is the hub's {id}{config}, split {split}: fetch it with `python3 tools/get_tasks.py --out DIR` \
                 (needs the `datasets` package and the hub) and --set eval.dir=DIR, or put your copy there"
            )
        }
        None => String::new(),
    };
    format!("eval task `{}`: {} is not a file{source}", s.name, p.display())
}

/// Refuses a spec that cannot load, before anything is trained: an unknown name or layout, a
/// missing file, few-shot where the layout has no single context.
pub fn check(s: &TaskSpec) -> anyhow::Result<()> {
    match &s.path {
        None => {
            ensure!(
                builtin::SUITE.contains(&s.name.as_str()) || s.name == "builtin" || papers::suite(&s.name).is_some(),
                "eval task `{}` has no path and is neither built in nor a paper's suite ({}); give it a path = \"FILE\"",
                s.name,
                pathless_names()
            );
            ensure!(
                s.num_fewshot == 0 || papers::suite(&s.name).is_some(),
                "eval task `{}`: the built-in tasks are zero-shot; remove num_fewshot",
                s.name
            );
        }
        Some(p) => {
            let layout = s.layout.as_deref().unwrap_or(&s.name);
            ensure!(
                layouts::scoring(layout).is_some(),
                "eval task `{}`: unknown layout `{layout}`; set layout to one of arc_easy, arc_challenge, hellaswag, piqa, \
                 social_iqa, winogrande, openbookqa, boolq, lambada_openai, mmlu, multiple_choice, text",
                s.name
            );
            ensure!(p.is_file(), "{}", missing(s, layout, p));
            ensure!(
                s.num_fewshot == 0 || !matches!(layout, "lambada_openai" | "text"),
                "eval task `{}`: few-shot is not supported for the {layout} layout (it has no answers to show)",
                s.name
            );
            if let Some(f) = &s.fewshot_path {
                ensure!(f.is_file(), "{} (its fewshot_path)", missing(s, layout, f));
            }
        }
    }
    Ok(())
}

/// Loads `s` for a model of `context` tokens (a built-in task is made from the built-in
/// corpus in `cache`, its items within the context).
pub fn load(s: &TaskSpec, cache: &Path, context: usize) -> anyhow::Result<Task> {
    check(s)?;
    let Some(path) = &s.path else {
        return builtin::task(&s.name, s.limit.unwrap_or(BUILTIN_ITEMS), s.seed, cache, context);
    };
    let layout = s.layout.as_deref().unwrap_or(&s.name);
    let items = items_of(path, layout, s.limit, &s.name)?;
    let items = match s.num_fewshot {
        0 => items,
        k => {
            // The examples' pool is whole: `limit` bounds the items evaluated, as lm-eval's does.
            let pool = items_of(s.fewshot_path.as_deref().unwrap_or(path), layout, None, &s.name)?;
            let sampler = fewshot::Sampler::for_layout(layout, s.seed);
            fewshot::with_fewshot(items, &pool, k, sampler, layout == "mmlu")?
        }
    };
    let scoring = layouts::scoring(layout).expect("checked");
    Ok(Task { name: s.name.clone(), scoring, items })
}

/// The first `limit` records of `path` as items of `layout`.
fn items_of(path: &Path, layout: &str, limit: Option<usize>, name: &str) -> anyhow::Result<Vec<Item>> {
    let records = crate::data::read::records::records(path, limit)?;
    ensure!(!records.is_empty(), "eval task `{name}`: {} holds no records", path.display());
    records
        .iter()
        .enumerate()
        .map(|(i, r)| layouts::item(layout, r).with_context(|| format!("{} record {}", path.display(), i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and tables read back as written; `builtin` expands to the suite.
    #[test]
    fn specs_read_as_names_or_tables() {
        #[derive(Deserialize, Serialize)]
        struct C {
            tasks: Vec<TaskSpec>,
        }
        let c: C =
            toml::from_str("tasks = [\"builtin\", { name = \"arc_easy\", path = \"a.parquet\", limit = 5 }]").unwrap();
        assert_eq!(c.tasks[0], TaskSpec::named("builtin"));
        assert_eq!((c.tasks[1].path.as_deref(), c.tasks[1].limit), (Some(Path::new("a.parquet")), Some(5)));
        let back: C = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back.tasks, c.tasks);
        let names: Vec<String> = expand(&c.tasks, Path::new(DEFAULT_DIR)).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["sotu_words", "sotu_continuation", "agreement_pairs", "arc_easy"]);
        assert!(
            check(&TaskSpec::named("nosuch")).unwrap_err().to_string().contains("neither built in nor a paper's suite")
        );
        let shots = TaskSpec { num_fewshot: 5, ..TaskSpec::named("sotu_words") };
        assert!(check(&shots).unwrap_err().to_string().contains("zero-shot"));
    }

    /// Few-shot: k solved examples (their answers after them), blank lines, then the item,
    /// drawn as CPython's `random.Random(7).sample(range(5), 2)` draws them item after item
    /// (`r = random.Random(7); [r.sample(range(5), 2) for _ in range(4)]` gives
    /// [[2, 1], [3, 0], [0, 4], [2, 0]]); MMLU takes the first examples of the item's subject.
    #[test]
    fn fewshot_prefixes_solved_examples() {
        let items: Vec<Item> = (0..5)
            .map(|i| super::super::item::choice(&format!("Q{i}:"), &[format!("a{i}"), format!("b{i}")], 1, None))
            .collect();
        let sampler = || fewshot::Sampler::for_layout("arc_easy", 7);
        let shot = fewshot::with_fewshot(items[..4].to_vec(), &items, 2, sampler(), false).unwrap();
        let Item::Choice { requests, .. } = &shot[3] else { panic!() };
        assert_eq!(requests[0].context, "Q2: b2\n\nQ0: b0\n\nQ3:");
        assert_eq!(requests[1].continuation, " b3");
        let Item::Choice { requests, .. } = &shot[0] else { panic!() };
        assert_eq!(requests[0].context, "Q2: b2\n\nQ1: b1\n\nQ0:");
        assert_eq!(fewshot::with_fewshot(items[..4].to_vec(), &items, 2, sampler(), false).unwrap(), shot);

        let q = |s: &str, subject: &str| {
            let ctx = format!("About {subject}.\n\n{s}\nAnswer:");
            super::super::item::choice(&ctx, &["A".into(), "B".into()], 0, Some(subject.into()))
        };
        let dev = vec![q("d1", "x"), q("d2", "y"), q("d3", "x")];
        let shot =
            fewshot::with_fewshot(vec![q("t", "x")], &dev, 2, fewshot::Sampler::for_layout("mmlu", 7), true).unwrap();
        let Item::Choice { requests, .. } = &shot[0] else { panic!() };
        assert_eq!(requests[1].context, "About x.\n\nd1\nAnswer: A\n\nd3\nAnswer: A\n\nt\nAnswer:");
        let err = fewshot::with_fewshot(vec![q("t", "y")], &dev, 2, fewshot::Sampler::for_layout("mmlu", 7), true);
        assert!(err.unwrap_err().to_string().contains("the examples' file has 1"));
    }
}
