//! Loading a run's data: what `data.corpus` names decides the path (the built-in corpus and
//! small corpora read whole, prepared directories, token shards, streamed corpora prepared into
//! the cache), and a mixture loads each of its sources that way.

use super::config::{DataConfig, SourceSpec, Task};
use super::dataset::{DOC_SEPARATOR, DataInfo, Dataset};
use super::mixture::{Mixture, Part};
use super::shards::TokenFile;
use super::source::{Source, classify};
use super::tokenizer::Tokenizer;
use anyhow::bail;

impl Dataset {
    /// Loads and splits the corpus, picks the tokenizer (`given`, e.g. a run's saved BPE, else
    /// the configured one) and opens the cached token files, tokenizing on first use.
    pub fn prepare(cfg: &DataConfig, given: Option<Tokenizer>, log: &dyn Fn(&str)) -> anyhow::Result<Self> {
        cfg.validate()?;
        if !cfg.sources.is_empty() {
            return mixture(cfg, given, log);
        }
        if cfg.task == Task::Lm {
            match classify(&cfg.corpus, cfg)? {
                Source::Prepared(dir) => return super::prepared::open_prepared(&dir, given),
                Source::Shards { train, val } => return super::prepared::open_shards(&train, &val, cfg, given),
                Source::Streamed(files) => {
                    return super::prepared::streamed(&cfg.corpus, files, &cfg.text_field, cfg, given, log);
                }
                Source::Sotu | Source::InMemory => {}
            }
        }
        Self::in_memory(cfg, given, log)
    }
}

/// Every source prepared with one tokenizer (`given`, else `data.tokenizer`: built in).
fn mixture(cfg: &DataConfig, given: Option<Tokenizer>, log: &dyn Fn(&str)) -> anyhow::Result<Dataset> {
    let tokenizer = match given.or_else(|| Tokenizer::fixed(cfg.tokenizer)) {
        Some(t) => t,
        None => bail!("a mixture needs one tokenizer for every source: set data.tokenizer to gpt2 or byte"),
    };
    let total: f64 = cfg.sources.iter().map(|s| s.weight).sum();
    let (mut trains, mut vals, mut parts, mut infos) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut t0, mut v0) = (0, 0);
    for spec in &cfg.sources {
        let d = source(cfg, spec, clone(&tokenizer)?, log)?;
        let (tl, vl) = (d.train.len(), d.val.len());
        // The bytes the validation tokens decode to: the documents' text and a separator after
        // each.
        let bytes = d.info.val_chars + d.info.val_documents * DOC_SEPARATOR.len();
        let bpt = (d.info.val_chars > 0).then(|| bytes as f64 / vl.max(1) as f64);
        parts.push(Part {
            name: spec.name(),
            weight: spec.weight / total,
            train: t0..t0 + tl,
            val: v0..v0 + vl,
            val_bytes_per_token: bpt,
        });
        (t0, v0) = (t0 + tl, v0 + vl);
        trains.push(d.train);
        vals.push(d.val);
        infos.push(d.info);
    }
    let (train, val) = (TokenFile::concat(trains), TokenFile::concat(vals));
    let info = info(&infos, &parts, &tokenizer, &train, &val)?;
    Ok(Dataset { tokenizer, train, val, info, examples: None, mixture: Some(Mixture { parts }) })
}

fn clone(t: &Tokenizer) -> anyhow::Result<Tokenizer> {
    match t.to_json()? {
        Some(json) => Tokenizer::bpe_from_json(json.as_bytes(), "the run's tokenizer"),
        None => Ok(Tokenizer::fixed(t.kind()).expect("byte and gpt2 are built in")),
    }
}

/// One source as a dataset of its own.
fn source(cfg: &DataConfig, spec: &SourceSpec, tok: Tokenizer, log: &dyn Fn(&str)) -> anyhow::Result<Dataset> {
    let mut one = cfg.clone();
    one.sources.clear();
    one.corpus = spec.path.clone();
    if let Some(f) = &spec.text_field {
        one.text_field = f.clone();
    }
    Dataset::prepare(&one, Some(tok), log).map_err(|e| e.context(format!("data.sources `{}`", spec.name())))
}

fn info(
    infos: &[DataInfo],
    parts: &[Part],
    tok: &Tokenizer,
    train: &TokenFile,
    val: &TokenFile,
) -> anyhow::Result<DataInfo> {
    let sum = |f: fn(&DataInfo) -> usize| infos.iter().map(f).sum();
    let names: Vec<String> = parts.iter().map(|p| format!("{} ({:.3})", p.name, p.weight)).collect();
    let hashes: Vec<&[u8]> = infos.iter().map(|i| i.corpus_sha256.as_bytes()).collect();
    Ok(DataInfo {
        corpus: format!("mixture: {}", names.join(", ")),
        corpus_sha256: super::cache::sha256_parts(hashes),
        split_rule: "each source split on its own; training windows pick a source by weight".into(),
        train_documents: sum(|i| i.train_documents),
        val_documents: sum(|i| i.val_documents),
        train_chars: sum(|i| i.train_chars),
        val_chars: sum(|i| i.val_chars),
        tokenizer: tok.fingerprint()?,
        vocab_size: tok.vocab_size(),
        train_tokens: train.len(),
        val_tokens: val.len(),
        train_token_file: infos[0].train_token_file.clone(),
        val_token_file: infos[0].val_token_file.clone(),
        pairs: None,
        chat: None,
    })
}
