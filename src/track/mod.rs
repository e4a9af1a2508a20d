//! Runs in a tracking server (`run.track = "mlflow:URL"`): an MLflow tracking server through
//! its REST API, no Python in the loop. Each run is one MLflow run (params = its config,
//! metrics = its `metrics.jsonl` records at their steps, tags = recipe and sweep, artifacts =
//! its config, `run.json` and status); a sweep is a parent run with its runs as children and
//! its report, results and figures as artifacts.
//!
//! - [`mlflow`]: the REST client
//! - [`keys`]: records as metrics, the config as params
//! - [`state`]: `tracking.json`, what the server has of a directory
//! - [`sender`]: the thread that sends a training run, buffered and retried
//! - [`replay`]: `normlab track DIR`: what a run or sweep directory holds, sent afterwards
//! - [`parent`]: a sweep's parent run

pub mod keys;
pub mod mlflow;
pub mod parent;
pub mod replay;
pub mod sender;
pub mod state;

pub use sender::{Opening, Tracker};
pub use state::TrackState;

/// The environment variable through which a sweep names its parent run to the runs it starts.
pub const PARENT_ENV: &str = "NORMLAB_TRACK_PARENT";

/// The tags that find a run: its recipe, its sweep (when it has one), the program.
pub fn run_tags(recipe: &str, sweep: Option<&str>) -> Vec<(String, String)> {
    let mut t = vec![
        ("normlab.recipe".to_string(), recipe.to_string()),
        ("normlab.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("mlflow.source.name".to_string(), "normlab".to_string()),
    ];
    t.extend(sweep.map(|s| ("normlab.sweep".to_string(), s.to_string())));
    t
}

/// The files of a run directory uploaded as its artifacts (artifact path, file).
pub fn run_artifacts(dir: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    use crate::run::layout;
    let mut files = vec![
        ("config.toml".to_string(), layout::config(dir)),
        ("run.json".to_string(), layout::info(dir)),
        ("status.json".to_string(), layout::status(dir)),
        ("evaluation.json".to_string(), layout::evaluation(dir)),
    ];
    files.extend(report_files(&layout::report(dir)));
    files
}

/// Every file of a report directory, under `report/`.
pub fn report_files(report: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    let mut files: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(report)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter_map(|p| Some((format!("report/{}", p.file_name()?.to_str()?), p)))
        .collect();
    files.sort();
    files
}
