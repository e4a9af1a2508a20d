//! `normlab bench --serve RUN`: request latency of `normlab serve` under concurrent clients.
//!
//! The server runs in this process on a free localhost port; `C` client threads send requests
//! over HTTP back to back until `N` have been answered, for each `C` in `--clients`. A pairs
//! run is asked the task form (`/v1/normalize`, greedy to `<end>`) on its test sources (from
//! `pairs_eval.json`); any other run greedy `/v1/completions` of `max_tokens` tokens. Latency is
//! the client's wall time per request; tokens/s counts generated tokens over the level's wall
//! time. Seed 004's deployment budget is a 50 ms p95.

use crate::serve::{ServeOptions, Server};
use crate::train::pairs_eval::PairsEval;
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Seed 004's latency budget for one request (p95).
pub const BUDGET_P95_MS: f64 = 50.0;

/// What is measured.
pub struct ServeBenchOptions {
    pub run: PathBuf,
    pub clients: Vec<usize>,
    pub requests: usize,
    /// Completion length for runs that are not pairs runs.
    pub max_tokens: usize,
    pub max_batch: usize,
    pub out: PathBuf,
}

/// One concurrency level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Level {
    pub clients: usize,
    pub requests: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub tokens_per_s: f64,
    pub requests_per_s: f64,
    pub meets_budget: bool,
}

/// `bench/serve.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServeBench {
    pub run: String,
    pub recipe: String,
    /// `normalize` (pairs runs) or `completions`.
    pub endpoint: String,
    pub max_batch: usize,
    pub budget_p95_ms: f64,
    pub machine: crate::device::Machine,
    pub levels: Vec<Level>,
}

/// The request bodies, cycled: a pairs run's test sources, else short fixed prompts.
fn bodies(run: &Path, pairs: bool, max_tokens: usize) -> anyhow::Result<Vec<String>> {
    if pairs {
        let p = crate::train::run_dir::pairs_eval(run);
        let e: PairsEval = crate::io::json::read(&p).with_context(|| {
            format!("{} is missing: the benchmark asks a pairs run its test sources; finish the run first", p.display())
        })?;
        let v: Vec<String> = e.predictions.iter().map(|p| json!({"input": p.source}).to_string()).collect();
        ensure!(!v.is_empty(), "{} has no test sources", p.display());
        return Ok(v);
    }
    let prompts = ["Fellow citizens, ", "The State of the Union ", "We must ", "In the year ", "Congress has "];
    Ok(prompts.iter().map(|p| json!({"prompt": p, "max_tokens": max_tokens, "temperature": 0}).to_string()).collect())
}

/// The value at quantile `q` of sorted `xs` (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Generated tokens reported in a response body.
fn tokens_of(body: &str) -> usize {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["tokens"].as_u64().or(v["usage"]["completion_tokens"].as_u64()).unwrap_or(0) as usize
}

/// `n` requests from `c` clients; (latencies in ms, tokens, wall seconds).
fn level(url: &str, bodies: &[String], c: usize, n: usize) -> anyhow::Result<(Vec<f64>, usize, f64)> {
    let (next, tokens) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let latencies = Mutex::new(Vec::with_capacity(n));
    let failure = Mutex::new(None::<String>);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..c {
            s.spawn(|| {
                let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let t = Instant::now();
                    let r = agent
                        .post(url)
                        .header("content-type", "application/json")
                        .send(bodies[i % bodies.len()].as_str());
                    let (status, body) = match r {
                        Ok(mut r) => (r.status().as_u16(), r.body_mut().read_to_string().unwrap_or_default()),
                        Err(e) => (0, e.to_string()),
                    };
                    if status != 200 {
                        *failure.lock().unwrap() = Some(format!("status {status}: {body}"));
                        return;
                    }
                    latencies.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
                    tokens.fetch_add(tokens_of(&body), Ordering::Relaxed);
                }
            });
        }
    });
    if let Some(f) = failure.into_inner().unwrap() {
        anyhow::bail!("a benchmark request failed ({f})");
    }
    Ok((latencies.into_inner().unwrap(), tokens.into_inner(), t0.elapsed().as_secs_f64()))
}

pub fn run(o: &ServeBenchOptions) -> anyhow::Result<ServeBench> {
    ensure!(
        o.requests > 0 && !o.clients.is_empty() && o.clients.iter().all(|&c| c > 0),
        "--clients and --requests must be ≥ 1"
    );
    let queue = o.clients.iter().copied().max().unwrap_or(1).max(1) * 2;
    let so = ServeOptions {
        checkpoint: o.run.clone(),
        host: "127.0.0.1".into(),
        port: 0,
        max_batch: o.max_batch,
        queue,
        signals: false,
    };
    let server = Server::start(&so)?;
    let endpoint = if server.pairs { "normalize" } else { "completions" };
    let url = format!("http://{}/v1/{endpoint}", server.addr);
    let bodies = bodies(&o.run, server.pairs, o.max_tokens)?;
    level(&url, &bodies, 1, bodies.len().min(8))?; // warm-up
    let mut levels = Vec::new();
    for &c in &o.clients {
        let (mut lat, tokens, wall) = level(&url, &bodies, c, o.requests)?;
        lat.sort_by(f64::total_cmp);
        let p95 = quantile(&lat, 0.95);
        let l = Level {
            clients: c,
            requests: lat.len(),
            p50_ms: quantile(&lat, 0.5),
            p95_ms: p95,
            p99_ms: quantile(&lat, 0.99),
            mean_ms: lat.iter().sum::<f64>() / lat.len() as f64,
            tokens_per_s: tokens as f64 / wall,
            requests_per_s: lat.len() as f64 / wall,
            meets_budget: p95 <= BUDGET_P95_MS,
        };
        crate::io::term::err(format_args!(
            "{c:>3} clients: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, {:.0} tokens/s",
            l.p50_ms, l.p95_ms, l.p99_ms, l.tokens_per_s
        ));
        levels.push(l);
    }
    let report = ServeBench {
        run: o.run.display().to_string(),
        recipe: server.recipe.clone(),
        endpoint: endpoint.into(),
        max_batch: o.max_batch,
        budget_p95_ms: BUDGET_P95_MS,
        machine: crate::device::machine(),
        levels,
    };
    server.stop()?;
    crate::io::json::write(&o.out, &report)?;
    Ok(report)
}

/// The levels as a markdown table, with the budget's verdict.
pub fn table(r: &ServeBench) -> String {
    let mut s = format!(
        "{} ({}), /v1/{}, max batch {}\n\n| clients | p50 ms | p95 ms | p99 ms | tokens/s | requests/s | p95 ≤ {} ms |\n|---|---|---|---|---|---|---|\n",
        r.run, r.recipe, r.endpoint, r.max_batch, r.budget_p95_ms
    );
    for l in &r.levels {
        s += &format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {} |\n",
            l.clients,
            l.p50_ms,
            l.p95_ms,
            l.p99_ms,
            l.tokens_per_s,
            l.requests_per_s,
            if l.meets_budget { "yes" } else { "no" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::quantile;

    /// Nearest rank: of 1..=100, p50 is 50, p95 95, p99 99; of one value, that value.
    #[test]
    fn quantiles_are_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!((quantile(&xs, 0.5), quantile(&xs, 0.95), quantile(&xs, 0.99)), (50.0, 95.0, 99.0));
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
    }
}
