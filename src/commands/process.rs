//! The process around a command: a chat template's rendering worker, the CPU's set-up before
//! the command runs, and the one `error:` line and exit status after it.

/// When this process was started as a chat template's rendering worker
/// ([`crate::data::chat::bounded`]), runs it and exits; otherwise lets later renderings start
/// workers from this executable. Called before anything else.
pub fn serve_as_worker_or_enable() {
    if std::env::args().nth(1).as_deref() == Some(crate::data::chat::bounded::WORKER_ARG) {
        std::process::exit(crate::data::chat::bounded::worker_main());
    }
    if let Ok(exe) = std::env::current_exe() {
        crate::data::chat::bounded::enable(exe);
    }
}

/// Sets the CPU up for a command, then runs it on the global pool and exits with its status
/// (2 and one `error:` line when it fails). `keeps_arenas`: the command keeps glibc's
/// per-thread arenas and freed memory (`data prepare` tokenizes on every core at once, which on
/// one shared arena waits on its lock, 2.1× slower on 2 cores; the server hands a large
/// request's buffers back).
pub fn run(keeps_arenas: bool, command: impl FnOnce() -> anyhow::Result<i32> + Send) -> ! {
    // A GPU runtime's failure (no driver, no adapter, out of device memory) panics in its
    // engine thread: one `error:` line instead.
    crate::guard::on_unguarded_panic(crate::device::failure::line);
    if !keeps_arenas {
        crate::device::keep_freed_memory();
    }
    // Denormals are flushed to zero unless NORMLAB_DENORMALS=keep (IEEE gradual underflow):
    // see crate::device::flush_denormals. A rank of a job shares its node's cores with the
    // node's other ranks.
    let threads = crate::dist::launch::threads_per_rank();
    if std::env::var("NORMLAB_DENORMALS").as_deref() != Ok("keep") {
        crate::device::flush_denormals(threads);
    } else {
        crate::device::pool(false, threads);
    }
    match crate::device::on_pool(command) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            crate::io::term::err(format_args!("error: {e:#}"));
            std::process::exit(2);
        }
    }
}
