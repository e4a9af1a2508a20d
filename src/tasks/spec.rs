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
use super::item::{Item, Request, Task};
use super::layouts;
use crate::rng::SplitMix64;
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[eval]` of a run config: downstream tasks evaluated at the end of training, and every
/// `every` steps when it is not 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalSection {
    pub tasks: Vec<TaskSpec>,
    pub every: usize,
}

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
    /// Examples before each item, chosen with `seed` from the file's other items.
    pub num_fewshot: usize,
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
            SpecForm::Table { name, path, layout, limit, num_fewshot, seed } => {
                TaskSpec { name, path, layout, limit, num_fewshot, seed }
            }
        }
    }
}

impl From<TaskSpec> for SpecForm {
    fn from(s: TaskSpec) -> Self {
        let plain = s.path.is_none() && s.layout.is_none() && s.limit.is_none() && s.num_fewshot == 0;
        if plain && s.seed == DEFAULT_SEED {
            return SpecForm::Name(s.name);
        }
        SpecForm::Table {
            name: s.name,
            path: s.path,
            layout: s.layout,
            limit: s.limit,
            num_fewshot: s.num_fewshot,
            seed: s.seed,
        }
    }
}

impl TaskSpec {
    /// A built-in task by name.
    pub fn named(name: &str) -> Self {
        TaskSpec { name: name.into(), path: None, layout: None, limit: None, num_fewshot: 0, seed: DEFAULT_SEED }
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

/// The specs with `builtin` expanded into the suite's tasks.
pub fn expand(specs: &[TaskSpec]) -> Vec<TaskSpec> {
    specs
        .iter()
        .flat_map(|s| match (s.name.as_str(), &s.path) {
            ("builtin", None) => builtin::SUITE.iter().map(|n| TaskSpec { name: n.to_string(), ..s.clone() }).collect(),
            _ => vec![s.clone()],
        })
        .collect()
}

/// Refuses a spec that cannot load, before anything is trained: an unknown name or layout, a
/// missing file, few-shot where the layout has no single context.
pub fn check(s: &TaskSpec) -> anyhow::Result<()> {
    match &s.path {
        None => ensure!(
            builtin::SUITE.contains(&s.name.as_str()) || s.name == "builtin",
            "eval task `{}` has no path and is not built in (the built-in ones: builtin, {}); give it a path = \"FILE\"",
            s.name,
            builtin::SUITE.join(", ")
        ),
        Some(p) => {
            let layout = s.layout.as_deref().unwrap_or(&s.name);
            ensure!(
                layouts::scoring(layout).is_some(),
                "eval task `{}`: unknown layout `{layout}`; set layout to one of arc_easy, arc_challenge, hellaswag, piqa, \
                 social_iqa, winogrande, openbookqa, boolq, lambada_openai, mmlu, multiple_choice, text",
                s.name
            );
            ensure!(p.is_file(), "eval task `{}`: {} is not a file", s.name, p.display());
            ensure!(
                s.num_fewshot == 0 || !matches!(layout, "winogrande" | "lambada_openai" | "text"),
                "eval task `{}`: few-shot is not supported for the {layout} layout",
                s.name
            );
        }
    }
    Ok(())
}

/// Loads `s` (a built-in task is made from the built-in corpus in `cache`).
pub fn load(s: &TaskSpec, cache: &Path) -> anyhow::Result<Task> {
    check(s)?;
    let Some(path) = &s.path else {
        return builtin::task(&s.name, s.limit.unwrap_or(BUILTIN_ITEMS), s.seed, cache);
    };
    let layout = s.layout.as_deref().unwrap_or(&s.name);
    let records = super::files::records(path, s.limit)?;
    ensure!(!records.is_empty(), "eval task `{}`: {} holds no records", s.name, path.display());
    let items: Vec<Item> = records
        .iter()
        .enumerate()
        .map(|(i, r)| layouts::item(layout, r).with_context(|| format!("{} record {}", path.display(), i + 1)))
        .collect::<anyhow::Result<_>>()?;
    let items = if s.num_fewshot > 0 { with_fewshot(&items, s.num_fewshot, s.seed, layout == "mmlu")? } else { items };
    let scoring = layouts::scoring(layout).expect("checked");
    Ok(Task { name: s.name.clone(), scoring, items })
}

/// Each item's context preceded by `k` solved examples from the other items (chosen with
/// `seed` and the item's index), lm-eval's format: `example + " " + answer`, joined and ended
/// by blank lines; a task description (MMLU's first paragraph) stays once, at the start.
fn with_fewshot(items: &[Item], k: usize, seed: u64, described: bool) -> anyhow::Result<Vec<Item>> {
    ensure!(items.len() > k, "{k} examples need more than {k} items in the file");
    let solved = |it: &Item| -> Option<(String, String)> {
        let Item::Choice { requests, answer, .. } = it else { return None };
        let r = &requests[*answer];
        let ctx = if described {
            r.context.split_once("\n\n").map_or(r.context.clone(), |p| p.1.to_string())
        } else {
            r.context.clone()
        };
        Some((ctx, r.continuation.clone()))
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let Item::Choice { requests, lengths, answer, category } = it else {
            bail!("few-shot needs multiple-choice items")
        };
        let mut rng = SplitMix64::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut picked = Vec::new();
        while picked.len() < k {
            let j = (rng.uniform() * items.len() as f64) as usize % items.len();
            if j != i && !picked.contains(&j) {
                picked.push(j);
            }
        }
        let shots: Vec<String> =
            picked.iter().filter_map(|&j| solved(&items[j])).map(|(c, a)| format!("{c}{a}")).collect();
        let requests = requests
            .iter()
            .map(|r| {
                let (head, body) = match (described, r.context.split_once("\n\n")) {
                    (true, Some((d, b))) => (format!("{d}\n\n"), b.to_string()),
                    _ => (String::new(), r.context.clone()),
                };
                Request {
                    context: format!("{head}{}\n\n{body}", shots.join("\n\n")),
                    continuation: r.continuation.clone(),
                }
            })
            .collect();
        out.push(Item::Choice { requests, lengths: lengths.clone(), answer: *answer, category: category.clone() });
    }
    Ok(out)
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
        let names: Vec<String> = expand(&c.tasks).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["sotu_words", "sotu_continuation", "agreement_pairs", "arc_easy"]);
        assert!(check(&TaskSpec::named("nosuch")).unwrap_err().to_string().contains("not built in"));
    }

    /// Few-shot: k solved examples (their answers after them), blank lines, then the item;
    /// the same seed draws the same examples, never the item itself.
    #[test]
    fn fewshot_prefixes_solved_examples() {
        let items: Vec<Item> = (0..5)
            .map(|i| super::super::item::choice(&format!("Q{i}:"), &[format!("a{i}"), format!("b{i}")], 1, None))
            .collect();
        let shot = with_fewshot(&items, 2, 7, false).unwrap();
        let Item::Choice { requests, .. } = &shot[3] else { panic!() };
        let ctx = &requests[0].context;
        assert!(ctx.ends_with("\n\nQ3:") && !ctx[..ctx.len() - 3].contains("Q3:"), "{ctx}");
        assert_eq!(ctx.matches(" b").count(), 2, "two examples with their answers: {ctx}");
        assert_eq!(with_fewshot(&items, 2, 7, false).unwrap(), shot);
    }
}
