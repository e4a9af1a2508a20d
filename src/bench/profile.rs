//! `normlab bench profile`: where a train step's time goes on a device. The whole step (forward,
//! backward, AdamW) is timed, then each piece alone at the model's shapes
//! ([`super::profile_parts`]): the layers' matmuls by shape, attention's core, every norm slot,
//! the two sublayer functions whole (their elementwise work is what they take beyond their
//! matmuls and attention's core), the output head with the loss, AdamW's step, the gradient
//! norms, the host synchronisations and the probe pass. Each group is shown as time per step,
//! share of the step, and its achieved TFLOP/s or GB/s against the device's ceilings measured
//! in the same invocation ([`super::ceilings`]); what the pieces do not account for (the
//! embedding, residual additions, autodiff's bookkeeping, launch gaps between kernels) is
//! `other`. Written to `bench/profile.json`.

use super::ceilings::{self, Ceiling, CeilingSizes};
use super::profile_parts::{self as parts, PartGroup, ProfilePart, Timer};
use super::step::{Case, build};
use super::{Dims, Timing};
use crate::device::DeviceName;
use crate::kernels::{Kernels, Precision};
use burn::module::Module;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One line of the profile table: a group's time per step and its achieved rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileRow {
    pub what: String,
    pub ms_per_step: f64,
    /// Of the measured train step.
    pub share: f64,
    pub tflops: Option<f64>,
    pub gbs: Option<f64>,
    /// The rate over the device's ceiling (PyTorch's when measured, else burn's).
    pub of_ceiling: Option<f64>,
}

/// `bench/profile.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    pub machine: crate::device::Machine,
    pub device: String,
    pub recipe: String,
    pub kernels: Kernels,
    pub precision: Precision,
    pub dims: Dims,
    /// The whole train step: median, fastest and slowest (ms).
    pub step_ms: f64,
    pub step_ms_min: f64,
    pub step_ms_max: f64,
    pub parts: Vec<ProfilePart>,
    pub rows: Vec<ProfileRow>,
    pub ceiling_sizes: CeilingSizes,
    pub burn_ceiling: Ceiling,
    pub torch_ceiling: Option<Ceiling>,
}

/// `normlab bench profile`'s settings.
pub struct ProfileOptions {
    pub device: DeviceName,
    pub dims: Dims,
    pub recipe: String,
    pub kernels: Kernels,
    pub precision: Precision,
    pub warmup: usize,
    pub steps: usize,
    /// `probe.every` the probe pass is spread over.
    pub probe_every: usize,
    pub ceiling_sizes: CeilingSizes,
    /// PyTorch's interpreter and `tools/torch_ceilings.py`.
    pub torch: Option<(String, String)>,
    pub out: PathBuf,
}

/// Measures the step, its pieces and the ceilings; writes `o.out`.
pub fn run(o: &ProfileOptions) -> anyhow::Result<ProfileReport> {
    let device = o.device.open(&super::kernel_cache::kernel_cache())?;
    crate::run::checked::check_precision(&device, &o.device.to_string(), o.precision)?;
    o.kernels.check_on(&device)?;
    let sizes = o.ceiling_sizes;
    let torch_ceiling = match &o.torch {
        Some((py, script)) => {
            // A GPU device beside PyTorch on CUDA where it sees CUDA, else on the CPU (lavapipe).
            let on = if o.device.is_cpu() { "cpu" } else { "auto" };
            Some(ceilings::torch((py, script), on, sizes, o.precision, o.steps)?)
        }
        None => None,
    };
    let plain = Timer { device: device.clone(), warmup: o.warmup, reps: o.steps };
    let burn_ceiling = ceilings::burn(&plain, sizes, o.precision)?;
    let case = Case { recipe: o.recipe.clone(), kernels: o.kernels, precision: o.precision };
    let timing = Timing { warmup: o.warmup, steps: o.steps, fwd_steps: 0 };
    let step = super::step::step_times(&case, &o.dims, &device, timing)?;
    let parts = measure_parts(o, &case, &device)?;
    let step_ms = crate::stats::median(&step) * 1e3;
    let ceiling = torch_ceiling.as_ref().unwrap_or(&burn_ceiling);
    let report = ProfileReport {
        machine: crate::device::machine(),
        device: o.device.to_string(),
        recipe: o.recipe.clone(),
        kernels: o.kernels,
        precision: o.precision,
        dims: o.dims,
        step_ms,
        step_ms_min: step.iter().copied().fold(f64::INFINITY, f64::min) * 1e3,
        step_ms_max: step.iter().copied().fold(0.0, f64::max) * 1e3,
        rows: rows(&parts, step_ms, ceiling),
        parts,
        ceiling_sizes: sizes,
        burn_ceiling,
        torch_ceiling,
    };
    crate::io::json::write(&o.out, &report)?;
    Ok(report)
}

/// Every piece, in the order the table shows them.
fn measure_parts(o: &ProfileOptions, case: &Case, device: &burn::tensor::Device) -> anyhow::Result<Vec<ProfilePart>> {
    let ad = device.clone().autodiff();
    let t = Timer { device: ad.clone(), warmup: o.warmup, reps: o.steps };
    let model = build(case, &o.dims, &ad)?;
    let mut out = parts::matmuls(&t, &o.dims, o.precision, o.kernels)?;
    out.push(parts::attention_core(&t, &model, &o.dims)?);
    out.extend(parts::norms(&t, &model, &o.dims)?);
    out.extend(parts::sublayer_functions(&t, &model, &o.dims)?);
    out.push(parts::loss_head(&t, &model, &o.dims)?);
    let plain = Timer { device: device.clone(), warmup: o.warmup, reps: o.steps };
    out.push(parts::probes(&plain, &model.valid(), &o.dims, o.probe_every)?);
    out.push(parts::host_sync(&plain)?);
    out.extend(parts::optimizer(&t, model, &o.dims)?);
    Ok(out)
}

/// Σ per_step · ms of the parts in `group`, their FLOPs and bytes per step.
fn totals(parts: &[ProfilePart], group: PartGroup) -> (f64, f64, f64) {
    parts.iter().filter(|p| p.group == group).fold((0.0, 0.0, 0.0), |(ms, f, b), p| {
        (ms + p.per_step * p.ms, f + p.per_step * p.flops.unwrap_or(0.0), b + p.per_step * p.bytes.unwrap_or(0.0))
    })
}

/// A row of `ms` per step doing `flops` and moving `bytes`, its rate against `ceiling`.
fn row(what: &str, ms: f64, flops: f64, bytes: f64, step_ms: f64, ceiling: &Ceiling) -> ProfileRow {
    let secs = ms / 1e3;
    let tflops = (flops > 0.0 && secs > 0.0).then(|| flops / secs / 1e12);
    let gbs = (bytes > 0.0 && secs > 0.0).then(|| bytes / secs / 1e9);
    let of_ceiling = tflops.map(|r| r / ceiling.gemm_tflops).or(gbs.map(|r| r / ceiling.copy_gbs));
    ProfileRow { what: what.into(), ms_per_step: ms, share: ms / step_ms, tflops, gbs, of_ceiling }
}

/// The table: one row per group, the sublayers' elementwise work (their functions' time less
/// the layers' matmuls and attention's core, never below 0), and `other`, the step's time no
/// row accounts for (never below 0).
pub fn rows(parts: &[ProfilePart], step_ms: f64, ceiling: &Ceiling) -> Vec<ProfileRow> {
    use PartGroup::*;
    let named = [
        (Matmul, "matmuls (layers)"),
        (Attention, "attention core"),
        (Norm, "norms"),
        (Sublayer, "elementwise in sublayers"),
        (Loss, "output head and loss"),
        (Optimizer, "optimizer"),
        (GradNorm, "gradient norms"),
        (HostSync, "host synchronisation"),
        (Probes, "probes"),
    ];
    let inside = totals(parts, Matmul).0 + totals(parts, Attention).0;
    let mut out: Vec<ProfileRow> = named
        .iter()
        .filter(|(g, _)| parts.iter().any(|p| p.group == *g))
        .map(|&(g, what)| match totals(parts, g) {
            (ms, _, _) if g == Sublayer => row(what, (ms - inside).max(0.0), 0.0, 0.0, step_ms, ceiling),
            (ms, f, b) => row(what, ms, f, b, step_ms, ceiling),
        })
        .collect();
    let accounted: f64 = out.iter().map(|r| r.ms_per_step).sum();
    out.push(row("other", (step_ms - accounted).max(0.0), 0.0, 0.0, step_ms, ceiling));
    out
}

/// The table as printed.
pub fn table(r: &ProfileReport) -> String {
    let mut s = format!(
        "{} on {} ({:?}, {:?}), {} × {} tokens: train step {:.2} ms (min {:.2}, max {:.2})\n",
        r.recipe, r.device, r.precision, r.kernels, r.dims.batch, r.dims.seq, r.step_ms, r.step_ms_min, r.step_ms_max
    );
    s += &ceiling_line("burn", &r.burn_ceiling, r.ceiling_sizes);
    if let Some(c) = &r.torch_ceiling {
        s += &ceiling_line("PyTorch", c, r.ceiling_sizes);
    }
    s += &format!("{:<26} {:>10} {:>7} {:>16} {:>10}\n", "", "ms/step", "share", "rate", "of ceiling");
    for row in &r.rows {
        let rate = match (row.tflops, row.gbs) {
            (Some(t), _) => format!("{t:.3} TFLOP/s"),
            (None, Some(g)) => format!("{g:.1} GB/s"),
            _ => String::new(),
        };
        let of = row.of_ceiling.map(|c| format!("{:.0} %", c * 100.0)).unwrap_or_default();
        s += &format!(
            "{:<26} {:>10.3} {:>6.1}% {:>16} {:>10}\n",
            row.what,
            row.ms_per_step,
            row.share * 100.0,
            rate,
            of
        );
    }
    s
}

fn ceiling_line(tool: &str, c: &Ceiling, sizes: CeilingSizes) -> String {
    format!(
        "ceilings ({tool}): GEMM {n}³ {:.3} TFLOP/s, elementwise over {len} values {:.1} GB/s\n",
        c.gemm_tflops,
        c.copy_gbs,
        n = sizes.gemm_n,
        len = sizes.copy_len
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(group: PartGroup, per_step: f64, ms: f64, flops: Option<f64>, bytes: Option<f64>) -> ProfilePart {
        ProfilePart { name: format!("{group:?}"), group, per_step, ms, flops, bytes }
    }

    #[test]
    fn rows_sum_each_group_and_rate_it_against_the_ceiling() {
        use PartGroup::*;
        let parts = [
            piece(Matmul, 2.0, 1.0, Some(1e9), None),
            piece(Attention, 1.0, 0.5, Some(1e8), None),
            piece(Norm, 1.0, 0.5, None, Some(1e6)),
            piece(Sublayer, 2.0, 2.0, None, None),
        ];
        let ceiling = Ceiling { gemm_tflops: 2.0, copy_gbs: 4.0 };
        let rows = rows(&parts, 10.0, &ceiling);
        let get = |w: &str| rows.iter().find(|r| r.what == w).unwrap();
        // 2 × 1 ms doing 2 × 1e9 FLOPs: 1 TFLOP/s, half the 2 TFLOP/s ceiling, 20 % of 10 ms.
        let m = get("matmuls (layers)");
        assert_eq!((m.ms_per_step, m.share), (2.0, 0.2));
        assert!((m.tflops.unwrap() - 1.0).abs() < 1e-12 && (m.of_ceiling.unwrap() - 0.5).abs() < 1e-12);
        // 1e8 FLOPs in 0.5 ms: 0.2 TFLOP/s.
        assert!((get("attention core").tflops.unwrap() - 0.2).abs() < 1e-12);
        // 1e6 bytes in 0.5 ms: 2 GB/s, half the 4 GB/s ceiling.
        let n = get("norms");
        assert!((n.gbs.unwrap() - 2.0).abs() < 1e-12 && (n.of_ceiling.unwrap() - 0.5).abs() < 1e-12);
        // The sublayers' 4 ms less 2 ms of matmuls and 0.5 ms of attention core.
        assert_eq!(get("elementwise in sublayers").ms_per_step, 1.5);
        // 10 − (2 + 0.5 + 1.5 + 0.5).
        assert_eq!(get("other").ms_per_step, 5.5);
        assert_eq!(
            rows.iter().map(|r| r.what.as_str()).collect::<Vec<_>>(),
            ["matmuls (layers)", "attention core", "norms", "elementwise in sublayers", "other"]
        );
    }

    #[test]
    fn a_step_faster_than_its_pieces_leaves_no_negative_time() {
        let parts = [piece(PartGroup::Matmul, 1.0, 3.0, Some(1.0), None)];
        let rows = rows(&parts, 2.0, &Ceiling { gemm_tflops: 1.0, copy_gbs: 1.0 });
        assert!(rows.iter().all(|r| r.ms_per_step >= 0.0), "{rows:?}");
    }

    #[test]
    fn a_tiny_model_is_profiled_piece_by_piece_on_the_cpu() {
        let dir = std::env::temp_dir().join(format!("normlab-bench-profile-{}", std::process::id()));
        let dims =
            Dims { vocab: 64, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: None, d_ff: 64, batch: 2, seq: 16 };
        let o = ProfileOptions {
            device: DeviceName::Cpu,
            dims,
            recipe: "pre".into(),
            kernels: Kernels::Fused,
            precision: Precision::F32,
            warmup: 1,
            steps: 2,
            probe_every: 10,
            ceiling_sizes: CeilingSizes { gemm_n: 64, copy_len: 4096 },
            torch: None,
            out: dir.join("profile.json"),
        };
        let r = run(&o).unwrap();
        let back: ProfileReport = crate::io::json::read(&o.out).unwrap();
        assert_eq!(back, r);
        // Four linear shapes × (forward, dX, dW), attention's core, pre's two input norms and
        // its final norm, two sublayer functions, the head, probes, a sync, norms and AdamW.
        assert_eq!(r.parts.len(), 12 + 1 + 3 + 2 + 1 + 1 + 1 + 2, "{:?}", r.parts);
        let per_step = |g| r.parts.iter().filter(|p| p.group == g).map(|p| p.per_step).collect::<Vec<_>>();
        assert_eq!(per_step(PartGroup::Norm), [2.0, 2.0, 1.0]);
        assert_eq!(per_step(PartGroup::Probes), [0.1]);
        assert!(r.parts.iter().all(|p| p.ms.is_finite() && p.ms >= 0.0), "{:?}", r.parts);
        assert!(r.step_ms > 0.0 && r.burn_ceiling.gemm_tflops > 0.0 && r.burn_ceiling.copy_gbs > 0.0);
        assert!(table(&r).contains("output head and loss"), "{}", table(&r));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
