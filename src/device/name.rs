//! [`DeviceName`]: the device a run computes on, as `run.device` names it (`cpu`, `wgpu`,
//! `vulkan`, `cuda`, `cuda:N`). Checked when the config is read (a name this build has no
//! backend for is refused there, with the feature that adds it); opened once per command by
//! [`DeviceName::open`], which asks the CUDA driver before burn does.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

/// A device this build can compute on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeviceName {
    /// burn's `flex` CPU backend (also written `flex`).
    #[default]
    Cpu,
    /// This process's GPU through wgpu (feature `wgpu`); see [`super::set_local_gpu`].
    Wgpu,
    /// This process's GPU through Vulkan SPIR-V (feature `vulkan`).
    Vulkan,
    /// CUDA device N (feature `cuda`); `cuda` is `cuda:0`.
    Cuda(usize),
}

impl DeviceName {
    pub fn is_cpu(self) -> bool {
        self == DeviceName::Cpu
    }

    /// The burn device. A CUDA device is first asked of the driver ([`super::cuda::probe`]), so
    /// a missing driver or device is an error here rather than a panic in burn's engine
    /// thread; a GPU device is recorded for [`super::failure::line`] and keeps its compiled
    /// kernels and autotune results under `kernel_cache` ([`super::kernel_cache`]).
    pub fn open(self, kernel_cache: &std::path::Path) -> anyhow::Result<Device> {
        if self.is_cpu() {
            return Ok(Device::flex());
        }
        super::kernel_cache::use_dir(kernel_cache)?;
        let device = self.open_gpu()?;
        super::failure::record(&self.to_string());
        Ok(device)
    }

    fn open_gpu(self) -> anyhow::Result<Device> {
        match self {
            #[cfg(feature = "wgpu")]
            DeviceName::Wgpu => Ok(Device::wgpu(super::gpu::gpu_kind())),
            #[cfg(feature = "vulkan")]
            DeviceName::Vulkan => Ok(Device::vulkan(super::gpu::gpu_kind())),
            #[cfg(feature = "cuda")]
            DeviceName::Cuda(i) => Ok(Device::cuda(super::cuda::probe(i)?.index)),
            #[allow(unreachable_patterns)]
            other => anyhow::bail!("{}", unbuilt(&other.to_string())),
        }
    }
}

impl std::str::FromStr for DeviceName {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> anyhow::Result<Self> {
        let device = match name {
            "cpu" | "flex" => DeviceName::Cpu,
            "wgpu" => DeviceName::Wgpu,
            "vulkan" => DeviceName::Vulkan,
            n if n == "cuda" || n.starts_with("cuda:") => DeviceName::Cuda(cuda_index(n)?),
            other => anyhow::bail!("{}", unbuilt(other)),
        };
        anyhow::ensure!(device.built(), "{}", unbuilt(name));
        Ok(device)
    }
}

impl DeviceName {
    /// Whether this build has the device's backend.
    fn built(self) -> bool {
        match self {
            DeviceName::Cpu => true,
            DeviceName::Wgpu => cfg!(feature = "wgpu"),
            DeviceName::Vulkan => cfg!(feature = "vulkan"),
            DeviceName::Cuda(_) => cfg!(feature = "cuda"),
        }
    }
}

/// The refusal of a device name this build cannot open, with the names it can.
fn unbuilt(name: &str) -> String {
    format!(
        "unknown device `{name}`: use `cpu`{}{}{}",
        if cfg!(feature = "wgpu") { ", `wgpu`" } else { " (rebuild with --features wgpu for `wgpu`)" },
        if cfg!(feature = "vulkan") { ", `vulkan`" } else { " (rebuild with --features vulkan for `vulkan`)" },
        if cfg!(feature = "cuda") { ", `cuda:N`" } else { " (rebuild with --features cuda for `cuda`)" }
    )
}

impl TryFrom<String> for DeviceName {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse().map_err(|e: anyhow::Error| e.to_string())
    }
}

impl From<DeviceName> for String {
    fn from(d: DeviceName) -> String {
        d.to_string()
    }
}

impl std::fmt::Display for DeviceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceName::Cpu => f.pad("cpu"),
            DeviceName::Wgpu => f.pad("wgpu"),
            DeviceName::Vulkan => f.pad("vulkan"),
            DeviceName::Cuda(i) => f.pad(&format!("cuda:{i}")),
        }
    }
}

/// N of `cuda:N` (`cuda` is `cuda:0`).
fn cuda_index(name: &str) -> anyhow::Result<usize> {
    let n = name.strip_prefix("cuda").unwrap_or(name);
    match n.strip_prefix(':') {
        None if n.is_empty() => Ok(0),
        Some(i) => {
            i.parse().map_err(|_| anyhow::anyhow!("device `{name}`: write `cuda` or `cuda:N`, N the device's index"))
        }
        None => anyhow::bail!("device `{name}`: write `cuda` or `cuda:N`, N the device's index"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_names_give_their_index_or_the_form_to_write() {
        assert_eq!(cuda_index("cuda").unwrap(), 0);
        assert_eq!(cuda_index("cuda:3").unwrap(), 3);
        let e = cuda_index("cuda:x").unwrap_err().to_string();
        assert!(e.contains("`cuda:N`"), "{e}");
    }

    #[test]
    fn names_read_back_as_written_and_unknown_ones_name_the_choices() {
        assert_eq!("cpu".parse::<DeviceName>().unwrap(), DeviceName::Cpu);
        assert_eq!("flex".parse::<DeviceName>().unwrap().to_string(), "cpu");
        let e = "tpu".parse::<DeviceName>().unwrap_err().to_string();
        assert!(e.contains("unknown device `tpu`: use `cpu`"), "{e}");
        if !cfg!(feature = "cuda") {
            let e = "cuda:1".parse::<DeviceName>().unwrap_err().to_string();
            assert!(e.contains("--features cuda"), "{e}");
        }
    }
}
