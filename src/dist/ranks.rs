//! [`Ranks`]: the processes of one run and this process's place among them, with the
//! collectives training needs (sums, maxima, a gather, agreeing on an error). A lone process's
//! collectives are the identity; several ranks reach MPI through [`super::mpi`].

use std::ops::Range;

/// The processes of one run and this process's place among them. A copyable handle: the MPI
/// state it reaches is the process's own (MPI is initialised once per process, by [`Job`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ranks {
    rank: usize,
    size: usize,
    /// This rank's index among the ranks on its node, and their number.
    local_rank: usize,
    local_size: usize,
}

impl Ranks {
    /// The place MPI reports: `rank` of `size`, `local_rank` of the `local_size` ranks on its
    /// node.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(super) const fn new(rank: usize, size: usize, local_rank: usize, local_size: usize) -> Self {
        Self { rank, size, local_rank, local_size }
    }

    /// A lone process.
    pub const fn single() -> Self {
        Self { rank: 0, size: 1, local_rank: 0, local_size: 1 }
    }

    pub fn rank(self) -> usize {
        self.rank
    }

    pub fn size(self) -> usize {
        self.size
    }

    /// Rank 0 writes the run's files; the others only compute.
    pub fn is_writer(self) -> bool {
        self.rank == 0
    }

    /// This rank's index among the ranks on its node (which GPU it takes).
    pub fn local_rank(self) -> usize {
        self.local_rank
    }

    pub fn local_size(self) -> usize {
        self.local_size
    }

    /// This rank's contiguous share of `n` items in order: `[r·n/N, (r+1)·n/N)`.
    pub fn share(self, n: usize) -> Range<usize> {
        self.rank * n / self.size..(self.rank + 1) * n / self.size
    }

    /// Sums `data` element-wise over the ranks, in place, bucket by bucket.
    pub fn sum_f32(self, data: &mut [f32]) {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            super::mpi::sum_f32(data);
        }
        let _ = data;
    }

    /// [`Ranks::sum_f32`] as one blocking `MPI_Allreduce` of the whole buffer: the reference the
    /// all-reduce benchmark compares with.
    pub fn sum_f32_blocking(self, data: &mut [f32]) {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            super::mpi::sum_f32_blocking(data);
        }
        let _ = data;
    }

    /// Sums `data` element-wise over the ranks, in place.
    pub fn sum_f64(self, data: &mut [f64]) {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            super::mpi::sum_f64(data);
        }
        let _ = data;
    }

    /// The element-wise largest of `data` over the ranks, in place.
    pub fn max_f64(self, data: &mut [f64]) {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            super::mpi::max_f64(data);
        }
        let _ = data;
    }

    /// The largest `x` over the ranks.
    pub fn max(self, x: i64) -> i64 {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            return super::mpi::max_i64(x);
        }
        x
    }

    /// Every rank's `x`, in rank order.
    pub fn gather(self, x: u64) -> Vec<u64> {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            return super::mpi::gather_u64(x);
        }
        vec![x]
    }

    /// `r` if it is `Ok` on every rank. Otherwise every rank returns an error: the
    /// lowest-numbered failing rank its own ([`Agreed`]: every rank knows; it alone prints),
    /// the others [`Quiet`] (one line however many ranks failed the same way).
    pub fn all_ok<T>(self, r: anyhow::Result<T>) -> anyhow::Result<T> {
        if self.size == 1 {
            return r;
        }
        // The lowest failing rank, as the largest `size - rank` (0: none failed).
        let first = self.size as i64 - self.max(if r.is_err() { (self.size - self.rank) as i64 } else { 0 });
        match r {
            Err(e) if first == self.rank as i64 => Err(Agreed(e).into()),
            Err(_) => Err(Quiet.into()),
            Ok(_) if first < self.size as i64 => Err(Quiet.into()),
            ok => ok,
        }
    }

    /// What a rank that finds a peer gone adds to its error line: where the run can be resumed.
    pub fn set_resume_hint(self, hint: String) {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            super::mpi::set_resume_hint(hint);
        }
        let _ = hint;
    }

    /// Ends this rank after `e`. A lone process hands `e` back (printed as every error is). A
    /// rank prints `error: rank R of N: …` unless another rank reported the failure ([`Quiet`]),
    /// and returns exit status 2 when every rank knows ([`Agreed`], [`Quiet`]); an error only
    /// this rank knows stops the job: the others are told, then `MPI_Abort`.
    pub fn fail(self, e: anyhow::Error) -> anyhow::Result<i32> {
        if self.size == 1 {
            return Err(e);
        }
        if e.is::<Quiet>() {
            return Ok(2);
        }
        crate::io::term::err(format_args!("error: rank {} of {}: {e:#}", self.rank, self.size));
        if e.is::<Agreed>() {
            return Ok(2);
        }
        #[cfg(feature = "mpi")]
        super::mpi::abort_after_notice(2);
        #[cfg(not(feature = "mpi"))]
        Ok(2)
    }
}

/// Another rank failed and printed why; this one ends without a word.
#[derive(Debug, thiserror::Error)]
#[error("another rank of the job failed")]
pub struct Quiet;

/// This rank's error, which every rank of the job knows of ([`Ranks::all_ok`]).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct Agreed(pub anyhow::Error);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once_in_order() {
        for (n, size) in [(8, 2), (8, 4), (6, 4), (3, 3), (2, 1)] {
            let mut seen = Vec::new();
            for rank in 0..size {
                let r = Ranks { rank, size, local_rank: rank, local_size: size };
                seen.extend(r.share(n));
            }
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{n} items over {size} ranks");
        }
        let r = Ranks { rank: 1, size: 2, local_rank: 1, local_size: 2 };
        assert_eq!(r.share(8), 4..8);
    }

    #[test]
    fn a_lone_process_collectives_are_the_identity() {
        let r = Ranks::single();
        let mut v = vec![1.5f32, -2.0];
        r.sum_f32(&mut v);
        assert_eq!(v, [1.5, -2.0]);
        assert_eq!((r.max(7), r.gather(9)), (7, vec![9]));
        assert!(r.all_ok::<()>(Err(anyhow::anyhow!("x"))).unwrap_err().to_string() == "x");
        assert!(r.fail(anyhow::anyhow!("y")).is_err());
    }
}
