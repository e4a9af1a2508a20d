//! `normlab serve`: a trained run behind an OpenAI-compatible HTTP server.

use crate::serve::{ServeOptions, Server, Stopped};

/// Serves until stopped; the exit status is training's: 130 after SIGINT, 143 after SIGTERM.
pub fn serve(o: ServeOptions) -> anyhow::Result<i32> {
    let loopback = o.host == "127.0.0.1" || o.host == "localhost" || o.host == "::1";
    let server = Server::start(&o)?;
    if !loopback {
        errln!(
            "warning: listening on {} is reachable from other machines, and the server has no authentication",
            o.host
        );
    }
    let task = if server.pairs { ", POST /v1/normalize (pairs)" } else { "" };
    outln!(
        "serving {} ({}) on http://{}: POST /v1/completions, POST /v1/chat/completions{task}, GET /v1/models, \
         GET /health, GET /metrics; Ctrl-C stops",
        server.model,
        server.recipe,
        server.addr
    );
    let stopped = server.wait()?;
    match stopped {
        Stopped::Signal(s) => errln!("stopped by {}", crate::stop::describe(s)),
        Stopped::Asked => errln!("stopped"),
    }
    Ok(stopped.exit_code())
}

/// `normlab serve`'s flags, checked: a shutdown grace within an hour.
pub fn serve_command(
    checkpoint: std::path::PathBuf,
    host: String,
    port: u16,
    max_batch: usize,
    queue: usize,
    shutdown_grace: f64,
) -> anyhow::Result<i32> {
    anyhow::ensure!(
        shutdown_grace.is_finite() && (0.0..=3600.0).contains(&shutdown_grace),
        "--shutdown-grace must be between 0 and 3600 seconds"
    );
    let grace = std::time::Duration::from_secs_f64(shutdown_grace);
    serve(ServeOptions { checkpoint, host, port, max_batch, queue, signals: true, grace })
}
