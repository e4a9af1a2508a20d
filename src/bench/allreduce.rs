//! `normlab bench allreduce`, run under `mpirun -np N`: the gradient all-reduce of a
//! data-parallel run ([`Ranks::sum_f32`]: fixed buckets, non-blocking, polled) beside one
//! blocking `MPI_Allreduce` of the same buffer, in the same invocation, for buffers from 4 KiB
//! to 64 MiB. Each size is timed `rounds` times after `warmup` (every rank starts together
//! after a small all-reduce); the median is reported as seconds and as MB/s per rank
//! (algorithm bandwidth: the buffer's bytes over the time; the bus bandwidth, ×2(N−1)/N, is
//! what each rank's link carries in a ring).

use crate::dist::Ranks;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// One buffer size.
#[derive(Clone, Debug, Serialize)]
pub struct AllReduceSize {
    pub bytes: usize,
    /// Median seconds: normlab's bucketed all-reduce, and one blocking MPI_Allreduce.
    pub normlab_s: f64,
    pub mpi_s: f64,
    /// Buffer bytes / median time, in MB/s (10⁶ bytes), per rank.
    pub normlab_mb_s: f64,
    pub mpi_mb_s: f64,
    /// normlab's bandwidth × 2(N−1)/N: the traffic per rank's link.
    pub normlab_bus_mb_s: f64,
    /// normlab's time / MPI's.
    pub ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct AllReduceBench {
    pub ranks: usize,
    pub machine: crate::device::Machine,
    pub rounds: usize,
    pub sizes: Vec<AllReduceSize>,
}

const SIZES: [usize; 6] = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20];

/// Measures every size and, on rank 0, writes the JSON to `out`.
pub fn run(ranks: Ranks, warmup: usize, rounds: usize, out: &Path) -> anyhow::Result<AllReduceBench> {
    anyhow::ensure!(
        ranks.size() > 1,
        "the all-reduce benchmark needs several ranks: mpirun -np 2 normlab bench allreduce"
    );
    let rounds = rounds.max(1);
    let sizes = SIZES.iter().map(|&bytes| measure(ranks, bytes, warmup, rounds)).collect();
    let r = AllReduceBench { ranks: ranks.size(), machine: crate::device::machine(), rounds, sizes };
    if ranks.is_writer() {
        crate::io::json::write(out, &r)?;
    }
    Ok(r)
}

fn measure(ranks: Ranks, bytes: usize, warmup: usize, rounds: usize) -> AllReduceSize {
    let mut data = vec![1.0f32; bytes / 4];
    let mut time = |blocking: bool| {
        let mut t = Vec::with_capacity(rounds);
        for i in 0..warmup + rounds {
            ranks.max(0);
            let t0 = Instant::now();
            match blocking {
                true => ranks.sum_f32_blocking(&mut data),
                false => ranks.sum_f32(&mut data),
            }
            // The slowest rank's time is the collective's (a positive f64's bits order as it does).
            let s = f64::from_bits(ranks.max(t0.elapsed().as_secs_f64().to_bits() as i64) as u64);
            if i >= warmup {
                t.push(s);
            }
        }
        crate::stats::median(&t)
    };
    let (normlab_s, mpi_s) = (time(false), time(true));
    let mb = |s: f64| bytes as f64 / s / 1e6;
    let n = ranks.size() as f64;
    AllReduceSize {
        bytes,
        normlab_s,
        mpi_s,
        normlab_mb_s: mb(normlab_s),
        mpi_mb_s: mb(mpi_s),
        normlab_bus_mb_s: mb(normlab_s) * 2.0 * (n - 1.0) / n,
        ratio: normlab_s / mpi_s,
    }
}
