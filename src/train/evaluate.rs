//! `normlab evaluate`: a saved run's downstream tasks ([`crate::tasks`]), with the weights,
//! tokenizer and context it was trained with.

use super::checkpoint;
use super::saved::SavedRun;
use crate::decode::Decoder;
use crate::tasks::evaluate::Evaluation;
use crate::tasks::spec::{TaskSpec, expand, load};
use std::path::Path;
use std::time::Instant;

/// How a saved run is evaluated.
pub struct EvaluateOptions {
    /// The tasks; empty: the run's `[eval]` tasks, else the built-in suite.
    pub tasks: Vec<TaskSpec>,
    /// Where the papers' suites are (`eval.dir`); none: the run's.
    pub dir: Option<std::path::PathBuf>,
    /// At most this many items a task (overrides each task's own limit).
    pub limit: Option<usize>,
    /// Keep every item's log-likelihoods in the result.
    pub samples: bool,
}

/// Evaluates the run at `path` (or one of its checkpoints).
pub fn evaluate(path: &Path, o: &EvaluateOptions, log: &dyn Fn(&str)) -> anyhow::Result<Evaluation> {
    let saved = SavedRun::open(path)?;
    let device = crate::device::parse(&saved.cfg.run.device)?;
    let model = saved.model(&device)?;
    let d = Decoder { model: &model, device: &device, context: saved.cfg.train.seq_len, cache: true };
    let prefix = crate::data::boundary::boundary(&saved.tokenizer, saved.cfg.data.task)?.id;
    let specs = match (o.tasks.is_empty(), saved.cfg.eval.tasks.is_empty()) {
        (false, _) => o.tasks.clone(),
        (true, false) => saved.cfg.eval.tasks.clone(),
        (true, true) => vec![TaskSpec::named("builtin")],
    };
    let cache = saved.cfg.data.cache_dir();
    let t0 = Instant::now();
    let mut results = Vec::new();
    for mut spec in expand(&specs, o.dir.as_ref().unwrap_or(&saved.cfg.eval.dir)) {
        spec.limit = o.limit.or(spec.limit);
        let task = load(&spec, &cache, d.context)?;
        log(&format!("{}: {} items", task.name, task.items.len()));
        let mut r = crate::tasks::evaluate(&d, &saved.tokenizer, prefix, &task)?;
        if !o.samples {
            r.items.clear();
        }
        results.push(r);
    }
    Ok(Evaluation {
        run: saved.run.display().to_string(),
        weights: saved.weights.display().to_string(),
        step: checkpoint::weights_step(&saved.weights),
        seconds: t0.elapsed().as_secs_f64(),
        results,
    })
}
