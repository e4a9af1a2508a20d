//! `normlab` command line: the commands and their flags, parsed and handed to
//! [`normlab::commands`].

use clap::{Parser, Subcommand};
use normlab::commands;
use normlab::commands::sweep::StudyArgs;
use normlab::decode::{SampleOptions, Sampling};
use normlab::sweep::config::Executor;
use normlab::sweep::slurm::SubmitOptions;
use std::path::PathBuf;

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
        /// With --resume: continue although metrics.jsonl lost records the checkpoint counted
        /// (the gap is recorded and reported); refused otherwise.
        #[arg(long, requires = "resume")]
        allow_lost_records: bool,
    },
    /// Supervised fine-tuning of a saved run on conversations (OpenAI messages, ShareGPT/LIMA
    /// conversations or Alpaca records; JSONL, JSON or parquet), full or LoRA, as a new run
    /// that records its parent; resume it with `train --resume`.
    Finetune {
        /// The parent: a run directory (its final or latest weights) or a checkpoints/step-N
        /// directory; an imported Hugging Face checkpoint's run too.
        #[arg(long, value_name = "RUN_DIR")]
        checkpoint: PathBuf,
        /// The conversations.
        #[arg(long)]
        data: PathBuf,
        /// A TOML file written over the parent's config: the fine-tuning [train], [optim],
        /// [schedule], [model.lora] (LoRA; without it every weight trains), run.dir.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Edit one config field, e.g. `--set model.lora.rank=16`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Log lines instead of a progress bar.
        #[arg(long)]
        quiet: bool,
        /// Replace an existing run in run.dir (never the parent's).
        #[arg(long)]
        force: bool,
    },
    /// Loss and perplexity of a trained run (its final or latest weights) on its validation
    /// windows or on a text; a pairs run also decodes and scores its test sets.
    Perplexity {
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
    /// Downstream tasks of a trained run, scored as lm-evaluation-harness scores them (multiple
    /// choice by log-likelihood, cloze, bits per byte): a table, and RUN/evaluation.json.
    Evaluate {
        #[arg(long, value_name = "RUN_DIR")]
        checkpoint: PathBuf,
        /// Tasks: built-in ones by name (`builtin` is the suite), files as NAME=PATH in a
        /// published layout (e.g. `arc_easy=data/arc_easy/test.parquet`); default: the run's
        /// [eval] tasks, else the built-in suite.
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<String>,
        /// The tasks of a TOML file's `[eval]` table (a run config's, or one of its own: tables
        /// may give `num_fewshot`, `fewshot_path`, `layout`, `limit`, `seed`), after --tasks.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// At most this many items a task (≥ 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// Solved examples before every item of every task file (lm-eval's --num_fewshot; the
        /// built-in tasks are zero-shot, a paper's suite keeps its paper's shots).
        #[arg(long)]
        num_fewshot: Option<usize>,
        /// The few-shot examples' seed (lm-eval's --seed; default 1234).
        #[arg(long)]
        fewshot_seed: Option<u64>,
        /// Keep every item's log-likelihoods in the JSON.
        #[arg(long)]
        samples: bool,
        /// Write the JSON here instead of RUN/evaluation.json.
        #[arg(long)]
        out: Option<PathBuf>,
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
        /// Nucleus sampling: keep the most likely tokens whose probabilities first reach this
        /// (1 = all).
        #[arg(long, default_value_t = 1.0)]
        top_p: f64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Re-run the visible window for every token instead of using the KV cache (same
        /// tokens, slower; for comparison).
        #[arg(long)]
        no_cache: bool,
    },
    /// Serve a trained run over HTTP: OpenAI-compatible POST /v1/completions and POST
    /// /v1/chat/completions (streaming with "stream": true), GET /v1/models, POST /v1/normalize
    /// for pairs runs, GET /health, GET /metrics.
    Serve {
        #[arg(long, value_name = "RUN_DIR")]
        checkpoint: PathBuf,
        /// Address to listen on (localhost only unless told otherwise).
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// 0 picks a free port (printed).
        #[arg(long, default_value_t = 8000)]
        port: u16,
        /// Requests decoded together in one batch.
        #[arg(long, default_value_t = 16)]
        max_batch: usize,
        /// Requests waiting for the batch before new ones are refused with 503.
        #[arg(long, default_value_t = 64)]
        queue: usize,
        /// Seconds the requests in flight may take to finish after SIGINT/SIGTERM (a second
        /// signal stops at once).
        #[arg(long, default_value_t = 10.0)]
        shutdown_grace: f64,
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
    /// Write the HTML/markdown report (and PNG/SVG figures) of a sweep or run directory; one
    /// on a tracking server (`run.track`) also sends the report there.
    Report { dir: PathBuf },
    /// Send a run or sweep directory to a tracking server (an MLflow server's REST API): what
    /// it does not have yet — a whole run trained without `run.track`, or the rest of one whose
    /// server went away. A sweep becomes a parent run with its runs as children.
    Track {
        dir: PathBuf,
        /// The server, e.g. `mlflow:http://127.0.0.1:5000` (default: the run's `run.track`).
        #[arg(long)]
        to: Option<String>,
    },
    /// The built-in study: 8 recipes × 5 learning rates on a small deep model on the built-in
    /// corpus, reseeded at each recipe's best rate, then the report (≈9 min on 2 cores);
    /// `--full`: configs/sweeps/compare-full.toml, KiteNorm Fig. 1's protocol.
    Compare {
        /// Recipes to compare instead of the study's (presets or names), e.g.
        /// `--recipes rezero,layerscale,hybridnorm,softcap`.
        #[arg(long, value_delimiter = ',')]
        recipes: Vec<String>,
        #[command(flatten)]
        study: StudyArgs,
    },
    /// The Normalization chapter's build: Pre-LN, Post-LN and Peri-LN (or `--recipes`) trained on
    /// generated English text-normalisation pairs over a small learning-rate grid, scored with
    /// exact match and token F1 on generated and real held-out pairs, with gradient-norm CV per
    /// block and per sublayer, sample outputs and findings (≈11 min on 2 cores).
    Textnorm {
        /// Recipes to compare (presets or names), e.g. `--recipes pre,peri,kitenorm`.
        #[arg(long, value_delimiter = ',')]
        recipes: Vec<String>,
        #[command(flatten)]
        study: StudyArgs,
    },
    /// How the answer changes with scale (KiteNorm Fig. 4): a ladder over depth, width, budget
    /// or batch with a learning-rate grid at every point, then DIR/scaling.json (fitted laws
    /// L = E + A·x^(−α), LR* and gaps per point) and the report.
    Scaling(commands::sweep::ScalingArgs),
    /// The papers' experiments as named studies: without a name, every one with its figure,
    /// claim, miniature command and time, and paper-scale command; with a name, runs that study
    /// (its CPU miniature, or `--full` at paper scale) and writes its report.
    Studies {
        /// The study to run (`normlab studies` lists them).
        name: Option<String>,
        #[command(flatten)]
        study: StudyArgs,
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
    /// fine-tunes and `perplexity`/`generate`/`probe` read; `--recipe` changes the norm placement.
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
    /// Write a run as a checkpoint directory `transformers` and lm-evaluation-harness load: in a
    /// family's own layout where the recipe has one (pre-norm RMSNorm Llama/Qwen, OLMo 2), else
    /// with its own modeling_normlab.py.
    Export {
        /// The run directory (its final weights, else its latest checkpoint).
        run_dir: PathBuf,
        /// The directory to write (config.json, model.safetensors, tokenizer.json and the
        /// tokenizer's config, with the chat template of a run trained on conversations); new
        /// or empty, never a run directory. A LoRA run is written merged.
        #[arg(long, required_unless_present = "peft", conflicts_with = "peft")]
        hf: Option<PathBuf>,
        /// A LoRA run's adapters as a peft adapter directory (adapter_config.json,
        /// adapter_model.safetensors) whose base_model_name_or_path is the parent run's --hf
        /// export: --base, else the parent exported into PEFT/base.
        #[arg(long)]
        peft: Option<PathBuf>,
        /// With --peft: the parent run's --hf export, named as the adapter's base.
        #[arg(long, requires = "peft")]
        base: Option<PathBuf>,
        /// Write into a directory that already holds files (replacing the files an export
        /// writes there).
        #[arg(long)]
        force: bool,
    },
    /// Benchmarks, each beside its reference tool in the same invocation: `model` (the
    /// reference or Table-1 model per recipe, CPU or GPU, beside PyTorch), `gemm`,
    /// `allreduce`, `serve`, `data`, `speed`, `speed-table`.
    Bench {
        #[command(subcommand)]
        cmd: normlab::commands::bench::BenchCmd,
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
    /// Unpack the shipped corpora into the cache (the State of the Union addresses and the
    /// real held-out text-normalisation pairs; done on first use anyway) and say where they are.
    Fetch,
    /// Prepare (fetch, split, tokenize, cache) a config's data and print its summary.
    Stats {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Tokenize a corpus once into token shards (parallel, bounded memory, resumable after a
    /// kill, byte-identical for the same input and settings); train on it with
    /// `--set data.corpus=OUT`. Reads parquet, JSON lines and arrays (plain, .gz, .zst), text,
    /// as a file, a directory or a glob.
    Prepare {
        /// The corpus: a file, a directory or a quoted glob (`'fineweb/*.parquet'`).
        corpus: String,
        /// The directory the shards and `manifest.json` go to (new, empty, or an unfinished
        /// preparation of the same settings, which continues).
        #[arg(long)]
        out: PathBuf,
        /// Run config whose `[data]` section gives the defaults (tokenizer, text field, split).
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// `byte`, `bpe` (trained on the first `data.bpe_sample_bytes` of training text) or `gpt2`.
        #[arg(long)]
        tokenizer: Option<String>,
        /// A Hugging Face `tokenizer.json` to tokenize with instead (copied into OUT, where
        /// training on OUT finds it).
        #[arg(long, conflicts_with = "tokenizer")]
        tokenizer_file: Option<PathBuf>,
        /// The JSON field or parquet column holding the text.
        #[arg(long)]
        text_field: Option<String>,
        /// Training tokens per shard (memory: about 6 bytes per token).
        #[arg(long)]
        shard_tokens: Option<usize>,
        /// `normlab` (checksummed), `nanogpt` (nanoGPT / modded-nanogpt `.bin`) or `npy` (numpy).
        #[arg(long, value_enum, default_value = "normlab")]
        shard_format: normlab::data::shards::ShardFormat,
    },
}

fn main() {
    commands::process::serve_as_worker_or_enable();
    let cli = Cli::parse();
    let keeps_arenas = matches!(cli.cmd, Cmd::Data { cmd: DataCmd::Prepare { .. } } | Cmd::Serve { .. });
    commands::process::run(keeps_arenas, || run(cli))
}

fn data(cmd: DataCmd) -> anyhow::Result<()> {
    match cmd {
        DataCmd::Fetch => commands::data::data_fetch(),
        DataCmd::Stats { config, sets } => commands::data::data_stats(config, sets),
        DataCmd::Prepare {
            corpus,
            out,
            config,
            mut sets,
            tokenizer,
            tokenizer_file,
            text_field,
            shard_tokens,
            shard_format,
        } => {
            let flags = [("data.tokenizer", tokenizer), ("data.text_field", text_field)];
            sets.extend(flags.into_iter().filter_map(|(k, v)| Some(format!("{k}={}", v?))));
            sets.extend(shard_tokens.map(|n| format!("data.shard_tokens={n}")));
            let how = commands::data::Prepare { format: shard_format, tokenizer_file };
            commands::data::data_prepare(&corpus, &out, config, sets, how)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.cmd {
        c @ (Cmd::Train { .. }
        | Cmd::Finetune { .. }
        | Cmd::Perplexity { .. }
        | Cmd::Evaluate { .. }
        | Cmd::Generate { .. }
        | Cmd::Probe { .. }) => one_run(c),
        c @ (Cmd::Sweep { .. }
        | Cmd::Report { .. }
        | Cmd::Compare { .. }
        | Cmd::Textnorm { .. }
        | Cmd::Scaling(_)
        | Cmd::Studies { .. }) => many_runs(c),
        Cmd::Data { cmd } => data(cmd).map(|()| 0),
        Cmd::Track { dir, to } => commands::track::track(&dir, to.as_deref()),
        Cmd::Import { hf_dir, out, recipe, sets, force } => {
            commands::hf::import(&hf_dir, &out, recipe.as_deref(), &sets, force).map(|()| 0)
        }
        Cmd::Serve { checkpoint, host, port, max_batch, queue, shutdown_grace } => {
            commands::serve::serve_command(checkpoint, host, port, max_batch, queue, shutdown_grace)
        }
        Cmd::Export { run_dir, hf, peft, base, force } => {
            commands::hf::export_command(&run_dir, hf.as_deref(), peft.as_deref(), base.as_deref(), force).map(|()| 0)
        }
        Cmd::Recipes { name, config, layers, d_model } => {
            commands::recipes::recipes(name, config, layers, d_model).map(|()| 0)
        }
        Cmd::Bench { cmd } => commands::bench::run(cmd),
    }
}

/// The commands on one run: training it, and evaluating, sampling or probing it once saved.
fn one_run(cmd: Cmd) -> anyhow::Result<i32> {
    match cmd {
        Cmd::Train { config, sets, resume, quiet, force, allow_corpus_change, allow_lost_records } => {
            let how = commands::train::TrainHow {
                quiet,
                force,
                resume: normlab::train::ResumeOptions { allow_corpus_change, allow_lost_records },
            };
            commands::train::train(config, sets, resume, how)
        }
        Cmd::Finetune { checkpoint, data, config, sets, quiet, force } => {
            commands::finetune::finetune(commands::finetune::FinetuneArgs {
                checkpoint,
                data,
                config,
                sets,
                quiet,
                force,
            })
        }
        Cmd::Perplexity { checkpoint, data, windows } => {
            commands::perplexity::perplexity(&checkpoint, data, windows).map(|()| 0)
        }
        Cmd::Evaluate { checkpoint, tasks, config, limit, num_fewshot, fewshot_seed, samples, out } => {
            let a = commands::evaluate::EvaluateArgs {
                checkpoint,
                tasks,
                config,
                limit,
                num_fewshot,
                fewshot_seed,
                samples,
                out,
            };
            commands::evaluate::evaluate_command(a).map(|()| 0)
        }
        Cmd::Generate { checkpoint, prompt, max_new_tokens, temperature, top_k, top_p, seed, no_cache } => {
            let sampling = Sampling { temperature, top_k: Some(top_k), top_p };
            let opts = SampleOptions { max_new_tokens, sampling, seed };
            commands::generate::generate(&checkpoint, &prompt, opts, !no_cache).map(|()| 0)
        }
        Cmd::Probe { checkpoint, data, batches, init } => {
            commands::probe::probe(&checkpoint, data, batches, init).map(|()| 0)
        }
        _ => unreachable!("one_run is called with the one-run commands"),
    }
}

/// The commands on many runs: sweeps, their reports and the built-in studies.
fn many_runs(cmd: Cmd) -> anyhow::Result<i32> {
    match cmd {
        Cmd::Sweep { action: Some(a), .. } => match a {
            SweepCmd::Status { dir } => commands::sweep::sweep_status(&dir).map(|()| 0),
            SweepCmd::RunOne { dir, index } => commands::sweep::sweep_run_one(&dir, index),
            SweepCmd::NextStage { dir } => commands::sweep::sweep_next_stage(&dir).map(|()| 0),
        },
        Cmd::Sweep { action: None, config, sets, jobs, report, executor, detach, dry_run, rerun_changed } => {
            let submit = SubmitOptions { detach, dry_run };
            let how = commands::sweep::SweepHow { jobs, report, executor, submit, rerun_changed };
            commands::sweep::sweep(&config.unwrap_or_default(), &sets, how)
        }
        Cmd::Report { dir } => commands::sweep::report_command(&dir),
        Cmd::Compare { recipes, study } => commands::sweep::compare(&recipes, &study),
        Cmd::Textnorm { recipes, study } => commands::sweep::textnorm(&recipes, &study),
        Cmd::Scaling(args) => commands::sweep::scaling(args),
        Cmd::Studies { name, study } => commands::sweep::studies(name.as_deref(), &study),
        _ => unreachable!("many_runs is called with the many-run commands"),
    }
}
