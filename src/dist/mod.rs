//! One run over several processes: data parallelism on MPI.
//!
//! - [`ranks`]: [`Ranks`], a process's place in a job and the collectives
//! - [`job`]: [`Job`], MPI initialised for a command's life (feature `mpi`)
//! - [`launch`]: what the launcher says about the job before MPI starts
//! - `mpi`: the MPI side of the collectives (feature `mpi`)
//! - `peers`: where each rank runs, for naming a rank that is gone
//!
//! `mpirun -np N normlab train …` (or `srun` under Slurm) starts N processes, the *ranks*, of
//! one run. Every rank draws every step's micro-batches from the same sampler and computes the
//! gradients of its share ([`Ranks::share`]); [`Ranks::sum_f32`] sums them over the ranks
//! with MPI all-reduce in fixed-size buckets in a fixed order, so every rank holds the same
//! gradient and takes the same clipped AdamW step. MPI's reductions give the same result for
//! the same ranks and message sizes, so a run repeats bit for bit with the same rank count.
//!
//! Without a launcher in the environment the process is the only rank and every collective is
//! the identity: a single process needs no MPI at all (nor the `mpi` build feature).
//!
//! # Faults
//! A rank that fails with an error prints it (`error: rank R of N: …`), tells the others on a
//! channel of its own and calls `MPI_Abort`. A rank that dies without a word (a signal, the
//! out-of-memory killer) is found by the others when the launcher stops them: each waits for
//! collectives in a polling loop that, on SIGTERM, looks for its peers' processes on its node
//! and names the one that is gone.

mod job;
pub mod launch;
#[cfg(feature = "mpi")]
mod mpi;
// Used by the MPI side only; its tests run in every build.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod peers;
mod ranks;

pub use job::Job;
pub use ranks::{Agreed, Quiet, Ranks};
