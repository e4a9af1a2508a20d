//! The commands on a saved run: `eval`, `generate`, `probe`.

use super::log;
use crate::decode::SampleOptions;
use crate::train::saved;
use std::path::{Path, PathBuf};

pub fn eval(path: &Path, data: Option<PathBuf>, windows: Option<usize>) -> anyhow::Result<()> {
    let e = saved::eval(path, data.as_deref(), windows, &log)?;
    outln!("{}: {}", e.weights.display(), e.source);
    outln!(
        "val_loss {:.4}  val_ppl {:.3}  ({} tokens in {} windows of {})",
        e.val_loss,
        e.val_ppl,
        e.tokens,
        e.windows,
        e.seq_len
    );
    if let Some(p) = &e.pairs {
        for s in &p.sets {
            outln!(
                "{}: exact match {:.3}, token F1 {:.3} ({} pairs)",
                s.name,
                s.overall.exact_match,
                s.overall.token_f1,
                s.overall.n
            );
            for (c, sc) in &s.categories {
                outln!("  {c:<12} EM {:.3}  F1 {:.3}  (n = {})", sc.exact_match, sc.token_f1, sc.n);
            }
        }
        outln!(
            "decoding: {} tokens in {:.2} s ({:.0} tokens/s, KV cache on)",
            p.generated_tokens,
            p.decode_s,
            p.generated_tokens as f64 / p.decode_s
        );
    }
    Ok(())
}

/// `normlab generate`: samples from a saved run, printing the text as it grows and, on
/// standard error, the time to the first token (loading the weights and the prompt's forward
/// included) and the decoding speed after it.
pub fn generate(path: &Path, prompt: &str, opts: SampleOptions, cache: bool) -> anyhow::Result<()> {
    opts.validate()?;
    outp!("{prompt}");
    let t0 = std::time::Instant::now();
    // When text first shows and after how many tokens; tokens generated in all.
    let mut first: Option<(std::time::Instant, usize)> = None;
    let mut n = 0usize;
    saved::sample(path, prompt, &opts, cache, &mut |t, tokens| {
        first.get_or_insert_with(|| (std::time::Instant::now(), tokens));
        n = tokens;
        outp!("{t}");
    })?;
    outln!();
    let cache = if cache { "on" } else { "off" };
    match first {
        Some((f, k)) if n > k => errln!(
            "first text after {:.2} s; then {} tokens in {:.2} s: {:.1} tokens/s (KV cache {cache})",
            (f - t0).as_secs_f64(),
            n - k,
            f.elapsed().as_secs_f64(),
            (n - k) as f64 / f.elapsed().as_secs_f64()
        ),
        _ => errln!("{n} tokens in {:.2} s (KV cache {cache})", t0.elapsed().as_secs_f64()),
    }
    Ok(())
}

pub fn probe(path: &Path, data: Option<PathBuf>, batches: usize, init: bool) -> anyhow::Result<()> {
    let (p, out, source) = saved::probe(path, data.as_deref(), batches, init, &log)?;
    outln!("{}", crate::probe::offline::table(&p));
    outln!("windows from {source}; JSON in {}", out.display());
    Ok(())
}

/// `normlab evaluate`: a saved run's downstream tasks, printed as a table and written as JSON
/// (`RUN/evaluation.json` unless `out` names another file).
pub fn evaluate(
    path: &Path,
    o: &crate::train::evaluate::EvaluateOptions,
    out: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let e = crate::train::evaluate::evaluate(path, o, &log)?;
    outln!("{}", evaluation_table(&e.results));
    let run_dir = std::path::PathBuf::from(&e.run);
    let out = out.unwrap_or_else(|| run_dir.join("evaluation.json"));
    crate::io::json::write(&out, &e)?;
    errln!("{} tasks in {:.1} s; wrote {}", e.results.len(), e.seconds, out.display());
    Ok(())
}

/// One row per task and metric: value ± standard error.
fn evaluation_table(results: &[crate::tasks::TaskResult]) -> String {
    let mut t = String::from("| task | n | metric | value | ± |\n|---|---|---|---|---|\n");
    for r in results {
        for (m, v) in &r.metrics {
            let se = v.stderr.map_or("–".into(), |s| format!("{s:.4}"));
            t += &format!("| {} | {} | {m} | {:.4} | {se} |\n", r.task, r.n, v.value);
        }
        for (c, v) in &r.categories {
            let se = v.stderr.map_or("–".into(), |s| format!("{s:.4}"));
            t += &format!("| {} / {c} | | acc | {:.4} | {se} |\n", r.task, v.value);
        }
    }
    t
}
