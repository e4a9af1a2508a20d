//! A preparation run: its settings checked against what the directory holds, the pipeline's
//! documents filled into shard pairs, the manifest saved after each; and opening a complete
//! preparation's token streams.

use super::chunk;
use super::manifest::{self, InputFile, Manifest, Settings, Split};
use super::meter::Step;
use super::pipeline;
use super::replaced;
use crate::data::Tokenizer;
use crate::data::read::CorpusFile;
use crate::data::shards::{self, ShardFormat, TokenFile};
use anyhow::{Context, bail, ensure};
use std::path::Path;

/// What to prepare.
pub struct Job<'a> {
    /// The corpus as the user named it.
    pub corpus: &'a str,
    pub files: Vec<CorpusFile>,
    pub text_field: &'a str,
    pub val_every: usize,
    pub shard_tokens: usize,
    pub format: ShardFormat,
    pub tokenizer: &'a Tokenizer,
}

impl Job<'_> {
    pub fn settings(&self) -> anyhow::Result<Settings> {
        Ok(Settings {
            files: self.files.iter().map(input_file).collect::<anyhow::Result<_>>()?,
            text_field: self.text_field.into(),
            val_every: self.val_every,
            shard_tokens: self.shard_tokens,
            shard_format: self.format,
            tokenizer: self.tokenizer.fingerprint()?,
            vocab_size: self.tokenizer.vocab_size(),
            separator: self.tokenizer.encode(crate::data::dataset::DOC_SEPARATOR)?,
        })
    }
}

fn input_file(f: &CorpusFile) -> anyhow::Result<InputFile> {
    let meta = std::fs::metadata(&f.path).with_context(|| format!("cannot read {}", f.path.display()))?;
    let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    Ok(InputFile {
        path: f.path.display().to_string(),
        size: meta.len(),
        mtime_ns: mtime_ns.map_or(0, |d| d.as_nanos()),
    })
}

/// Prepares `job` into `dir` (created if missing), continuing a preparation of the same
/// settings found there; `progress` is told documents, text bytes and tokens as they pass.
pub fn run(dir: &Path, job: &Job<'_>, progress: &mut dyn FnMut(Step)) -> anyhow::Result<Manifest> {
    let mut m = open_dir(dir, job)?;
    if m.complete {
        return Ok(m);
    }
    let separator = m.settings.separator.clone();
    let input = pipeline::Input {
        files: &job.files,
        field: job.text_field,
        start: pipeline::Start { skip: m.documents_read, kept: m.documents_kept, val_every: job.val_every },
        tokenizer: job.tokenizer,
        separator: &separator,
        threads: crate::device::available_threads(),
    };
    let mut chunk = chunk::Chunk::default();
    pipeline::run(&input, &mut |d| {
        if let Some(sig) = crate::stop::requested() {
            bail!(
                "stopped by {}: {} shards are complete in {}; run the same command again to continue from there",
                sig.name(),
                m.shards.len(),
                dir.display()
            );
        }
        progress(Step { documents: 1, text_bytes: d.text_bytes, tokens: d.tokens.len() as u64 });
        chunk.add(d);
        if chunk.train_tokens() >= job.shard_tokens {
            std::mem::take(&mut chunk).close(dir, job.format, &mut m)?;
        }
        Ok(())
    })?;
    if !chunk.is_empty() {
        chunk.close(dir, job.format, &mut m)?;
    }
    ensure!(
        m.split(Split::Train).count() > 0 && m.split(Split::Val).count() > 0,
        "{}: {} non-empty documents, too few for a validation split (every {}th is held out); give more documents \
         or lower data.val_every",
        job.corpus,
        m.documents_kept,
        job.val_every
    );
    m.complete = true;
    m.save(dir)?;
    Ok(m)
}

/// The manifest to continue from: a new one in an empty or missing directory; the one there
/// when its settings are `job`'s, or when only input files were replaced and still hold the
/// documents of its shards (stray shards of an interrupted pair removed); else refused, as is
/// a directory normlab did not make.
fn open_dir(dir: &Path, job: &Job<'_>) -> anyhow::Result<Manifest> {
    let (corpus, settings) = (job.corpus, job.settings()?);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if !dir.join(manifest::FILE).is_file() {
        let names = entries(dir)?;
        let foreign = names.iter().find(|n| !(chunk::is_ours(n) || *n == ".lock" || *n == "tokenizer.json"));
        if let Some(name) = foreign {
            bail!("{} holds files normlab did not write ({name}); give an empty or new directory", dir.display());
        }
        let m = Manifest::new(corpus.into(), settings);
        remove_stray(dir, &m)?;
        m.save(dir)?;
        return Ok(m);
    }
    let mut m = Manifest::load(dir)?;
    if m.settings != settings {
        let replaced = replaced::only_files_changed(&m.settings, &settings);
        if !replaced {
            bail!(
                "{} holds a preparation with other settings (input files, tokenizer, text field, split or shard \
                 size); give another directory, or delete it to prepare again",
                dir.display()
            );
        }
        ensure!(
            replaced::same_documents(&m, &job.files, job.text_field)?,
            "{} holds a preparation whose prepared documents the input files no longer hold (a file was replaced by \
             other text); give another directory, or delete it to prepare again",
            dir.display()
        );
        m.settings = settings;
    }
    remove_stray(dir, &m)?;
    m.save(dir)?;
    Ok(m)
}

fn entries(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        names.push(e?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Removes shard files (and temporary files) the manifest does not list.
fn remove_stray(dir: &Path, m: &Manifest) -> anyhow::Result<()> {
    for name in entries(dir)? {
        if chunk::is_ours(&name) && !name.starts_with("manifest.json") && !m.shards.iter().any(|s| s.file == name) {
            std::fs::remove_file(dir.join(&name)).with_context(|| format!("cannot remove {name}"))?;
        }
    }
    Ok(())
}

/// The train and validation token streams of a complete preparation in `dir`.
pub fn open(dir: &Path, m: &Manifest) -> anyhow::Result<(TokenFile, TokenFile)> {
    ensure!(
        m.complete,
        "{} is a preparation that did not finish; run `normlab data prepare` on it again to complete it",
        dir.display()
    );
    // The raw width matters only to header-less files, which a preparation never writes.
    let width = shards::TokenDtype::Auto.width(m.settings.vocab_size);
    let split = |s: Split| -> anyhow::Result<TokenFile> {
        let files = m.split(s).map(|e| shards::open(&dir.join(&e.file), width)).collect::<anyhow::Result<_>>()?;
        Ok(TokenFile::concat(files))
    };
    Ok((split(Split::Train)?, split(Split::Val)?))
}
