//! The progress of a preparation: documents, text bytes and tokens so far and their rates.

use std::time::Instant;

/// Progress of one document.
#[derive(Clone, Copy, Debug, Default)]
pub struct Step {
    pub documents: u64,
    pub text_bytes: u64,
    pub tokens: u64,
}

pub struct Meter {
    total: Step,
    start: Instant,
    last: Instant,
}

impl Default for Meter {
    fn default() -> Self {
        Self::new()
    }
}

impl Meter {
    pub fn new() -> Self {
        let now = Instant::now();
        Self { total: Step::default(), start: now, last: now }
    }

    /// Counts `s`; returns the progress line when `every_s` seconds passed since the last one.
    pub fn add(&mut self, s: Step, every_s: f64) -> Option<String> {
        self.total.documents += s.documents;
        self.total.text_bytes += s.text_bytes;
        self.total.tokens += s.tokens;
        (self.last.elapsed().as_secs_f64() >= every_s).then(|| {
            self.last = Instant::now();
            self.line()
        })
    }

    pub fn total(&self) -> Step {
        self.total
    }

    pub fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// `12,345 documents, 512.0 MB, 130.2 M tokens in 40 s: 12.8 MB/s, 3.26 M tokens/s`
    pub fn line(&self) -> String {
        let t = self.seconds().max(1e-9);
        let s = self.total;
        format!(
            "{} documents, {:.1} MB of text, {:.2} M tokens in {:.0} s: {:.1} MB/s, {:.2} M tokens/s",
            s.documents,
            s.text_bytes as f64 / 1e6,
            s.tokens as f64 / 1e6,
            t,
            s.text_bytes as f64 / 1e6 / t,
            s.tokens as f64 / 1e6 / t
        )
    }
}
