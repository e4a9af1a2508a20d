//! Sequence-to-sequence pairs (`source → target`) for text normalisation (the Normalization chapter's build):
//! reading them from the formats users have, and scoring predictions against them.
//!
//! - [`metrics`]: exact match and token-level F1, after a documented light normalisation
//! - [`english`]: the built-in seeded English generator (`textnorm-en`)
//! - [`wetext`]: real held-out pairs from the PyPI package `wetextprocessing==1.2.0`
//! - [`load`]: a config's pairs: training, validation and the test sets scored after training
//! - [`render`]: pairs as `source <sep> target <end>` tokens, and padded, prompt-masked batches
//!
//! Formats ([`PairFormat`]), UTF-8 in any language:
//! - `tsv`: `source<TAB>target` per line;
//! - `arrow`: `source => target` per line (the `wetextprocessing` test files' form);
//! - `jsonl`: one object per line with the source and target under configurable field names
//!   (and optionally a category field).
//!
//! Blank lines are skipped; any other line that does not parse is an error naming the file and
//! the line.

pub mod english;
pub mod load;
pub mod metrics;
pub mod render;
pub mod wetext;

use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};

/// One example: written form, spoken form, and the category it exercises when known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    pub source: String,
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// How a pair file is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "format")]
pub enum PairFormat {
    Tsv,
    Arrow,
    Jsonl {
        source_field: String,
        target_field: String,
        #[serde(default)]
        category_field: Option<String>,
    },
}

impl PairFormat {
    /// The format a file name suggests: `.tsv`, `.jsonl` (fields `source`, `target`,
    /// `category`), anything else `=>` lines.
    pub fn from_name(name: &str) -> Self {
        if name.ends_with(".tsv") {
            PairFormat::Tsv
        } else if name.ends_with(".jsonl") {
            PairFormat::Jsonl {
                source_field: "source".into(),
                target_field: "target".into(),
                category_field: Some("category".into()),
            }
        } else {
            PairFormat::Arrow
        }
    }
}

/// Parses `text` (named `name` in errors); `category` labels every pair that has none.
pub fn parse(text: &str, format: &PairFormat, name: &str, category: Option<&str>) -> anyhow::Result<Vec<Pair>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let mut pair = parse_line(line, format).with_context(|| format!("{name}:{}", i + 1))?;
        if pair.category.is_none() {
            pair.category = category.map(String::from);
        }
        out.push(pair);
    }
    Ok(out)
}

fn parse_line(line: &str, format: &PairFormat) -> anyhow::Result<Pair> {
    let (source, target, category) = match format {
        PairFormat::Tsv => {
            let fields: Vec<&str> = line.split('\t').collect();
            ensure!(
                fields.len() == 2,
                "expected `source<TAB>target` (two columns) but found {} column{}",
                fields.len(),
                if fields.len() == 1 { "" } else { "s" }
            );
            (fields[0].to_string(), fields[1].to_string(), None)
        }
        PairFormat::Arrow => {
            let (s, t) = line.split_once("=>").context("expected `source => target`")?;
            (s.trim().to_string(), t.trim().to_string(), None)
        }
        PairFormat::Jsonl { source_field, target_field, category_field } => {
            let v: serde_json::Value = serde_json::from_str(line).context("not a JSON object")?;
            let field = |f: &str| -> anyhow::Result<String> {
                v.get(f).and_then(|x| x.as_str()).map(String::from).with_context(|| format!("no string field `{f}`"))
            };
            let category = category_field.as_deref().and_then(|f| v.get(f)?.as_str().map(String::from));
            (field(source_field)?, field(target_field)?, category)
        }
    };
    if source.trim().is_empty() || target.trim().is_empty() {
        bail!("empty source or target");
    }
    Ok(Pair { source, target, category })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_parses_and_errors_name_the_line() {
        let tsv = parse("1 kg\tone kilogram\n\n€5\tfive euros\n", &PairFormat::Tsv, "a.tsv", Some("x")).unwrap();
        assert_eq!(tsv.len(), 2);
        assert_eq!(tsv[1], Pair { source: "€5".into(), target: "five euros".into(), category: Some("x".into()) });
        let arrow = parse("  1/2 =>  one half \r\n", &PairFormat::Arrow, "f.txt", None).unwrap();
        assert_eq!((arrow[0].source.as_str(), arrow[0].target.as_str()), ("1/2", "one half"));
        let ru = PairFormat::Jsonl { source_field: "in".into(), target_field: "out".into(), category_field: None };
        let j = parse("{\"in\": \"5 кг\", \"out\": \"пять килограммов\"}", &ru, "ru.jsonl", None).unwrap();
        assert_eq!(j[0].target, "пять килограммов");
        let e = format!("{:#}", parse("ok => fine\nno arrow here\n", &PairFormat::Arrow, "f.txt", None).unwrap_err());
        assert!(e.contains("f.txt:2") && e.contains("source => target"), "{e}");
        let e = format!("{:#}", parse("{\"in\": 1}", &ru, "ru.jsonl", None).unwrap_err());
        assert!(e.contains("ru.jsonl:1") && e.contains("`in`"), "{e}");
        assert!(parse("x =>  \n", &PairFormat::Arrow, "f", None).is_err(), "an empty side is refused");
        let e = format!("{:#}", parse("a\tb\n1\t2\t3\n", &PairFormat::Tsv, "t.tsv", None).unwrap_err());
        assert!(e.contains("t.tsv:2") && e.contains("3 columns"), "{e}");
        for empty in ["\tb", "a\t", " \tb", "a\t  "] {
            let e = format!("{:#}", parse(empty, &PairFormat::Tsv, "t.tsv", None).unwrap_err());
            assert!(e.contains("t.tsv:1") && e.contains("empty"), "{empty:?}: {e}");
        }
    }
}
