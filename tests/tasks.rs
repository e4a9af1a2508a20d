//! Every published task layout read as lm-evaluation-harness reads it: normlab's requests for
//! each file of `tests/fixtures/tasks` (written with pyarrow in the hub's schemas) equal, to the
//! byte, the requests lm-eval 0.4.13 built from the same file (`requests.json`, from
//! `tools/make_task_fixtures.py`), zero-shot and with 2 examples drawn with seed 1234.

use normlab::tasks::spec::{TaskSpec, load};
use normlab::tasks::{Item, Request};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tasks")
}

/// lm-eval's requests per task name: per document, its (context, continuation) pairs and the
/// index of the right choice (`gold`, null for a cloze).
fn expected() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(fixtures().join("requests.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["tasks"].as_object().unwrap().clone()
}

fn pairs(doc: &Value) -> Vec<Request> {
    doc["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Request { context: r[0].as_str().unwrap().into(), continuation: r[1].as_str().unwrap().into() })
        .collect()
}

/// normlab's items of `layout` with `shots` examples (MMLU's from its dev file).
fn normlab_items(layout: &str, shots: usize) -> Vec<Item> {
    let file = match layout {
        "lambada_openai" => "lambada_openai.jsonl".to_string(),
        _ => format!("{layout}.parquet"),
    };
    let spec = TaskSpec {
        path: Some(fixtures().join(file)),
        num_fewshot: shots,
        fewshot_path: (layout == "mmlu").then(|| fixtures().join("mmlu_dev.parquet")),
        ..TaskSpec::named(layout)
    };
    load(&spec, Path::new("/nonexistent"), 1024).unwrap_or_else(|e| panic!("{layout}: {e:#}")).items
}

/// `nl_LAYOUT_Kshot` (MMLU: `nl_mmlu_SUBJECT_Kshot`) → (layout, subject, K).
fn parse(name: &str) -> (String, Option<String>, usize) {
    let body = name.strip_prefix("nl_").unwrap();
    let (body, shots) = body.rsplit_once('_').unwrap();
    let shots = shots.strip_suffix("shot").unwrap().parse().unwrap();
    match body.strip_prefix("mmlu_") {
        Some(subject) => ("mmlu".into(), Some(subject.into()), shots),
        None => (body.into(), None, shots),
    }
}

/// Each document's requests and right answer equal lm-eval's.
#[test]
fn every_layout_gives_lm_evals_requests_and_answers() {
    let expected = expected();
    assert_eq!(expected.len(), 21, "9 layouts zero-shot (MMLU's 2 subjects apart), 8 with examples");
    for (name, docs) in &expected {
        let (layout, subject, shots) = parse(name);
        let items: Vec<Item> = normlab_items(&layout, shots)
            .into_iter()
            .filter(|i| match (&subject, i) {
                (Some(s), Item::Choice { category, .. }) => category.as_deref() == Some(s.as_str()),
                _ => true,
            })
            .collect();
        let docs = docs.as_array().unwrap();
        assert_eq!(items.len(), docs.len(), "{name}: items");
        for (k, (item, doc)) in items.iter().zip(docs).enumerate() {
            assert_eq!(item.requests(), pairs(doc), "{name}: document {k}");
            let answer = match item {
                Item::Choice { answer, .. } => Some(*answer as u64),
                _ => None,
            };
            assert_eq!(answer, doc["gold"].as_u64(), "{name}: document {k}'s answer");
        }
    }
}

/// `tools/get_tasks.py` fetches what the papers' suites read: every (task, split, examples'
/// split, shots) of `tasks::papers` is in its table, and every task's hub dataset is the one
/// `layouts::hub` names.
#[test]
fn the_fetch_script_knows_every_suite() {
    let script = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/get_tasks.py")).unwrap();
    for suite in normlab::tasks::papers::SUITES {
        assert!(script.contains(&format!("\"{}\": [", suite.name)), "{}", suite.name);
        for t in suite.tasks {
            let row = format!("(\"{}\", \"{}\", \"{}\", {})", t.task, t.split, t.fewshot_split, suite.shots);
            assert!(script.contains(&row), "{}: {row}", suite.name);
            let (id, config) = normlab::tasks::layouts::hub(t.task).unwrap();
            let config = config.map_or("None".to_string(), |c| format!("\"{c}\""));
            let hub = format!("\"{}\": (\"{id}\", {config})", t.task);
            assert!(script.contains(&hub), "{hub}");
        }
    }
}
