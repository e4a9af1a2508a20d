//! The sweep directory, the one place its layout is known:
//!
//! ```text
//! DIR/sweep.toml           the sweep file as run (after --set), for jobs that start later
//! DIR/plan.json            every planned run (grid and reseed stage), grouping and target
//! DIR/configs/NAME.toml    each run's full config
//! DIR/runs/NAME/           each run's directory (see crate::run::layout)
//! DIR/logs/NAME.log        each run's output
//! DIR/results.jsonl        one row per run; results.csv the same table for spreadsheets
//! DIR/separation.json      the rounds of seeds added until adjacent ranks separate
//! DIR/report/              `normlab report DIR`
//! DIR/slurm/{grid,reseed,next}.sbatch, DIR/slurm/jobs.json   Slurm scripts and submitted jobs
//! ```

use std::path::{Path, PathBuf};

pub fn sweep_file(dir: &Path) -> PathBuf {
    dir.join("sweep.toml")
}
pub fn slurm_script(dir: &Path, stage: &str) -> PathBuf {
    dir.join("slurm").join(format!("{stage}.sbatch"))
}
pub fn slurm_jobs(dir: &Path) -> PathBuf {
    dir.join("slurm").join("jobs.json")
}
/// Slurm's output file pattern for array tasks (`%A` job, `%a` task).
pub fn slurm_output(dir: &Path) -> PathBuf {
    logs(dir).join("slurm-%A_%a.out")
}
pub fn plan(dir: &Path) -> PathBuf {
    dir.join("plan.json")
}
pub fn run_config(dir: &Path, name: &str) -> PathBuf {
    dir.join("configs").join(format!("{name}.toml"))
}
pub fn run(dir: &Path, name: &str) -> PathBuf {
    dir.join("runs").join(name)
}
pub fn logs(dir: &Path) -> PathBuf {
    dir.join("logs")
}
pub fn log(dir: &Path, name: &str) -> PathBuf {
    logs(dir).join(format!("{name}.log"))
}
pub fn results_jsonl(dir: &Path) -> PathBuf {
    dir.join("results.jsonl")
}
pub fn results_csv(dir: &Path) -> PathBuf {
    dir.join("results.csv")
}
pub fn separation(dir: &Path) -> PathBuf {
    dir.join("separation.json")
}
pub fn report(dir: &Path) -> PathBuf {
    dir.join("report")
}

/// Whether `dir` holds a sweep (rather than a single run).
pub fn is_sweep(dir: &Path) -> bool {
    results_jsonl(dir).is_file()
}
