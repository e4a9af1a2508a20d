//! The documentation as a reader follows it: every relative link of the README and `docs/`
//! leads to a file that exists (and an anchor to a heading there), and the papers are cited by
//! name: no page speaks of the files the specification was handed over in.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page of `docs/`, `corpora/` and `tools/`.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    for dir in ["docs", "corpora", "tools"] {
        let mut md: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        md.sort();
        out.extend(md);
    }
    out
}

/// Every `](target)` of a markdown text that is not a web address.
fn relative_links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            let target = &rest[..rest.find(')')?];
            (!target.contains("://") && !target.starts_with("mailto:")).then(|| target.to_string())
        })
        .collect()
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation but `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> Vec<String> {
    std::fs::read_to_string(page)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix('#').map(|h| anchor(h.trim_start_matches('#'))))
        .collect()
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in relative_links(&text) {
            let (file, frag) = link.split_once('#').map_or((link.as_str(), None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", page.display()));
            } else if let Some(a) = frag.filter(|_| target.extension().is_some_and(|x| x == "md"))
                && !anchors(&target).iter().any(|h| h == a)
            {
                broken.push(format!("{}: {link} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Sources are cited by title; the specification's file numbers appear nowhere in what a user or
/// contributor reads.
#[test]
fn papers_are_cited_by_name() {
    let mut files = pages();
    for dir in ["src", "configs", "tools", "tests", "fuzz/src"] {
        collect(&root().join(dir), &mut files);
    }
    let pattern = ["seed 00", "seeds 00", "seed00", "Seed 00", "Seeds 00", "shared/seeds"];
    let found: Vec<String> = files
        .iter()
        // This test's own patterns.
        .filter(|f| !f.ends_with("tests/docs.rs"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            pattern.iter().find(|p| text.contains(*p)).map(|p| format!("{}: `{p}`", f.display()))
        })
        .collect();
    assert!(found.is_empty(), "file numbers instead of titles:\n{}", found.join("\n"));
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(anchor(" Three readings of Peri-LN"), "three-readings-of-peri-ln");
    assert_eq!(anchor("Mixed precision (bf16, f16)"), "mixed-precision-bf16-f16");
    assert_eq!(relative_links("[a](b.md#c) [d](https://e.f) [g](h)"), ["b.md#c", "h"]);
}

/// A test that cannot run on a machine fails saying what it needs, or is an ignored test
/// naming how to run it: none prints that it skipped and passes.
#[test]
fn no_test_passes_by_skipping() {
    let mut files = Vec::new();
    collect(&root().join("tests"), &mut files);
    let skipping: Vec<String> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs") && !f.ends_with("tests/docs.rs"))
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("eprintln!(\"skipped")))
        .map(|f| f.display().to_string())
        .collect();
    assert!(skipping.is_empty(), "tests that pass by skipping: {}", skipping.join(", "));
}

/// The README is the front door: at most 200 lines; the rest lives in `docs/`.
#[test]
fn the_readme_is_a_front_door() {
    let n = std::fs::read_to_string(root().join("README.md")).unwrap().lines().count();
    assert!(n <= 200, "README.md has {n} lines; move detail into docs/");
}
