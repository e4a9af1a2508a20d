//! `normlab bench serve RUN`: request latency and throughput of `normlab serve` under
//! concurrent clients, for each load of [`super::serve_load`].
//!
//! The server runs in this process on a free localhost port (or is another one, `--url`, such
//! as an older binary's, measured with the same clients and requests); for each load and each
//! `C` in `--clients`, `C` client threads send its requests over HTTP until `N` have been
//! answered. Latency is the client's wall time per request; tokens/s counts generated (and,
//! separately, prompt) tokens over the level's wall time. The Normalization chapter's deployment budget is a
//! 50 ms p95.

use super::serve_load::{Load, LoadKind, Target};
use crate::run::saved::SavedRun;
use crate::serve::{ServeOptions, Server};
use anyhow::ensure;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The Normalization chapter's latency budget for one request (p95).
pub const BUDGET_P95_MS: f64 = 50.0;

/// What is measured.
pub struct ServeBenchOptions {
    pub run: PathBuf,
    pub loads: Vec<LoadKind>,
    pub clients: Vec<usize>,
    pub requests: usize,
    /// Completion length of the fixed load on runs that are not pairs runs.
    pub max_tokens: usize,
    pub max_batch: usize,
    /// A server already listening (its base URL) instead of one started here.
    pub url: Option<String>,
    pub out: PathBuf,
}

/// One load at one concurrency level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Level {
    pub load: LoadKind,
    pub endpoint: String,
    pub clients: usize,
    pub requests: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    /// Generated tokens per second.
    pub tokens_per_s: f64,
    /// Prompt tokens per second (scored, for the log-likelihood load).
    pub prompt_tokens_per_s: f64,
    pub requests_per_s: f64,
    pub meets_budget: bool,
}

/// `bench/serve.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServeBench {
    pub run: String,
    pub recipe: String,
    /// `in-process`, or the URL of the server measured.
    pub server: String,
    pub max_batch: usize,
    pub budget_p95_ms: f64,
    pub machine: crate::device::Machine,
    pub levels: Vec<Level>,
}

/// The value at quantile `q` of sorted `xs` (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Generated and prompt tokens reported in a response body.
fn tokens_of(body: &str) -> (usize, usize) {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let generated = v["tokens"].as_u64().or(v["usage"]["completion_tokens"].as_u64()).unwrap_or(0);
    (generated as usize, v["usage"]["prompt_tokens"].as_u64().unwrap_or(0) as usize)
}

/// What one level measured.
struct Measured {
    /// Milliseconds per request.
    latencies: Vec<f64>,
    generated: usize,
    prompt: usize,
    wall_s: f64,
}

/// A client's pause before its `k`-th request under `load` (exponential with the load's mean;
/// the first one staggers the clients' starts).
fn pause(load: &Load, client: usize, k: usize, rng: &mut crate::rng::SplitMix64) -> Duration {
    if load.think_ms == 0.0 {
        return Duration::ZERO;
    }
    let ms = if k == 0 { 2.0 * client as f64 } else { -load.think_ms * (1.0 - rng.uniform()).ln() };
    Duration::from_secs_f64(ms / 1e3)
}

/// `n` requests of `load` from `c` clients.
fn level(base: &str, load: &Load, c: usize, n: usize) -> anyhow::Result<Measured> {
    let url = format!("{base}{}", load.path);
    let next = AtomicUsize::new(0);
    let generated = AtomicUsize::new(0);
    let prompt = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(n));
    let failure = Mutex::new(None::<String>);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for client in 0..c {
            let (url, next, generated, prompt, latencies, failure) =
                (&url, &next, &generated, &prompt, &latencies, &failure);
            s.spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                let mut rng = crate::rng::SplitMix64::new(client as u64 + 17);
                for k in 0.. {
                    std::thread::sleep(pause(load, client, k, &mut rng));
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let t = Instant::now();
                    let r = agent
                        .post(url)
                        .header("content-type", "application/json")
                        .send(load.bodies[i % load.bodies.len()].as_str());
                    let (status, body) = match r {
                        Ok(mut r) => (r.status().as_u16(), r.body_mut().read_to_string().unwrap_or_default()),
                        Err(e) => (0, e.to_string()),
                    };
                    if status != 200 {
                        *failure.lock().unwrap() = Some(format!("status {status}: {body}"));
                        return;
                    }
                    latencies.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
                    let (g, p) = tokens_of(&body);
                    generated.fetch_add(g, Ordering::Relaxed);
                    prompt.fetch_add(p, Ordering::Relaxed);
                }
            });
        }
    });
    if let Some(f) = failure.into_inner().unwrap() {
        anyhow::bail!("a {} request failed ({f})", load.kind.name());
    }
    let (generated, prompt) = (generated.into_inner(), prompt.into_inner());
    Ok(Measured { latencies: latencies.into_inner().unwrap(), generated, prompt, wall_s: t0.elapsed().as_secs_f64() })
}

/// The summary of one level.
fn summarise(load: &Load, clients: usize, mut m: Measured) -> Level {
    m.latencies.sort_by(f64::total_cmp);
    let lat = &m.latencies;
    let p95 = quantile(lat, 0.95);
    Level {
        load: load.kind,
        endpoint: load.path.into(),
        clients,
        requests: lat.len(),
        p50_ms: quantile(lat, 0.5),
        p95_ms: p95,
        p99_ms: quantile(lat, 0.99),
        mean_ms: lat.iter().sum::<f64>() / lat.len() as f64,
        tokens_per_s: m.generated as f64 / m.wall_s,
        prompt_tokens_per_s: m.prompt as f64 / m.wall_s,
        requests_per_s: lat.len() as f64 / m.wall_s,
        meets_budget: p95 <= BUDGET_P95_MS,
    }
}

/// The server to measure: started here, or the one at `o.url`.
fn server(o: &ServeBenchOptions) -> anyhow::Result<(Option<Server>, String)> {
    if let Some(url) = &o.url {
        return Ok((None, url.trim_end_matches('/').to_string()));
    }
    let queue = o.clients.iter().copied().max().unwrap_or(1).max(1) * 8;
    let so = ServeOptions {
        checkpoint: o.run.clone(),
        host: "127.0.0.1".into(),
        port: 0,
        max_batch: o.max_batch,
        queue,
        signals: false,
        grace: std::time::Duration::from_secs(10),
    };
    let s = Server::start(&so)?;
    let url = format!("http://{}", s.addr);
    Ok((Some(s), url))
}

pub fn run(o: &ServeBenchOptions) -> anyhow::Result<ServeBench> {
    ensure!(
        o.requests > 0 && !o.clients.is_empty() && o.clients.iter().all(|&c| c > 0) && !o.loads.is_empty(),
        "--clients, --requests and --loads must be ≥ 1"
    );
    let saved = SavedRun::open(&o.run)?;
    let target = Target {
        run: &o.run,
        tokenizer: &saved.tokenizer,
        context: saved.cfg.train.seq_len,
        pairs: saved.cfg.data.task == crate::data::config::Task::Pairs,
        max_tokens: o.max_tokens,
        count: o.requests,
    };
    let loads: Vec<Load> =
        o.loads.iter().map(|&k| super::serve_load::build(k, &target)).collect::<anyhow::Result<_>>()?;
    let (started, url) = server(o)?;
    let mut levels = Vec::new();
    for load in &loads {
        level(&url, load, 1, load.bodies.len().min(8))?; // warm-up
        for &c in &o.clients {
            let l = summarise(load, c, level(&url, load, c, o.requests)?);
            crate::io::term::err(format_args!(
                "{:>6} {c:>3} clients: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, {:.0} tokens/s, {:.0} prompt tokens/s",
                load.kind.name(),
                l.p50_ms,
                l.p95_ms,
                l.p99_ms,
                l.tokens_per_s,
                l.prompt_tokens_per_s
            ));
            levels.push(l);
        }
    }
    let report = ServeBench {
        run: o.run.display().to_string(),
        recipe: saved.cfg.recipe().name.clone(),
        server: o.url.clone().unwrap_or_else(|| "in-process".into()),
        max_batch: o.max_batch,
        budget_p95_ms: BUDGET_P95_MS,
        machine: crate::device::machine(),
        levels,
    };
    if let Some(s) = started {
        s.stop()?;
    }
    crate::io::json::write(&o.out, &report)?;
    Ok(report)
}

/// The levels as a markdown table, with the budget's verdict.
pub fn table(r: &ServeBench) -> String {
    let mut s = format!(
        "{} ({}), server {}, max batch {}\n\n| load | clients | p50 ms | p95 ms | p99 ms | tokens/s | prompt tokens/s | \
         requests/s | p95 ≤ {} ms |\n|---|---|---|---|---|---|---|---|---|\n",
        r.run, r.recipe, r.server, r.max_batch, r.budget_p95_ms
    );
    for l in &r.levels {
        s += &format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} | {} |\n",
            l.load.name(),
            l.clients,
            l.p50_ms,
            l.p95_ms,
            l.p99_ms,
            l.tokens_per_s,
            l.prompt_tokens_per_s,
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
