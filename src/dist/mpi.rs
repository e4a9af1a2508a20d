//! The MPI side of [`super::Ranks`] (feature `mpi`): Open MPI through the `mpi` crate.
//!
//! MPI is initialised once per process with `MPI_THREAD_SERIALIZED` (the command runs on a
//! thread of the compute pool, not the main thread) and its state sits behind one mutex, so
//! calls never overlap. Collectives are started non-blocking and completed by [`wait`], which
//! polls them and, after SIGTERM (what the launcher sends when a rank ends), checks whether a
//! peer is gone.

use super::peers::{self, Peer};
use anyhow::Context;
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::environment::{Threading, Universe};
use mpi::request::{Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct State {
    universe: Option<Universe>,
    world: SimpleCommunicator,
    /// A duplicate of the world for failure notices, apart from the collectives' traffic.
    notices: Option<SimpleCommunicator>,
    peers: Vec<Peer>,
    me: usize,
    hint: String,
}

/// The process's MPI state.
struct Shared(Option<State>);
// SAFETY: MPI runs with MPI_THREAD_SERIALIZED, which allows calls from any thread one at a
// time; every call goes through this mutex.
unsafe impl Send for Shared {}

static STATE: Mutex<Shared> = Mutex::new(Shared(None));

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.0.as_mut().expect("dist::Job::start initialises MPI before any collective"))
}

/// Gradients are summed in buckets of this many values (16 MiB of f32), one all-reduce each,
/// in parameter order.
pub const BUCKET: usize = 1 << 22;

/// A rank's place in the job, as MPI reports it.
pub struct Place {
    pub rank: usize,
    pub size: usize,
    /// The rank's index among the ranks on its node, and their number.
    pub local_rank: usize,
    pub local_size: usize,
}

/// `MPI_Init_thread`, this rank's place, and every rank's process (for fault reports).
pub fn init() -> anyhow::Result<Place> {
    let (universe, level) = mpi::initialize_with_threading(Threading::Serialized)
        .context("MPI could not be initialised (is this process started by mpirun or srun --mpi=pmix?)")?;
    if level < Threading::Serialized {
        anyhow::bail!(
            "this MPI offers thread level {level:?}; normlab needs Serialized (Open MPI's default build has it)"
        );
    }
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let local = world.split_shared(world.rank());
    let (local_rank, local_size) = (local.rank() as usize, local.size() as usize);
    drop(local);
    let mut packed = vec![0u64; size];
    world.all_gather_into(&Peer::this().pack(), &mut packed[..]);
    let notices = Some(world.duplicate());
    let peers = packed.into_iter().map(Peer::unpack).collect();
    let state = State { universe: Some(universe), world, notices, peers, me: rank, hint: String::new() };
    STATE.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(state);
    Ok(Place { rank, size, local_rank, local_size })
}

/// `MPI_Finalize`, after the communicators it made are freed.
pub fn finalize() {
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(mut s) = guard.0.take() {
        drop(s.notices.take());
        drop(s.universe.take());
    }
}

pub fn set_resume_hint(hint: String) {
    with(|s| s.hint = hint);
}

pub fn sum_f32(data: &mut [f32]) {
    all_reduce(data, SystemOperation::sum());
}

pub fn sum_f32_blocking(data: &mut [f32]) {
    with(|s| {
        let send = data.to_vec();
        s.world.all_reduce_into(&send[..], data, SystemOperation::sum());
    });
}

pub fn sum_f64(data: &mut [f64]) {
    all_reduce(data, SystemOperation::sum());
}

pub fn max_f64(data: &mut [f64]) {
    all_reduce(data, SystemOperation::max());
}

pub fn max_i64(x: i64) -> i64 {
    let mut v = [x];
    all_reduce(&mut v, SystemOperation::max());
    v[0]
}

pub fn gather_u64(x: u64) -> Vec<u64> {
    with(|s| {
        let mut out = vec![0u64; s.world.size() as usize];
        mpi::request::scope(|sc| {
            let req = s.world.immediate_all_gather_into(sc, &x, &mut out[..]);
            wait(s, req);
        });
        out
    })
}

/// `data` summed (or reduced by `op`) over the ranks in place, [`BUCKET`] values at a time.
fn all_reduce<T: Equivalence + Copy>(data: &mut [T], op: SystemOperation) {
    with(|s| {
        for bucket in data.chunks_mut(BUCKET) {
            let send = bucket.to_vec();
            mpi::request::scope(|sc| {
                let req = s.world.immediate_all_reduce_into(sc, &send[..], bucket, op);
                wait(s, req);
            });
        }
    });
}

/// Completes `req`. Open MPI moves a non-blocking collective on only inside MPI calls, so this
/// polls: yielding for the first 50 ms (a balanced step's wait), then sleeping 200 µs between
/// tests. After a stop signal it checks, every 100 ms, for a failure notice (another rank
/// reported: end quietly) and for a peer process gone from this node (report it if this is
/// the lowest live rank, then end): the launcher sends SIGTERM to every rank when one ends.
fn wait<'a, D: ?Sized, S: Scope<'a>>(s: &State, mut req: Request<'a, D, S>) {
    let started = Instant::now();
    let mut checked = started;
    loop {
        match req.test() {
            Ok(_) => return,
            Err(r) => req = r,
        }
        if started.elapsed() < Duration::from_millis(50) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
        if crate::stop::requested().is_some() && checked.elapsed() > Duration::from_millis(100) {
            checked = Instant::now();
            check_peers(s);
        }
    }
}

/// Ends the process if the job lost a rank (see [`wait`]); returns if every peer on this node
/// is alive (a stop request: the collective completes and the run stops at the step's end).
fn check_peers(s: &State) {
    let notices = s.notices.as_ref().expect("notices live until finalize");
    if notices.any_process().immediate_probe().is_some() {
        std::process::exit(2);
    }
    let me = s.peers[s.me];
    let gone: Vec<usize> =
        (0..s.peers.len()).filter(|&r| r != s.me && s.peers[r].same_node(me) && peers::gone(s.peers[r].pid)).collect();
    let Some(&lost) = gone.first() else { return };
    if (0..s.me).all(|r| gone.contains(&r)) {
        crate::io::term::err(format_args!(
            "error: rank {lost} of {} (pid {}) ended without reporting an error (killed by a signal or the \
             out-of-memory killer); rank {} stopped the job. {}",
            s.peers.len(),
            s.peers[lost].pid,
            s.me,
            s.hint
        ));
    }
    std::process::exit(2);
}

/// Tells every other rank that this one failed (and printed why), then `MPI_Abort`.
pub fn abort_after_notice(code: i32) -> ! {
    with(|s| {
        let notices = s.notices.as_ref().expect("notices live until finalize");
        for r in (0..s.peers.len()).filter(|&r| r != s.me) {
            notices.process_at_rank(r as i32).send(&(s.me as u64));
        }
        s.world.abort(code)
    })
}
