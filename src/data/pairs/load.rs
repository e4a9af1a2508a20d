//! A config's pairs: training pairs, validation pairs (the validation loss; also the first
//! test set) and the test sets scored with exact match and F1 after training.
//!
//! - `textnorm-en`: `pairs_train` generated training pairs; `pairs_test` generated test pairs
//!   from another stream, none with a training source (test set `generated`);
//! - a pair file: every `val_every`-th pair is held out (test set `held-out`);
//! - `heldout`: real pairs scored too (test set `wetext`, or the file's name).

use super::render::{self, check_markers};
use super::{Pair, PairFormat, english, parse, wetext};
use crate::data::config::{DataConfig, PairFileFormat};
use crate::data::document::{Corpus, Document};
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One named set of pairs to score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestSet {
    pub name: String,
    pub pairs: Vec<Pair>,
}

/// Every pair a run uses.
#[derive(Clone, Debug)]
pub struct PairCorpus {
    pub name: String,
    pub train: Vec<Pair>,
    pub val: Vec<Pair>,
    pub tests: Vec<TestSet>,
    pub split_rule: String,
}

impl PairCorpus {
    /// The pairs as documents (rendered `source <sep> target <end>`): what the BPE trainer,
    /// the corpus hash and the token files see.
    pub fn documents(&self) -> Corpus {
        let docs = |ps: &[Pair]| -> Vec<Document> {
            ps.iter().enumerate().map(|(i, p)| Document { name: format!("pair {i}"), text: render::text(p) }).collect()
        };
        Corpus {
            name: self.name.clone(),
            train: docs(&self.train),
            val: docs(&self.val),
            split_rule: self.split_rule.clone(),
        }
    }
}

/// Loads the pairs `cfg` names.
pub fn load(cfg: &DataConfig) -> anyhow::Result<PairCorpus> {
    let (name, train, val, val_name, split_rule) = if cfg.corpus == english::NAME {
        let (train, test) = english::splits(cfg.pairs_seed, cfg.pairs_train, cfg.pairs_test);
        let rule = format!(
            "generated: {} training pairs (seed {}), {} test pairs from a second stream with no training source",
            train.len(),
            cfg.pairs_seed,
            test.len()
        );
        (format!("{}-seed{}", english::NAME, cfg.pairs_seed), train, test, "generated", rule)
    } else {
        let path = Path::new(&cfg.corpus);
        let all = read_file(path, cfg, None)?;
        ensure!(all.len() >= 2, "{} holds {} pairs; give at least 2 (one is held out)", path.display(), all.len());
        let k = cfg.val_every;
        let (mut train, mut val) = (Vec::new(), Vec::new());
        for (i, p) in all.into_iter().enumerate() {
            if (i + 1) % k == 0 { val.push(p) } else { train.push(p) }
        }
        if val.is_empty() {
            val.push(train.pop().expect("at least 2 pairs"));
        }
        let name = std::fs::canonicalize(path).unwrap_or(path.to_path_buf()).display().to_string();
        (name, train, val, "held-out", format!("every {k}th pair (in file order) is held out"))
    };
    let mut tests = vec![TestSet { name: val_name.into(), pairs: val.clone() }];
    match cfg.heldout() {
        "none" => {}
        "wetext" => tests.push(TestSet { name: "wetext".into(), pairs: wetext::load(&cfg.cache_dir())? }),
        file => {
            let path = Path::new(file);
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| file.into());
            tests.push(TestSet { name: stem, pairs: read_file(path, cfg, None)? });
        }
    }
    Ok(PairCorpus { name, train, val, tests, split_rule })
}

/// Reads a pair file in the configured format.
pub fn read_file(path: &Path, cfg: &DataConfig, category: Option<&str>) -> anyhow::Result<Vec<Pair>> {
    ensure!(path.is_file(), "the pair file {} does not exist; give a TSV, `=>` or JSONL file", path.display());
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {} as UTF-8 text", path.display()))?;
    let name = path.display().to_string();
    let format = match cfg.pair_format {
        PairFileFormat::Auto => match PairFormat::from_name(&name) {
            PairFormat::Jsonl { .. } => jsonl(cfg),
            f => f,
        },
        PairFileFormat::Tsv => PairFormat::Tsv,
        PairFileFormat::Arrow => PairFormat::Arrow,
        PairFileFormat::Jsonl => jsonl(cfg),
    };
    let pairs = parse(&text, &format, &name, category)?;
    for (i, p) in pairs.iter().enumerate() {
        check_markers(p).with_context(|| format!("{name}: pair {}", i + 1))?;
    }
    ensure!(!pairs.is_empty(), "{name} holds no pairs");
    Ok(pairs)
}

fn jsonl(cfg: &DataConfig) -> PairFormat {
    PairFormat::Jsonl {
        source_field: cfg.source_field.clone(),
        target_field: cfg.target_field.clone(),
        category_field: (!cfg.category_field.is_empty()).then(|| cfg.category_field.clone()),
    }
}
