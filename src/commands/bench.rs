//! `normlab bench`: one subcommand per benchmark, each with its own flags and its own JSON file
//! under `bench/`: `model` (the reference model or KiteNorm's Table-1 model per recipe,
//! precision and kernel setting beside its PyTorch twin), `gemm`, `allreduce`, `serve`,
//! `data`, `speed` and `speed-table`.

use crate::bench::{self, BenchOptions, Dims, DimsChoice};
use crate::device::DeviceName;
use crate::kernels::{Kernels, Precision};
use anyhow::ensure;
use std::path::PathBuf;

/// The benchmarks.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// The reference model (or `--dims table1`, KiteNorm's Table-1 model) per recipe, kernel
    /// setting and precision: forward and train tokens/s, peak memory, MFU on a GPU, beside
    /// the PyTorch twin run in the same invocation (default bench/model.json).
    Model(ModelArgs),
    /// Where a train step's time goes on a device: the step, then each piece alone at the
    /// model's shapes (matmuls by shape, attention's core, norms, the sublayers' elementwise
    /// work, the loss head, AdamW, gradient norms, the host synchronisations, the probe pass),
    /// each as time per step and TFLOP/s or GB/s against a large GEMM and a large elementwise
    /// pass measured in the same invocation (through PyTorch too with --torch-python)
    /// (default bench/profile.json).
    Profile(ProfileArgs),
    /// `pre`'s training losses beside PyTorch's (tools/torch_gpu.py) from the same initial
    /// weights on the same batch, held against the precision's tolerance (default
    /// bench/curve.json).
    Curve(CurveArgs),
    /// Each f32 matmul of a reference-model train step (forward, dX, dW, attention) in burn's
    /// CPU backend and, with --torch-python, in PyTorch (default bench/gemm.json).
    Gemm(GemmArgs),
    /// The gradient all-reduce of a data-parallel run beside one blocking MPI_Allreduce, 4 KiB
    /// to 64 MiB, under `mpirun -np N` (default bench/allreduce.json).
    Allreduce(AllreduceArgs),
    /// Request latency of `normlab serve` on a run at each of `--clients` concurrent clients
    /// (default bench/serve.json).
    Serve(ServeArgs),
    /// How fast a corpus becomes tokens: `normlab data prepare` on a generated corpus beside
    /// the Hugging Face `tokenizers` package, then the loader against a training step
    /// (default bench/data.json; needs `pip install tokenizers pyarrow zstandard`).
    Data(DataArgs),
    /// A recipe's train step under each optimizer (`optim.name`) beside AdamW's, in interleaved
    /// rounds (default bench/optimizers.json).
    Optimizers(OptimizersArgs),
    /// The BHyT paper's efficiency protocol (§4.3, Table 3 / 8, Table 5): train, forward and
    /// generation tokens/s in interleaved rounds, each ratio beside the paper's (default
    /// bench/speed.json).
    Speed(SpeedArgs),
    /// The table of a `bench speed` result file, its claims computed again from its
    /// measurements.
    SpeedTable {
        /// A `bench/speed.json` file.
        file: PathBuf,
    },
}

/// Warm-up and timed steps.
#[derive(clap::Args, Debug)]
pub struct Steps {
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed steps (≥ 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: u64,
}

/// The model and where it runs.
#[derive(clap::Args, Debug)]
pub struct ModelChoice {
    /// `cpu`, or `wgpu` / `vulkan` / `cuda:N` when built with those features.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceName,
    /// `reference` (the CPU reference model, 8 × 256), `table1` (KiteNorm Table 1: V 50257,
    /// d 512, 12 layers, GLU 1536, micro-batch 4 × 2048), `speed` (the BHyT paper's Llama-3.2
    /// ratios at CPU size), `llama1b` or `llama3b` (the BHyT paper's models), `tiny` (d 32, 2
    /// layers, 2 × 32: a smoke test).
    #[arg(long, value_enum)]
    pub dims: Option<DimsChoice>,
    /// Override the dims' batch size (sequences).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Override the dims' sequence length.
    #[arg(long)]
    pub seq: Option<usize>,
}

#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// Recipes to measure (default: all presets; `pre` uses RMSNorm like the PyTorch script).
    #[arg(long, value_delimiter = ',')]
    pub recipes: Vec<String>,
    #[command(flatten)]
    pub model: ModelChoice,
    #[command(flatten)]
    pub steps: Steps,
    /// Timed forwards (≥ 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub fwd_steps: u64,
    /// Precisions to measure each recipe in (`train.precision`): f32, bf16, f16.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "f32")]
    pub precision: Vec<Precision>,
    /// Kernel settings to measure each recipe with (`model.kernels`): the fused kernels and
    /// the composite reference side by side by default.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fused,composite")]
    pub kernels: Vec<Kernels>,
    /// Also run the PyTorch twin with this Python, in the same invocation, for ratios:
    /// `--torch-script` on the CPU, `--torch-gpu-script` (f32 and bf16 autocast) on a GPU.
    #[arg(long)]
    pub torch_python: Option<String>,
    #[arg(long, default_value = "tools/torch_reference.py")]
    pub torch_script: String,
    #[arg(long, default_value = "tools/torch_gpu.py")]
    pub torch_gpu_script: String,
    /// Also time this many steps of the full training loop (`normlab train`) on the reference
    /// model with `pre`, on the built-in corpus.
    #[arg(long, default_value_t = 0)]
    pub trainer_steps: usize,
    /// With --torch-python on the CPU: measure `pre` (fused) and PyTorch back to back this
    /// many times in all and report the median of the per-round ratios.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
    /// Write the JSON results here (atomically; default bench/model.json).
    #[arg(long, default_value = "bench/model.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ProfileArgs {
    /// The recipe to profile.
    #[arg(long, default_value = "pre")]
    pub recipe: String,
    #[command(flatten)]
    pub model: ModelChoice,
    #[command(flatten)]
    pub steps: Steps,
    /// `train.precision`: f32, bf16, f16.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// `model.kernels`.
    #[arg(long, value_enum, default_value = "fused")]
    pub kernels: Kernels,
    /// `probe.every`: the probe pass's share of a step is its time over this.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_every: u64,
    /// The ceilings' GEMM size n (n³ product; default 4096 on a GPU, 1024 on the CPU).
    #[arg(long)]
    pub ceiling_gemm: Option<usize>,
    /// The ceilings' elementwise pass length in values (default 2²⁸ on a GPU, 2²⁵ on the CPU).
    #[arg(long)]
    pub ceiling_len: Option<usize>,
    /// Also measure the ceilings through PyTorch with this Python (cuBLAS on CUDA).
    #[arg(long)]
    pub torch_python: Option<String>,
    #[arg(long, default_value = "tools/torch_ceilings.py")]
    pub torch_script: String,
    /// Write the JSON results here (atomically; default bench/profile.json).
    #[arg(long, default_value = "bench/profile.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct CurveArgs {
    #[command(flatten)]
    pub model: ModelChoice,
    /// `train.precision`: f32 or bf16 (PyTorch's twin: f32, or bf16 autocast).
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// `model.kernels`.
    #[arg(long, value_enum, default_value = "fused")]
    pub kernels: Kernels,
    /// Training steps on each side (≥ 1).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: u64,
    /// PyTorch's Python (its `torch` on CUDA beside a `cuda` device, else on the CPU).
    #[arg(long, default_value = "python3")]
    pub torch_python: String,
    #[arg(long, default_value = "tools/torch_gpu.py")]
    pub torch_script: String,
    /// Write the JSON results here (atomically; default bench/curve.json).
    #[arg(long, default_value = "bench/curve.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct GemmArgs {
    #[command(flatten)]
    pub steps: Steps,
    /// Also time each matmul in PyTorch with this Python.
    #[arg(long)]
    pub torch_python: Option<String>,
    #[arg(long, default_value = "tools/torch_gemm.py")]
    pub torch_script: String,
    #[arg(long, default_value = "bench/gemm.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct AllreduceArgs {
    /// Untimed rounds, then timed rounds, per size.
    #[command(flatten)]
    pub steps: Steps,
    #[arg(long, default_value = "bench/allreduce.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The run to serve.
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// The loads (fixed: short prompts or the pairs task form; mixed: 8–512-token prompts
    /// arriving staggered; loglik: lm-eval's echo/logprobs requests of four choices).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fixed,mixed,loglik")]
    pub loads: Vec<crate::bench::serve_load::LoadKind>,
    /// Measure the server already listening at this URL (e.g. another normlab binary's)
    /// instead of starting one.
    #[arg(long)]
    pub url: Option<String>,
    /// Concurrent clients per level.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub clients: Vec<usize>,
    /// Requests per level.
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
    /// Tokens per completion on a run that is not a pairs run.
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
    /// The server's --max-batch.
    #[arg(long, default_value_t = 16)]
    pub max_batch: usize,
    #[arg(long, default_value = "bench/serve.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct DataArgs {
    /// Where the corpus, tokenizer and shards go (default CACHE/bench-data).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Gigabytes of text to generate (> 0).
    #[arg(long, default_value_t = 1.0)]
    pub gb: f64,
    /// Interleaved rounds of normlab and `tokenizers` (medians are reported).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
    /// The Python with `tokenizers`, `pyarrow` and `zstandard`.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Training steps timed on the prepared shards.
    #[arg(long, default_value_t = 0)]
    pub trainer_steps: usize,
    #[arg(long, default_value = "bench/data.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct OptimizersArgs {
    /// The recipe (default `pre`).
    #[arg(long, default_value = "pre")]
    pub recipe: String,
    /// Optimizers to time beside AdamW (default: all).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "muon,normuon,lion,adamh,muonh")]
    pub optimizers: Vec<crate::run::optim::OptimizerName>,
    #[command(flatten)]
    pub model: ModelChoice,
    /// Rounds; each times every optimizer once.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
    /// Timed train steps per optimizer and round (after one untimed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub round_steps: u64,
    #[arg(long, default_value = "bench/optimizers.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct SpeedArgs {
    /// Recipes (default: RMSNorm pre-norm, Peri-LN, LNS, DyT, BHyT*, BHyT, RMSNorm-Approx).
    #[arg(long, value_delimiter = ',')]
    pub recipes: Vec<String>,
    #[command(flatten)]
    pub model: ModelChoice,
    /// The precision (`train.precision`): f32, bf16 or f16.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Rounds, each one generation trial per length (the paper's five trials).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub trials: u64,
    /// Timed train steps and forwards per recipe and round (after one untimed).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub round_steps: u64,
    /// Prompt tokens (the paper's 512).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub prompt: u64,
    /// New tokens per generation (the paper's 128, 512 and 1024), each ≥ 1.
    #[arg(long, value_delimiter = ',', default_value = "128,512,1024")]
    pub new_tokens: Vec<usize>,
    #[arg(long, default_value = "bench/speed.json")]
    pub out: PathBuf,
}

/// Runs the benchmark and writes its JSON.
pub fn run(cmd: BenchCmd) -> anyhow::Result<i32> {
    match cmd {
        BenchCmd::Model(a) => model(a),
        BenchCmd::Profile(a) => profile(a),
        BenchCmd::Curve(a) => curve(a),
        BenchCmd::Gemm(a) => {
            let torch = a.torch_python.as_deref().map(|py| (py, a.torch_script.as_str()));
            bench::gemm::write(torch, a.steps.warmup, a.steps.steps as usize, &a.out).map(|_| 0)
        }
        BenchCmd::Allreduce(a) => allreduce(&a),
        BenchCmd::Serve(a) => serve(a),
        BenchCmd::Data(a) => data(a),
        BenchCmd::Speed(a) => speed(a),
        BenchCmd::Optimizers(a) => optimizers(a),
        BenchCmd::SpeedTable { file } => {
            outln!("{}", crate::bench::speed::table(&crate::bench::speed::read(&file)?));
            Ok(0)
        }
    }
}

fn dims(m: &ModelChoice, default: DimsChoice) -> anyhow::Result<Dims> {
    Dims::of(m.dims.unwrap_or(default), m.batch, m.seq)
}

/// `bench model`.
fn model(a: ModelArgs) -> anyhow::Result<i32> {
    let script = if a.model.device.is_cpu() { a.torch_script } else { a.torch_gpu_script };
    let opts = BenchOptions {
        recipes: a.recipes,
        warmup: a.steps.warmup,
        steps: a.steps.steps as usize,
        fwd_steps: a.fwd_steps as usize,
        device: a.model.device,
        dims: dims(&a.model, DimsChoice::default())?,
        precisions: a.precision,
        torch: a.torch_python.map(|py| (py, script)),
        trainer_steps: a.trainer_steps,
        out: a.out,
        kernels: a.kernels,
        rounds: a.rounds as usize,
    };
    bench::run(&opts).map(|_| 0)
}

/// `bench profile`.
fn profile(a: ProfileArgs) -> anyhow::Result<i32> {
    use bench::ceilings::CeilingSizes;
    let default = CeilingSizes::for_device(!a.model.device.is_cpu());
    let sizes = CeilingSizes {
        gemm_n: a.ceiling_gemm.unwrap_or(default.gemm_n),
        copy_len: a.ceiling_len.unwrap_or(default.copy_len),
    };
    ensure!(sizes.gemm_n > 0 && sizes.copy_len > 0, "--ceiling-gemm and --ceiling-len must be > 0");
    let o = bench::profile::ProfileOptions {
        device: a.model.device,
        dims: dims(&a.model, DimsChoice::default())?,
        recipe: a.recipe,
        kernels: a.kernels,
        precision: a.precision,
        warmup: a.steps.warmup,
        steps: a.steps.steps as usize,
        probe_every: a.probe_every as usize,
        ceiling_sizes: sizes,
        torch: a.torch_python.map(|py| (py, a.torch_script)),
        out: a.out,
    };
    let r = bench::profile::run(&o)?;
    outln!("{}", bench::profile::table(&r));
    Ok(0)
}

/// `bench curve`.
fn curve(a: CurveArgs) -> anyhow::Result<i32> {
    let o = bench::curve::CurveOptions {
        device: a.model.device,
        dims: dims(&a.model, DimsChoice::default())?,
        kernels: a.kernels,
        precision: a.precision,
        steps: a.steps as usize,
        torch: (a.torch_python, a.torch_script),
        out: a.out,
    };
    let r = bench::curve::run(&o)?;
    outln!("{}", bench::curve::table(&r));
    Ok(0)
}

/// `bench optimizers`.
fn optimizers(a: OptimizersArgs) -> anyhow::Result<i32> {
    let o = crate::bench::optimizers::OptimizerBenchOptions {
        recipe: a.recipe,
        optimizers: a.optimizers,
        dims: dims(&a.model, DimsChoice::default())?,
        device: a.model.device.open(&crate::bench::kernel_cache())?,
        device_name: a.model.device.to_string(),
        rounds: a.rounds as usize,
        steps: a.round_steps as usize,
        out: a.out,
    };
    let r = crate::bench::optimizers::run(&o)?;
    outln!("{}", crate::bench::optimizers::table(&r));
    errln!("wrote {}", o.out.display());
    Ok(0)
}

/// `bench serve`.
fn serve(a: ServeArgs) -> anyhow::Result<i32> {
    let o = crate::bench::serve::ServeBenchOptions {
        run: a.run,
        loads: a.loads,
        url: a.url,
        clients: a.clients,
        requests: a.requests,
        max_tokens: a.max_tokens,
        max_batch: a.max_batch,
        out: a.out,
    };
    let r = crate::bench::serve::run(&o)?;
    outln!("{}", crate::bench::serve::table(&r));
    errln!("wrote {}", o.out.display());
    Ok(0)
}

/// `bench allreduce`: measured on every rank, printed and written by rank 0.
fn allreduce(a: &AllreduceArgs) -> anyhow::Result<i32> {
    let job = crate::dist::Job::start()?;
    let ranks = job.ranks();
    let r = crate::bench::allreduce::run(ranks, a.steps.warmup, a.steps.steps as usize, &a.out)
        .map(Some)
        .or_else(|e| ranks.fail(e).map(|_| None))?;
    if let (Some(r), true) = (r, ranks.is_writer()) {
        outln!("all-reduce over {} ranks (median of {} rounds; MB/s per rank)", r.ranks, r.rounds);
        outln!("{:>10} {:>12} {:>12} {:>12} {:>8}", "bytes", "normlab MB/s", "bus MB/s", "MPI MB/s", "time ×");
        for s in &r.sizes {
            outln!(
                "{:>10} {:>12.0} {:>12.0} {:>12.0} {:>8.2}",
                s.bytes,
                s.normlab_mb_s,
                s.normlab_bus_mb_s,
                s.mpi_mb_s,
                s.ratio
            );
        }
        errln!("wrote {}", a.out.display());
    }
    Ok(0)
}

/// `bench speed`: the BHyT paper's efficiency protocol (bench/speed.json).
fn speed(a: SpeedArgs) -> anyhow::Result<i32> {
    let recipes = match a.recipes.is_empty() {
        true => crate::bench::speed::RECIPES.iter().map(|s| s.to_string()).collect(),
        false => a.recipes,
    };
    ensure!(
        !a.new_tokens.is_empty() && a.new_tokens.iter().all(|&n| n >= 1),
        "--new-tokens must list generation lengths of at least 1 token (e.g. 128,512,1024)"
    );
    let o = crate::bench::speed::SpeedOptions {
        recipes,
        dims: dims(&a.model, DimsChoice::Speed)?,
        device: a.model.device,
        precision: a.precision,
        rounds: a.trials as usize,
        steps: a.round_steps as usize,
        prompt: a.prompt as usize,
        new_tokens: a.new_tokens,
        out: a.out,
    };
    let r = crate::bench::speed::run(&o)?;
    outln!("{}", crate::bench::speed::table(&r));
    errln!("wrote {}", o.out.display());
    Ok(0)
}

/// `bench data`: the tokenizing benchmark (bench/data.json).
fn data(a: DataArgs) -> anyhow::Result<i32> {
    ensure!(a.gb.is_finite() && a.gb > 0.0, "--gb must be a positive number of gigabytes (got {})", a.gb);
    let o = crate::bench::data::DataBenchOptions {
        dir: a.dir.unwrap_or_else(|| crate::data::cache::default_dir().join("bench-data")),
        gb: a.gb,
        rounds: a.rounds as usize,
        python: a.python,
        out: a.out,
        trainer_steps: a.trainer_steps,
    };
    let r = crate::bench::data::run(&o)?;
    outln!("{}", crate::bench::data::table(&r));
    errln!("wrote {}", o.out.display());
    Ok(0)
}
