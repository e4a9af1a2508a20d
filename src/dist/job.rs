//! [`Job`]: MPI for the life of a command, or a lone process.

use super::ranks::Ranks;

/// MPI for the life of a command: initialised by [`Job::start`] when a launcher started this
/// process as one of several, finalised when dropped.
pub struct Job {
    ranks: Ranks,
}

impl Job {
    /// The job this process belongs to: MPI's when `mpirun` or `srun` started more than one
    /// process, else a lone process. Refused when launched as several ranks by a build without
    /// the `mpi` feature.
    pub fn start() -> anyhow::Result<Self> {
        let Some(n) = super::launch::launched_ranks().filter(|&n| n > 1) else {
            return Ok(Self { ranks: Ranks::single() });
        };
        #[cfg(feature = "mpi")]
        {
            let _ = n;
            let p = super::mpi::init()?;
            Ok(Self { ranks: Ranks::new(p.rank, p.size, p.local_rank, p.local_size) })
        }
        #[cfg(not(feature = "mpi"))]
        anyhow::bail!(
            "normlab was started as one of {n} ranks (mpirun or srun) but built without MPI; build it with \
             `cargo build --release --features mpi` (Debian: apt install libopenmpi-dev libclang-dev)"
        )
    }

    pub fn ranks(&self) -> Ranks {
        self.ranks
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        if self.ranks.size() > 1 {
            super::mpi::finalize();
        }
    }
}
