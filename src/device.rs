//! Backend selection. The default build runs on burn's `flex` CPU backend; `--features wgpu`
//! or `--features cuda` add GPU devices.

use burn::tensor::Device;

/// The device named on the command line: `cpu` (flex), `wgpu`, `cuda` / `cuda:N`.
pub fn parse(name: &str) -> anyhow::Result<Device> {
    match name {
        "cpu" | "flex" => Ok(Device::flex()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(Device::wgpu(Default::default())),
        #[cfg(feature = "cuda")]
        n if n == "cuda" || n.starts_with("cuda:") => {
            let idx: usize = n.strip_prefix("cuda:").unwrap_or("0").parse()?;
            Ok(Device::cuda(idx))
        }
        other => anyhow::bail!(
            "unknown device `{other}`: use `cpu`{}{}",
            if cfg!(feature = "wgpu") { ", `wgpu`" } else { " (rebuild with --features wgpu for `wgpu`)" },
            if cfg!(feature = "cuda") { ", `cuda:N`" } else { " (rebuild with --features cuda for `cuda`)" }
        ),
    }
}
