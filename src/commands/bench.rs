//! `normlab bench`: the reference model (or KiteNorm's Table-1 model) per recipe, precision
//! and kernel setting beside its PyTorch twin, or (`--gemm`) each matmul of a train step.

use crate::bench::{self, BenchDevice, BenchOptions, Dims, DimsChoice};
use crate::kernels::{Kernels, Precision};
use std::path::PathBuf;

/// The flags of `normlab bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Recipes to measure (default: all presets; `pre` uses RMSNorm like the PyTorch script).
    #[arg(long, value_delimiter = ',')]
    pub recipes: Vec<String>,
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    #[arg(long, default_value_t = 10)]
    pub fwd_steps: usize,
    /// Write the JSON results here (atomically; default bench/model.json, with --gemm
    /// bench/gemm.json).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// `cpu`, or `wgpu` / `vulkan` / `cuda` when built with those features.
    #[arg(long, value_enum, default_value_t = BenchDevice::Cpu)]
    pub device: BenchDevice,
    /// `reference` (the CPU reference model, 8 × 256; the default), `table1` (KiteNorm Table 1:
    /// V 50257, d 512, 12 layers, GLU 1536, micro-batch 4 × 2048), `speed` (the BHyT paper's
    /// Llama-3.2 ratios at CPU size; `--speed`'s default), `llama1b` or `llama3b` (the BHyT
    /// paper's models).
    #[arg(long, value_enum)]
    pub dims: Option<DimsChoice>,
    /// Override the dims' batch size (sequences).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Override the dims' sequence length.
    #[arg(long)]
    pub seq: Option<usize>,
    /// Precisions to measure each recipe in (`train.precision`): f32, bf16, f16.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "f32")]
    pub precision: Vec<Precision>,
    /// Also run the PyTorch twin with this Python, in the same invocation, for ratios:
    /// `--torch-script` on the CPU, `--torch-gpu-script` (f32 and bf16 autocast) on a GPU.
    #[arg(long)]
    pub torch_python: Option<String>,
    /// Default tools/torch_reference.py; with --gemm, tools/torch_gemm.py.
    #[arg(long)]
    pub torch_script: Option<String>,
    #[arg(long, default_value = "tools/torch_gpu.py")]
    pub torch_gpu_script: String,
    /// Also time this many steps of the full training loop (`normlab train`) on the
    /// reference model with `pre`, on the built-in corpus.
    #[arg(long, default_value_t = 0)]
    pub trainer_steps: usize,
    /// Kernel settings to measure each recipe with (`model.kernels`): the fused kernels and
    /// the composite reference side by side by default.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fused,composite")]
    pub kernels: Vec<Kernels>,
    /// Instead of the model: each f32 matmul of a reference-model train step (forward, dX,
    /// dW, attention) in burn's CPU backend and, with --torch-python, in PyTorch.
    #[arg(long)]
    pub gemm: bool,
    /// With --torch-python on the CPU: measure `pre` (fused) and PyTorch back to back this
    /// many times in all and report the median of the per-round ratios (the machine's speed
    /// drifts between two measurements a minute apart).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Instead of the model: the gradient all-reduce of a data-parallel run beside one blocking
    /// MPI_Allreduce, 4 KiB to 64 MiB, under `mpirun -np N` (default bench/allreduce.json;
    /// `--steps` rounds per size).
    #[arg(long)]
    pub allreduce: bool,
    /// Instead of the model: request latency of `normlab serve` on this run at each of
    /// `--clients` concurrent clients (default bench/serve.json).
    #[arg(long, value_name = "RUN_DIR")]
    pub serve: Option<PathBuf>,
    /// With --serve: the loads (fixed: short prompts or the pairs task form; mixed: 8–512-token
    /// prompts arriving staggered; loglik: lm-eval's echo/logprobs requests of four choices).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fixed,mixed,loglik")]
    pub loads: Vec<crate::bench::serve_load::LoadKind>,
    /// With --serve: measure the server already listening at this URL (e.g. another normlab
    /// binary's) instead of starting one.
    #[arg(long)]
    pub url: Option<String>,
    /// With --serve: concurrent clients per level.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub clients: Vec<usize>,
    /// With --serve: requests per level.
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
    /// With --serve on a run that is not a pairs run: tokens per completion.
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
    /// With --serve: the server's --max-batch.
    #[arg(long, default_value_t = 16)]
    pub max_batch: usize,
    /// Instead of the model: how fast a corpus becomes tokens. `normlab data prepare` on a
    /// generated corpus (parquet and .jsonl.zst, `--data-gb` of text) beside the Hugging Face
    /// `tokenizers` package's `encode_batch` (same tokenizer.json, same threads), `--rounds`
    /// interleaved; then the loader's time per batch against a training step on the shards
    /// (`--trainer-steps`). Default bench/data.json. Needs `pip install tokenizers pyarrow
    /// zstandard`.
    #[arg(long)]
    pub data: bool,
    /// With --data: where the corpus, tokenizer and shards go (default CACHE/bench-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// With --data: gigabytes of text to generate.
    #[arg(long, default_value_t = 1.0)]
    pub data_gb: f64,
    /// Instead of the model table: the BHyT paper's efficiency protocol (§4.3, Table 3 / 8,
    /// Table 5) on its recipes (RMSNorm pre-norm, Peri-LN, LNS, DyT, BHyT*, BHyT,
    /// RMSNorm-Approx, or --recipes): train, forward and generation tokens/s in interleaved
    /// rounds, each ratio beside the paper's (default bench/speed.json).
    #[arg(long)]
    pub speed: bool,
    /// With --speed: rounds, each one generation trial per length (the paper's five trials).
    #[arg(long, default_value_t = 5)]
    pub trials: usize,
    /// With --speed: timed train steps and forwards per recipe and round (after one untimed).
    #[arg(long, default_value_t = 2)]
    pub round_steps: usize,
    /// With --speed: prompt tokens (the paper's 512).
    #[arg(long, default_value_t = 512)]
    pub prompt: usize,
    /// With --speed: new tokens per generation (the paper's 128, 512 and 1024).
    #[arg(long, value_delimiter = ',', default_value = "128,512,1024")]
    pub new_tokens: Vec<usize>,
    /// Instead of measuring: print the table of a `bench --speed` result file, its claims
    /// computed again from its measurements.
    #[arg(long, value_name = "FILE")]
    pub speed_table: Option<PathBuf>,
}

/// Runs the benchmark the flags describe and writes its JSON.
pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    if a.allreduce {
        return allreduce(&a);
    }
    if a.data {
        return data(a);
    }
    if a.speed || a.speed_table.is_some() {
        return speed(a);
    }
    if let Some(run) = a.serve {
        let o = crate::bench::serve::ServeBenchOptions {
            run,
            loads: a.loads,
            url: a.url,
            clients: a.clients,
            requests: a.requests,
            max_tokens: a.max_tokens,
            max_batch: a.max_batch,
            out: a.out.unwrap_or_else(|| "bench/serve.json".into()),
        };
        let r = crate::bench::serve::run(&o)?;
        outln!("{}", crate::bench::serve::table(&r));
        errln!("wrote {}", o.out.display());
        return Ok(0);
    }
    if a.gemm {
        let out = a.out.unwrap_or_else(|| "bench/gemm.json".into());
        let script = a.torch_script.unwrap_or_else(|| "tools/torch_gemm.py".into());
        let torch = a.torch_python.as_deref().map(|py| (py, script.as_str()));
        return bench::gemm::write(torch, a.warmup, a.steps, &out).map(|_| 0);
    }
    let script = match a.device.is_gpu() {
        true => a.torch_gpu_script,
        false => a.torch_script.unwrap_or_else(|| "tools/torch_reference.py".into()),
    };
    let opts = BenchOptions {
        recipes: a.recipes,
        warmup: a.warmup,
        steps: a.steps,
        fwd_steps: a.fwd_steps,
        device: a.device,
        dims: Dims::of(a.dims.unwrap_or_default(), a.batch, a.seq)?,
        precisions: a.precision,
        torch: a.torch_python.map(|py| (py, script)),
        trainer_steps: a.trainer_steps,
        out: a.out.unwrap_or_else(|| "bench/model.json".into()),
        kernels: a.kernels,
        rounds: a.rounds,
    };
    bench::run(&opts).map(|_| 0)
}

/// `--allreduce`: measured on every rank, printed and written by rank 0.
fn allreduce(a: &BenchArgs) -> anyhow::Result<i32> {
    let job = crate::dist::Job::start()?;
    let ranks = job.ranks();
    let out = a.out.clone().unwrap_or_else(|| "bench/allreduce.json".into());
    let r = crate::bench::allreduce::run(ranks, a.warmup, a.steps, &out)
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
        errln!("wrote {}", out.display());
    }
    Ok(0)
}

/// `normlab bench --speed`: the BHyT paper's efficiency protocol (bench/speed.json).
fn speed(a: BenchArgs) -> anyhow::Result<i32> {
    if let Some(path) = &a.speed_table {
        outln!("{}", crate::bench::speed::table(&crate::bench::speed::read(path)?));
        return Ok(0);
    }
    let recipes = match a.recipes.is_empty() {
        true => crate::bench::speed::RECIPES.iter().map(|s| s.to_string()).collect(),
        false => a.recipes,
    };
    anyhow::ensure!(a.precision.len() == 1, "--speed measures one precision at a time: give one --precision");
    let o = crate::bench::speed::SpeedOptions {
        recipes,
        dims: Dims::of(a.dims.unwrap_or(DimsChoice::Speed), a.batch, a.seq)?,
        device_name: a.device.name().into(),
        precision: a.precision[0],
        rounds: a.trials,
        steps: a.round_steps,
        prompt: a.prompt,
        new_tokens: a.new_tokens,
        out: a.out.unwrap_or_else(|| "bench/speed.json".into()),
    };
    let r = crate::bench::speed::run(&o)?;
    outln!("{}", crate::bench::speed::table(&r));
    errln!("wrote {}", o.out.display());
    Ok(0)
}

/// `normlab bench --data`: the tokenizing benchmark (bench/data.json).
fn data(a: BenchArgs) -> anyhow::Result<i32> {
    let o = crate::bench::data::DataBenchOptions {
        dir: a.data_dir.unwrap_or_else(|| crate::data::cache::default_dir().join("bench-data")),
        gb: a.data_gb,
        rounds: a.rounds.max(1),
        python: a.torch_python.unwrap_or_else(|| "python3".into()),
        out: a.out.unwrap_or_else(|| "bench/data.json".into()),
        trainer_steps: a.trainer_steps,
    };
    let r = crate::bench::data::run(&o)?;
    outln!("{}", crate::bench::data::table(&r));
    errln!("wrote {}", o.out.display());
    Ok(0)
}
