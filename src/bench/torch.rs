//! Running the PyTorch twins in the same invocation: `torch_reference.py` on the CPU (its fixed
//! reference model, `--threads`), `torch_gpu.py` on a CUDA GPU (sizes as flags, f32 or bf16
//! autocast). Each prints one JSON object on its last line (`RESULT {...}` for the GPU one).

use super::Dims;
use anyhow::Context;
use serde::{Deserialize, Serialize};

/// What a PyTorch script printed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchBench {
    pub train_tok_s: f64,
    pub fwd_tok_s: f64,
    /// The PyTorch process's peak resident memory (MB), measured by normlab when it waits for it.
    #[serde(default)]
    pub peak_rss_mb: Option<f64>,
    /// Everything else it reported (threads, torch version, dtype, `tflops_6N`, …).
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

const INSTALL: &str =
    "install it with: python3 -m venv ~/.venvs/torchref && ~/.venvs/torchref/bin/pip install torch numpy";

/// Runs `python script args…` and parses its last JSON object.
fn run_script(python: &str, script: &str, args: &[String]) -> anyhow::Result<TorchBench> {
    let mut bench: TorchBench = run_python(python, script, args, "")?;
    bench.peak_rss_mb = crate::device::children_peak_rss_mb();
    Ok(bench)
}

/// Runs `python script args…`; its last JSON object.
pub fn run_json<T: serde::de::DeserializeOwned>(python: &str, script: &str, args: &[String]) -> anyhow::Result<T> {
    run_python(python, script, args, "")
}

/// Runs `python script` with `input` on its standard input; its last JSON object.
pub fn run_with_input<T: serde::de::DeserializeOwned>(python: &str, script: &str, input: &str) -> anyhow::Result<T> {
    run_python(python, script, &[], input)
}

/// Runs `python script args…`, writes `input` to its standard input and parses the last JSON
/// object it printed; a failure reports its last line of standard error.
fn run_python<T: serde::de::DeserializeOwned>(
    python: &str,
    script: &str,
    args: &[String],
    input: &str,
) -> anyhow::Result<T> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run `{python} {script}`; {INSTALL}"))?;
    child.stdin.take().context("no stdin")?.write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "the PyTorch script {script} failed: {}",
        String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("(no message)")
    );
    last_json(&String::from_utf8_lossy(&out.stdout))
}

/// The JSON object on the last line that has one (after any `RESULT ` prefix).
pub fn parse_last_json(stdout: &str) -> anyhow::Result<TorchBench> {
    last_json(stdout)
}

fn last_json<T: serde::de::DeserializeOwned>(stdout: &str) -> anyhow::Result<T> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.find('{').map(|i| &l[i..]))
        .context("the PyTorch script printed no JSON line")?;
    serde_json::from_str(line).with_context(|| format!("the PyTorch script printed an unexpected line: {line}"))
}

/// `torch_reference.py` with `threads` CPU threads (the reference model only).
pub fn run_torch(python: &str, script: &str, threads: usize, extra: &[&str]) -> anyhow::Result<TorchBench> {
    let mut args = vec!["--threads".to_string(), threads.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    run_script(python, script, &args)
}

/// `torch_gpu.py --device cuda` at `dims` in `dtype` (`f32`, or `bf16` autocast), timing as
/// normlab does: `warmup` steps, then `steps` timed ones.
pub fn run_torch_gpu(
    python: &str,
    script: &str,
    dims: &Dims,
    dtype: &str,
    warmup: usize,
    steps: usize,
) -> anyhow::Result<TorchBench> {
    run_script(python, script, &gpu_args(dims, dtype, warmup, steps))
}

fn gpu_args(dims: &Dims, dtype: &str, warmup: usize, steps: usize) -> Vec<String> {
    // `auto`: CUDA where PyTorch sees it, else the CPU (a GPU device without CUDA: lavapipe).
    let mut args = vec!["--device".into(), "auto".into(), "--dtype".into(), dtype.into()];
    args.extend(dims.torch_args());
    args.extend(["--warmup".into(), warmup.to_string(), "--steps".into(), steps.to_string()]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_scripts_result_line_and_flags() {
        // The line torch_gpu.py prints (its `print("RESULT " + json.dumps(...))`).
        let out = "warming up\nRESULT {\"cfg\": {\"V\": 256}, \"params\": 5, \"train_ms\": 2.0, \"train_tok_s\": \
                   1024.0, \"fwd_tok_s\": 4096.0, \"loss\": 5.5, \"tflops_6N\": 0.1}\n";
        let b = parse_last_json(out).unwrap();
        assert_eq!((b.train_tok_s, b.fwd_tok_s), (1024.0, 4096.0));
        assert_eq!(b.other["tflops_6N"], serde_json::json!(0.1));
        assert!(parse_last_json("no json here").is_err());
        let args = gpu_args(&Dims::TABLE1, "bf16", 10, 20).join(" ");
        assert_eq!(
            args,
            "--device auto --dtype bf16 --V 50257 --D 512 --L 12 --H 8 --FF 1536 --B 4 --T 2048 --warmup 10 --steps 20"
        );
    }
}
