//! `normlab train` as one rank of a job over several processes: every rank checks that the
//! others run the same binary on the same request, rank 0 creates (or resumes) the run, then
//! the others join it from what rank 0 published, and every rank checks that they all start
//! from the same weights.

use super::{ResumeOptions, Trainer};
use crate::dist::Ranks;
use crate::run::RunConfig;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// What `normlab train` was asked on every rank.
pub struct Asked<'a> {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--set` edits.
    pub sets: &'a [String],
    /// `--resume`.
    pub resume: Option<PathBuf>,
}

/// This rank's trainer (`None`: the run had already finished). Rank 0 builds its own with
/// `first` (a new run from `config` and `sets`, or `--resume`'s, as a lone process would).
pub fn build(
    ranks: Ranks,
    asked: Asked<'_>,
    opts: ResumeOptions,
    first: impl FnOnce() -> anyhow::Result<Option<Trainer>>,
) -> anyhow::Result<Option<Trainer>> {
    let Asked { config, sets, resume } = asked;
    if ranks.local_size() > 1 {
        crate::device::set_local_gpu(ranks.local_rank());
    }
    let request = ranks.all_ok(match &resume {
        Some(dir) => Ok(Request::Resume(dir.clone())),
        None => RunConfig::load(config.as_deref(), sets)
            .and_then(|c| c.check_ranks(ranks.size()).map(|()| c))
            .map(|c| Request::New(Box::new(c))),
    })?;
    let what = match &request {
        Request::New(cfg) => cfg.to_toml()?,
        Request::Resume(dir) => format!("resume {} {opts:?}", dir.display()),
    };
    same_job(ranks, what.as_bytes())?;
    // Rank 0 first: it takes the run's lock, prepares the data cache, writes the directory.
    let first = ranks.all_ok(match ranks.is_writer() {
        true => first(),
        false => Ok(None),
    })?;
    if ranks.max(i64::from(ranks.is_writer() && first.is_none())) > 0 {
        return Ok(None);
    }
    let quiet = |_: &str| {};
    let mut trainer = ranks.all_ok(match (first, request) {
        (Some(t), _) => Ok(t),
        (None, Request::Resume(dir)) => super::setup::follow_resume(&dir, opts, &quiet),
        (None, Request::New(cfg)) => super::setup::follow_start(*cfg, &quiet),
    })?;
    ranks.all_ok(trainer.set_ranks(ranks))?;
    same_weights(ranks, &trainer)?;
    Ok(Some(trainer))
}

/// What every rank was asked to do.
enum Request {
    New(Box<RunConfig>),
    Resume(PathBuf),
}

/// Refuses a job whose ranks run different binaries or were given different configs.
fn same_job(ranks: Ranks, request: &[u8]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().and_then(std::fs::read);
    let verdict = exe.map_err(anyhow::Error::from).and_then(|exe| {
        let (config, binary) = (ranks.gather(hash64(request)), ranks.gather(hash64(&exe)));
        if let Some(r) = differs(&binary) {
            anyhow::bail!(
                "rank {r} runs a different normlab binary than rank 0 (sha256 {:016x}… vs {:016x}…); start every rank \
                 with the same build",
                binary[r],
                binary[0]
            );
        }
        if let Some(r) = differs(&config) {
            anyhow::bail!(
                "rank {r} was started with a different config than rank 0 (resolved config sha256 {:016x}… vs \
                 {:016x}…); give every rank the same --config and --set (or the same --resume)",
                config[r],
                config[0]
            );
        }
        Ok(())
    });
    ranks.all_ok(verdict)
}

/// Refuses to train from weights that differ between ranks (a seeded start is the same on every
/// rank; a resumed one reads the same checkpoint).
fn same_weights(ranks: Ranks, trainer: &Trainer) -> anyhow::Result<()> {
    let values = crate::model::base::params::named_values(&trainer.model);
    let mut h = Sha256::new();
    for (_, v) in &values {
        h.update(&v.bytes()[..]);
    }
    let sums = ranks.gather(u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes")));
    ranks.all_ok(match differs(&sums) {
        Some(r) => Err(anyhow::anyhow!(
            "rank {r} starts from other weights than rank 0; the run directory must be the same (shared) \
             directory on every node"
        )),
        None => Ok(()),
    })
}

/// The first rank whose value differs from rank 0's.
fn differs(v: &[u64]) -> Option<usize> {
    (1..v.len()).find(|&r| v[r] != v[0])
}

fn hash64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(Sha256::digest(bytes)[..8].try_into().expect("8 bytes"))
}
