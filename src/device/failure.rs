//! A GPU engine's failures as one `error:` line. burn's GPU runtimes report a missing driver,
//! a missing adapter or an exhausted device memory by panicking in their engine thread; the
//! panic hook the binary installs (`guard::on_unguarded_panic`) asks [`line`] whether a panic
//! is one of these, and if so prints the line (naming the device and the fix) and exits 2
//! instead of printing a backtrace.

use std::sync::Mutex;

/// The GPU device this process computes on, once [`super::parse`] has chosen one.
static GPU: Mutex<Option<String>> = Mutex::new(None);

/// Records `name` as this process's GPU device (the CPU is not recorded: its failures are
/// normlab's own, and keep their backtrace).
pub(super) fn record(name: &str) {
    *GPU.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.to_string());
}

/// The device failures a message is recognised as.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    OutOfMemory,
    NoDriver,
    NoAdapter,
    Lost,
    /// A call of `model.kernels = "cublas"` (`kernels::gpu::cublas`, whose panics start `cuBLAS:`).
    Cublas,
}

fn classify(msg: &str) -> Option<Failure> {
    let m = msg.to_ascii_lowercase();
    if msg.starts_with("cuBLAS:") {
        Some(Failure::Cublas)
    } else if m.contains("out of device memory") || m.contains("out-of-memory") || m.contains("out of memory") {
        Some(Failure::OutOfMemory)
    } else if m.contains("unable to dynamically load") || m.contains("cuda installation not found") {
        Some(Failure::NoDriver)
    } else if m.contains("no possible adapter") || m.contains("no adapter") || m.contains("adapter not found") {
        Some(Failure::NoAdapter)
    } else if m.contains("device lost") || m.contains("devicelost") || m.contains("device_lost") {
        Some(Failure::Lost)
    } else {
        None
    }
}

/// The `error:` line's text for a panic with message `msg`, when this process computes on a
/// GPU and the message is a device failure; `None` otherwise (a bug keeps its backtrace).
pub fn line(msg: &str) -> Option<String> {
    let gpu = GPU.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
    Some(text(&gpu, classify(msg)?, msg))
}

fn text(device: &str, f: Failure, msg: &str) -> String {
    let cause = msg.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    match f {
        Failure::OutOfMemory => format!(
            "device `{device}`: out of device memory ({cause}); lower train.micro_batch_size, set \
             train.precision = \"bf16\" or train.checkpoint_activations = true"
        ),
        Failure::NoDriver => format!(
            "device `{device}`: a library or the toolkit it needs could not be found ({cause}); \
             install the GPU driver (and for `cuda` the CUDA toolkit, or set CUDA_PATH), put its \
             libraries on LD_LIBRARY_PATH, or pick another device: --set run.device='\"cpu\"'"
        ),
        Failure::NoAdapter => format!(
            "device `{device}`: no GPU adapter found ({cause}); install the GPU's Vulkan driver \
             (NVIDIA's, or Debian's mesa-vulkan-drivers), or pick another device: \
             --set run.device='\"cpu\"'"
        ),
        Failure::Cublas => format!(
            "device `{device}`: {cause}; run with model.kernels = \"fused\" (burn's own products) \
             instead of \"cublas\""
        ),
        Failure::Lost => format!(
            "device `{device}`: the GPU was lost ({cause}); check `nvidia-smi` or the kernel log, \
             then resume the run from its last checkpoint"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages burn's runtimes panic with (cubecl-runtime's `OutOfMemory`, cudarc's
    /// library loader, wgpu's adapter search), copied from their source.
    #[test]
    fn the_engines_failure_messages_are_recognised() {
        let oom = "out of device memory allocating 17179869184 bytes\nBacktrace ...";
        assert_eq!(classify(oom), Some(Failure::OutOfMemory));
        let launch = "An out-of-memory error happened during launch\nCaused by:\n  pool";
        assert_eq!(classify(launch), Some(Failure::OutOfMemory));
        let cuda =
            "Unable to dynamically load the \"cuda\" shared library - searched for library names: [\"libcuda.so\"].";
        assert_eq!(classify(cuda), Some(Failure::NoDriver));
        assert_eq!(classify("No possible adapter available for backend"), Some(Failure::NoAdapter));
        let toolkit = "\n        CUDA installation not found.\n        Please ensure that CUDA is installed";
        assert_eq!(classify(toolkit), Some(Failure::NoDriver));
        assert!(text("cuda:0", Failure::NoDriver, toolkit).contains("(CUDA installation not found.)"));
        assert_eq!(classify("index out of bounds: the len is 3 but the index is 7"), None);
        // normlab's own cuBLAS route (kernels::gpu::cublas) names itself.
        let cublas = "cuBLAS: gemm 8192×512×1536: CublasError(CUBLAS_STATUS_NOT_SUPPORTED)";
        assert_eq!(classify(cublas), Some(Failure::Cublas));
        assert!(text("cuda:0", Failure::Cublas, cublas).contains("model.kernels = \"fused\""));
    }

    #[test]
    fn the_line_names_the_device_the_cause_and_the_fix_on_one_line() {
        let t = text("cuda:0", Failure::OutOfMemory, "out of device memory allocating 8 bytes\nBacktrace\n  0: x");
        assert!(
            t.starts_with("device `cuda:0`: out of device memory (out of device memory allocating 8 bytes)"),
            "{t}"
        );
        assert!(t.contains("micro_batch_size") && !t.contains('\n'), "{t}");
    }
}
