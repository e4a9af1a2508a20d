//! `normlab evaluate`: a saved run's downstream tasks ([`crate::tasks`]), with the weights,
//! tokenizer and context it was trained with, printed as a table and written as JSON
//! (`RUN/evaluation.json` unless `--out` names another file).

use super::log;
use crate::decode::Decoder;
use crate::run::{SavedRun, checkpoint, layout};
use crate::tasks::evaluate::Evaluation;
use crate::tasks::spec::{TaskSpec, expand, load};
use anyhow::{Context, ensure};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `normlab evaluate`: a saved run's downstream tasks, printed as a table and written as JSON
/// (`RUN/evaluation.json` unless `out` names another file).
pub fn evaluate(path: &Path, o: &EvaluateOptions, out: Option<PathBuf>) -> anyhow::Result<()> {
    if let Some(out) = &out {
        check_out(out)?;
    }
    let e = measure(path, o, &log)?;
    outln!("{}", evaluation_table(&e.results));
    let out = out.unwrap_or_else(|| layout::evaluation(Path::new(&e.run)));
    check_out(&out)?;
    crate::io::json::write(&out, &e)?;
    errln!("{} tasks in {:.1} s; wrote {}", e.results.len(), e.seconds, out.display());
    Ok(())
}

/// Where `evaluate` may write its JSON: a new file in a directory that exists, or a file an
/// earlier `normlab evaluate` wrote; inside a run directory only that run's `evaluation.json`.
fn check_out(out: &Path) -> anyhow::Result<()> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    ensure!(
        parent.is_dir(),
        "--out {}: the directory {} does not exist; create it first or choose another path",
        out.display(),
        parent.display()
    );
    let parent = parent.canonicalize().with_context(|| format!("cannot read {}", parent.display()))?;
    let named = parent.join(out.file_name().unwrap_or_default());
    if let Some(run) = parent.ancestors().find(|a| layout::holds_run(a)) {
        ensure!(
            named == layout::evaluation(run),
            "--out {} lies inside the run directory {}, which holds only its own files; write elsewhere, or leave \
             out --out for {}",
            out.display(),
            run.display(),
            layout::evaluation(run).display()
        );
    }
    if out.exists() {
        ensure!(
            out.is_file() && crate::io::json::read::<Evaluation>(out).is_ok(),
            "--out {} exists and is not an evaluation normlab wrote; choose another path (nothing was changed)",
            out.display()
        );
    }
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

/// The tasks to evaluate: those given (expanded against `--config`'s directory or the run's),
/// else the run's `[eval]` tasks as its checked config expanded them, else the built-in suite.
fn task_specs(saved: &SavedRun, o: &EvaluateOptions) -> Vec<TaskSpec> {
    let dir = o.dir.as_ref().unwrap_or(&saved.cfg.eval.dir);
    match (o.tasks.is_empty(), saved.cfg.tasks().is_empty()) {
        (false, _) => expand(&o.tasks, dir),
        (true, false) if o.dir.is_none() => saved.cfg.tasks().to_vec(),
        (true, false) => expand(&saved.cfg.eval.tasks, dir),
        (true, true) => expand(&[TaskSpec::named("builtin")], dir),
    }
}

/// Evaluates the run at `path` (or one of its checkpoints).
pub fn measure(path: &Path, o: &EvaluateOptions, log: &dyn Fn(&str)) -> anyhow::Result<Evaluation> {
    let saved = SavedRun::open(path)?;
    let device = saved.cfg.open_device()?;
    let model = saved.model(&device)?;
    let d = Decoder { model: &model, device: &device, context: saved.cfg.train.seq_len, cache: true };
    let prefix = crate::data::boundary::boundary(&saved.tokenizer, saved.cfg.data.task)?.id;
    let cache = saved.cfg.data.cache_dir();
    let t0 = Instant::now();
    let mut results = Vec::new();
    for mut spec in task_specs(&saved, o) {
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

/// `normlab evaluate`'s flags.
pub struct EvaluateArgs {
    pub checkpoint: PathBuf,
    pub tasks: Vec<String>,
    pub config: Option<PathBuf>,
    pub limit: Option<u64>,
    pub num_fewshot: Option<usize>,
    pub fewshot_seed: Option<u64>,
    pub samples: bool,
    pub out: Option<PathBuf>,
}

/// `normlab evaluate`: the tasks of `--tasks` then of the `--config` file's `[eval]` table,
/// with lm-eval's `--num_fewshot` and `--seed` applied to the task files (a paper's suite keeps
/// its shots otherwise).
pub fn evaluate_command(a: EvaluateArgs) -> anyhow::Result<()> {
    let mut tasks = TaskSpec::parse_list(&a.tasks);
    let file = a.config.map(|f| crate::tasks::spec::read_eval_file(&f)).transpose()?;
    let dir = file.as_ref().map(|e| e.dir.clone());
    tasks.extend(file.into_iter().flat_map(|e| e.tasks));
    for t in tasks.iter_mut().filter(|t| t.path.is_some()) {
        t.num_fewshot = a.num_fewshot.unwrap_or(t.num_fewshot);
        t.seed = a.fewshot_seed.unwrap_or(t.seed);
    }
    let limit = a.limit.map(|n| n as usize);
    let o = EvaluateOptions { tasks, dir, limit, samples: a.samples };
    evaluate(&a.checkpoint, &o, a.out)
}
