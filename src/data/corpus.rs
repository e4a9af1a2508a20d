//! Documents and the train/validation split. Validation always holds out whole documents
//! (whole addresses for the built-in corpus), never random lines, so no sentence of a held-out
//! text is seen in training.

use super::config::{CorpusFormat, DataConfig};
use anyhow::{Context, bail, ensure};
use std::path::{Path, PathBuf};

use super::document::{Corpus, Document};

/// Loads the corpus `cfg.corpus` names and splits it.
pub fn load(cfg: &DataConfig) -> anyhow::Result<Corpus> {
    if cfg.corpus == "sotu" {
        let docs = super::sotu::load(&cfg.cache_dir())?;
        return Ok(super::sotu::split(docs));
    }
    let path = PathBuf::from(&cfg.corpus);
    ensure!(
        path.exists(),
        "data.corpus `{}` does not exist; give a text file, a directory of text files, a .jsonl file, or `sotu` for \
            the built-in corpus",
        path.display()
    );
    let docs = read_documents(&path, cfg)?;
    let name = std::fs::canonicalize(&path).unwrap_or(path).display().to_string();
    split_user(name, docs, cfg)
}

fn format_of(path: &Path, cfg: &DataConfig) -> CorpusFormat {
    match cfg.format {
        CorpusFormat::Auto if path.is_dir() => CorpusFormat::Dir,
        CorpusFormat::Auto if path.extension().is_some_and(|e| e == "jsonl") => CorpusFormat::Jsonl,
        CorpusFormat::Auto => CorpusFormat::Text,
        f => f,
    }
}

/// Reads the documents of a user corpus; empty documents are dropped.
pub fn read_documents(path: &Path, cfg: &DataConfig) -> anyhow::Result<Vec<Document>> {
    let docs = match format_of(path, cfg) {
        CorpusFormat::Dir => {
            ensure!(path.is_dir(), "data.format = \"dir\" but {} is not a directory", path.display());
            let mut files = Vec::new();
            super::read::files::walk(path, &mut files)?;
            files.sort();
            files
                .iter()
                .map(|f| Ok(Document { name: f.display().to_string(), text: read_text(f)? }))
                .collect::<anyhow::Result<Vec<_>>>()?
        }
        CorpusFormat::Jsonl => {
            check_regular(path)?;
            read_jsonl(path, &cfg.text_field)?
        }
        _ => {
            check_regular(path)?;
            vec![Document { name: path.display().to_string(), text: read_text(path)? }]
        }
    };
    let docs: Vec<Document> = docs.into_iter().filter(|d| !d.text.trim().is_empty()).collect();
    ensure!(!docs.is_empty(), "the corpus {} contains no text; point data.corpus at non-empty text", path.display());
    Ok(docs)
}

/// Refuses what is not a regular file, naming what it is: a directory (then `data.format =
/// "dir"` reads it), or a FIFO, device or socket (never read: it may not end).
fn check_regular(path: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_file() {
        return Ok(());
    }
    anyhow::ensure!(
        !meta.is_dir(),
        "{} is a directory; set data.format = \"dir\" to read the files in it",
        path.display()
    );
    anyhow::bail!(
        "{} is not a regular file (a FIFO, device or socket); point data.corpus at a text file, a directory of them \
         or a .jsonl file",
        path.display()
    )
}

fn read_text(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not UTF-8 text (invalid byte at offset {}); convert it to UTF-8",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

fn read_jsonl(path: &Path, field: &str) -> anyhow::Result<Vec<Document>> {
    parse_jsonl(&read_text(path)?, field, &path.display().to_string())
}

/// The documents of a JSONL text (`field` holds each one's text); `name` is for messages.
pub fn parse_jsonl(text: &str, field: &str, name: &str) -> anyhow::Result<Vec<Document>> {
    let mut docs = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: not valid JSON; each line must be one JSON object", name, i + 1))?;
        let Some(t) = v.get(field).and_then(|t| t.as_str()) else {
            bail!(
                "{} line {}: no string field `{field}`; set data.text_field to the field that holds the text",
                name,
                i + 1
            );
        };
        docs.push(Document { name: format!("{}:{}", name, i + 1), text: t.to_string() });
    }
    Ok(docs)
}

/// Several documents: every `val_every`-th is held out. One document: its tail.
fn split_user(name: String, mut docs: Vec<Document>, cfg: &DataConfig) -> anyhow::Result<Corpus> {
    if docs.len() == 1 {
        let d = docs.pop().unwrap();
        let (train, val) = split_tail(&d.text, cfg.val_fraction);
        ensure!(
            !train.trim().is_empty() && !val.trim().is_empty(),
            "the corpus {name} is too short to split into training and validation text; give more text"
        );
        let doc = |suffix: &str, text: &str| Document { name: format!("{}#{suffix}", d.name), text: text.to_string() };
        return Ok(Corpus {
            name,
            train: vec![doc("train", train)],
            val: vec![doc("val", val)],
            split_rule: format!(
                "single document: the last {:.0}% (cut at a line break) is validation",
                cfg.val_fraction * 100.0
            ),
        });
    }
    let k = cfg.val_every;
    let (mut train, mut val) = (Vec::new(), Vec::new());
    for (i, d) in docs.into_iter().enumerate() {
        if (i + 1) % k == 0 { val.push(d) } else { train.push(d) }
    }
    if val.is_empty() {
        // Fewer than `k` documents: hold out the last one rather than none.
        val.push(train.pop().unwrap());
    }
    Ok(Corpus { name, train, val, split_rule: format!("every {k}th document (in path/line order) is validation") })
}

/// Splits at the first line break after `1 − fraction` of the text (or at a char boundary if
/// there is no later line break).
pub fn split_tail(text: &str, fraction: f64) -> (&str, &str) {
    let mut cut = ((text.len() as f64) * (1.0 - fraction)) as usize;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let cut = text[cut..].find('\n').map(|i| cut + i + 1).filter(|&c| c < text.len()).unwrap_or(cut);
    text.split_at(cut)
}
