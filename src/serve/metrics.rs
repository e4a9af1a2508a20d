//! The server's counters, rendered in Prometheus' text exposition format at `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram's buckets; the Normalization chapter's budget is 50 ms.
pub const LATENCY_BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

#[derive(Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    /// Requests answered with a 4xx or 5xx status (503s included).
    pub errors: AtomicU64,
    /// Requests refused with 503 because the queue was full.
    pub rejected: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    /// Requests waiting to join the decoding batch.
    pub queued: AtomicUsize,
    /// Rows in the decoding batch.
    pub active: AtomicUsize,
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
}

impl Metrics {
    /// Records one finished request's latency (arrival to last token).
    pub fn observe(&self, latency: Duration) {
        let s = latency.as_secs_f64();
        for (b, &le) in self.buckets.iter().zip(&LATENCY_BUCKETS) {
            if s <= le {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(latency.as_micros() as u64, Ordering::Relaxed);
    }

    /// The exposition text (`text/plain; version=0.0.4`).
    pub fn render(&self) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        metric("normlab_requests_total", "counter", "Requests received.", get(&self.requests).to_string());
        metric(
            "normlab_request_errors_total",
            "counter",
            "Requests answered 4xx or 5xx.",
            get(&self.errors).to_string(),
        );
        metric(
            "normlab_rejected_total",
            "counter",
            "Requests refused with 503 (queue full).",
            get(&self.rejected).to_string(),
        );
        metric("normlab_prompt_tokens_total", "counter", "Prompt tokens read.", get(&self.prompt_tokens).to_string());
        metric(
            "normlab_generated_tokens_total",
            "counter",
            "Tokens generated.",
            get(&self.generated_tokens).to_string(),
        );
        let q = self.queued.load(Ordering::Relaxed);
        metric("normlab_queue_length", "gauge", "Requests waiting to join the decoding batch.", q.to_string());
        let a = self.active.load(Ordering::Relaxed);
        metric("normlab_batch_size", "gauge", "Sequences in the decoding batch.", a.to_string());
        let name = "normlab_request_latency_seconds";
        let _ = writeln!(out, "# HELP {name} Arrival to last token, per completed request.\n# TYPE {name} histogram");
        for (b, le) in self.buckets.iter().zip(LATENCY_BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {}", get(b));
        }
        let n = get(&self.latency_count);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {n}");
        let _ = writeln!(out, "{name}_sum {}", get(&self.latency_sum_us) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {n}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets are cumulative: 3 ms counts in every bucket, 70 ms from 0.1 s on, and the sum
    /// is in seconds.
    #[test]
    fn the_histogram_is_cumulative_and_in_seconds() {
        let m = Metrics::default();
        m.observe(Duration::from_millis(3));
        m.observe(Duration::from_millis(70));
        let text = m.render();
        assert!(text.contains("normlab_request_latency_seconds_bucket{le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("normlab_request_latency_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("normlab_request_latency_seconds_bucket{le=\"0.1\"} 2\n"));
        assert!(text.contains("normlab_request_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("normlab_request_latency_seconds_sum 0.073\n"));
        assert!(text.contains("# TYPE normlab_queue_length gauge\nnormlab_queue_length 0\n"));
    }
}
