//! Datasets whose tokens live in shards: a directory `normlab data prepare` wrote, token
//! shards of another tool, or a streamed corpus prepared into the cache on first use (keyed
//! by its files' paths, sizes and modification times and the settings, so a changed file is
//! prepared again).

use super::config::DataConfig;
use super::dataset::{DataInfo, Dataset};
use super::prepare::{self, Job, Manifest, manifest::Split};
use super::read::CorpusFile;
use super::shards::{self, TokenFile};
use super::tokenizer::Tokenizer;
use anyhow::{Context, bail, ensure};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The tokenizer a prepared directory was made with (`given`, a resumed run's, must be it).
pub fn tokenizer_of(dir: &Path, m: &Manifest, given: Option<Tokenizer>) -> anyhow::Result<Tokenizer> {
    let fp = &m.settings.tokenizer;
    let tok = match given {
        Some(t) => t,
        None if dir.join("tokenizer.json").is_file() => Tokenizer::load_bpe(&dir.join("tokenizer.json"))?,
        None if fp == "byte" => Tokenizer::Byte,
        None if fp.starts_with("gpt2") => Tokenizer::fixed(super::TokenizerKind::Gpt2).expect("fixed"),
        None if fp == "cl100k_base" => Tokenizer::fixed(super::TokenizerKind::Cl100k).expect("fixed"),
        None => bail!("{}: tokenizer {fp} is not built in and tokenizer.json is missing", dir.display()),
    };
    ensure!(
        &tok.fingerprint()? == fp,
        "{} was tokenized with {fp}, but this run uses {}; prepare the corpus with the run's tokenizer",
        dir.display(),
        tok.fingerprint()?
    );
    Ok(tok)
}

/// A prepared directory as a dataset.
pub fn open_prepared(dir: &Path, given: Option<Tokenizer>) -> anyhow::Result<Dataset> {
    let m = Manifest::load(dir)?;
    let tokenizer = tokenizer_of(dir, &m, given)?;
    let (train, val) = prepare::open(dir, &m)?;
    let info = info_of(dir, &m, &train, &val);
    Ok(Dataset { tokenizer, train, val, info, examples: None, mixture: None })
}

fn info_of(dir: &Path, m: &Manifest, train: &TokenFile, val: &TokenFile) -> DataInfo {
    let (td, tb, _) = m.totals(Split::Train);
    let (vd, vb, _) = m.totals(Split::Val);
    DataInfo {
        corpus: m.corpus.clone(),
        corpus_sha256: m.corpus_sha256(),
        split_rule: format!(
            "every {}th non-empty document (in file and record order) is validation",
            m.settings.val_every
        ),
        train_documents: td as usize,
        val_documents: vd as usize,
        train_chars: tb as usize,
        val_chars: vb as usize,
        tokenizer: m.settings.tokenizer.clone(),
        vocab_size: m.settings.vocab_size,
        train_tokens: train.len(),
        val_tokens: val.len(),
        train_token_file: dir.to_path_buf(),
        val_token_file: dir.to_path_buf(),
        pairs: None,
        chat: None,
    }
}

/// Token shards of another tool: the tokenizer is the run's (`data.tokenizer`, built in), and
/// every token must be in its vocabulary.
pub fn open_shards(
    train: &[PathBuf],
    val: &[PathBuf],
    cfg: &DataConfig,
    given: Option<Tokenizer>,
) -> anyhow::Result<Dataset> {
    let Some(tokenizer) = given.or_else(|| Tokenizer::fixed(cfg.tokenizer)) else {
        bail!("token shards carry no tokenizer: set data.tokenizer to the one they were made with (gpt2, byte)")
    };
    let width = cfg.token_dtype.width(tokenizer.vocab_size());
    let open = |paths: &[PathBuf]| -> anyhow::Result<TokenFile> {
        let f = TokenFile::concat(paths.iter().map(|p| shards::open(p, width)).collect::<anyhow::Result<_>>()?);
        let max = f.max_token();
        ensure!(
            max.is_none_or(|m| (m as usize) < tokenizer.vocab_size()),
            "the token shards hold token {} but {} has {} entries; set data.tokenizer to the tokenizer they were \
             made with",
            max.unwrap_or_default(),
            tokenizer.kind().name(),
            tokenizer.vocab_size()
        );
        Ok(f)
    };
    let (train_f, val_f) = (open(train)?, open(val)?);
    let info = DataInfo {
        corpus: cfg.corpus.clone(),
        corpus_sha256: identity_hash(train.iter().chain(val))?,
        split_rule: "the validation shards (data.val_corpus, or the files with `val` in their names)".into(),
        train_documents: 0,
        val_documents: 0,
        train_chars: 0,
        val_chars: 0,
        tokenizer: tokenizer.fingerprint()?,
        vocab_size: tokenizer.vocab_size(),
        train_tokens: train_f.len(),
        val_tokens: val_f.len(),
        train_token_file: train.first().cloned().unwrap_or_default(),
        val_token_file: val.first().cloned().unwrap_or_default(),
        pairs: None,
        chat: None,
    };
    Ok(Dataset { tokenizer, train: train_f, val: val_f, info, examples: None, mixture: None })
}

/// A hash of files' paths, sizes and modification times (what identifies them without reading
/// them).
pub fn identity_hash<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        parts.push(format!("{}\u{0}{}\u{0}{}", p.display(), meta.len(), mtime.map_or(0, |d| d.as_nanos())));
    }
    Ok(super::cache::sha256_parts(parts.iter().map(|s| s.as_bytes())))
}

/// A streamed corpus: prepared into `CACHE/prepared/KEY` on first use (waiting for another
/// process preparing the same), then opened.
pub fn streamed(
    corpus: &str,
    files: Vec<CorpusFile>,
    text_field: &str,
    cfg: &DataConfig,
    given: Option<Tokenizer>,
    log: &dyn Fn(&str),
) -> anyhow::Result<Dataset> {
    let tokenizer = match given.or_else(|| Tokenizer::fixed(cfg.tokenizer)) {
        Some(t) => t,
        None => sampled_bpe(&files, text_field, cfg, log)?,
    };
    let job = Job {
        corpus,
        files,
        text_field,
        val_every: cfg.val_every,
        shard_tokens: cfg.shard_tokens,
        format: shards::ShardFormat::Normlab,
        tokenizer: &tokenizer,
    };
    let key = super::cache::sha256_hex(serde_json::to_string(&job.settings()?)?.as_bytes());
    let dir = cfg.cache_dir().join("prepared").join(&key[..20]);
    prepare_locked(&dir, &job, log)?;
    open_prepared(&dir, Some(tokenizer))
}

/// Prepares under the directory's lock; a preparation another process holds is waited for.
fn prepare_locked(dir: &Path, job: &Job<'_>, log: &dyn Fn(&str)) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _lock = loop {
        match crate::io::lock::try_lock(dir)? {
            Ok(l) => break l,
            Err(holder) => {
                log(&format!("waiting for {holder}, which is preparing {}", dir.display()));
                std::thread::sleep(std::time::Duration::from_secs(2));
            }
        }
    };
    if Manifest::load(dir).is_ok_and(|m| m.complete) {
        return Ok(());
    }
    log(&format!(
        "preparing {} ({}) with {} into {} (once; later runs read the shards)",
        job.corpus,
        super::source::describe(&job.files),
        job.tokenizer.fingerprint()?,
        dir.display()
    ));
    let mut meter = prepare::Meter::new();
    prepare::run(dir, job, &mut |s| {
        if let Some(line) = meter.add(s, 10.0) {
            log(&line);
        }
    })?;
    log(&format!("prepared: {}", meter.line()));
    Ok(())
}

/// A BPE trained on the first training documents of a streamed corpus, up to
/// `data.bpe_sample_bytes` (cached by the files' identity and the sample size).
pub fn sampled_bpe(
    files: &[CorpusFile],
    text_field: &str,
    cfg: &DataConfig,
    log: &dyn Fn(&str),
) -> anyhow::Result<Tokenizer> {
    let identity = identity_hash(files.iter().map(|f| &f.path))?;
    let (mut docs, mut bytes, mut kept) = (Vec::new(), 0usize, 0usize);
    super::read::for_each(files, text_field, &mut |text| {
        if text.trim().is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        kept += 1;
        if !kept.is_multiple_of(cfg.val_every) {
            bytes += text.len();
            docs.push(super::Document { name: String::new(), text: text.to_string() });
        }
        Ok(if bytes >= cfg.bpe_sample_bytes { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    log(&format!(
        "training a BPE of up to {} entries on the first {:.1} MB of training text (cached for later runs)",
        cfg.bpe_vocab_size,
        bytes as f64 / 1e6
    ));
    let key = super::cache::sha256_parts([identity.as_bytes(), &(cfg.bpe_sample_bytes as u64).to_le_bytes()]);
    super::tokenizer::bpe_for(&docs, cfg.bpe_vocab_size, &key, &cfg.cache_dir())
}
