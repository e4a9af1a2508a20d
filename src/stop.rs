//! SIGINT and SIGTERM as requests to stop at the next safe point (a training step's end),
//! where the run writes a checkpoint and `status: stopped`; a second signal ends the process at
//! once. SIGTERM is what Slurm sends before it preempts or times out a job.
//!
//! Only commands that can stop cleanly install the handler ([`install`]): everywhere else the
//! signals keep their default action and end the process at once.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first stop signal received (0 for none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// A stop signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, Slurm's preemption and time limit).
    Terminate,
}

impl Signal {
    /// The signal numbered `sig`, if it is a stop signal.
    pub fn from_raw(sig: i32) -> Option<Self> {
        match sig {
            libc::SIGINT => Some(Self::Interrupt),
            libc::SIGTERM => Some(Self::Terminate),
            _ => None,
        }
    }

    pub fn raw(self) -> i32 {
        match self {
            Self::Interrupt => libc::SIGINT,
            Self::Terminate => libc::SIGTERM,
        }
    }

    /// The shell's exit status for a process ended by this signal: 130 or 143.
    pub fn exit_code(self) -> i32 {
        128 + self.raw()
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe calls here: an atomic swap, and _exit on the second signal.
    if RECEIVED.swap(sig, Ordering::SeqCst) != 0 {
        // SAFETY: _exit is async-signal-safe and ends the process without running anything.
        unsafe { libc::_exit(128 + sig) }
    }
}

/// From now on SIGINT and SIGTERM request a stop ([`requested`]) instead of ending the process;
/// the second one still ends it at once.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only touches an atomic and calls _exit.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut act.sa_mask);
            act.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// The stop signal received since [`install`], if any.
pub fn requested() -> Option<Signal> {
    Signal::from_raw(RECEIVED.load(Ordering::SeqCst))
}

/// Sends `signal` to process `pid` (a child to stop the same way).
pub fn forward(pid: u32, signal: Signal) {
    // SAFETY: kill(2) on a child's pid; no memory is shared.
    unsafe {
        libc::kill(pid as libc::pid_t, signal.raw());
    }
}

/// A signal number in words: `SIGKILL (signal 9)`.
pub fn describe(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => "a signal",
    };
    format!("{name} (signal {sig})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_to_the_shell_exit_codes_and_names() {
        assert_eq!(Signal::Interrupt.exit_code(), 130);
        assert_eq!(Signal::Terminate.exit_code(), 143);
        assert_eq!(describe(9), "SIGKILL (signal 9)");
        assert_eq!(describe(15), "SIGTERM (signal 15)");
        assert_eq!(Signal::from_raw(9), None);
    }
}
