//! What `normlab bench data` measures, as its flags give it.

use std::path::PathBuf;

/// What to measure.
pub struct DataBenchOptions {
    /// Where the corpus, its tokenizer and the prepared shards go.
    pub dir: PathBuf,
    /// Gigabytes of text in the generated corpus.
    pub gb: f64,
    /// Interleaved rounds (medians are reported).
    pub rounds: usize,
    pub python: String,
    pub out: PathBuf,
    /// Training steps timed on the prepared shards.
    pub trainer_steps: usize,
}
