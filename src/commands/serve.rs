//! `normlab serve`: a trained run behind an OpenAI-compatible HTTP server.

use crate::serve::{ServeOptions, Server};

pub fn serve(o: ServeOptions) -> anyhow::Result<()> {
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
        "serving {} ({}) on http://{}: POST /v1/completions{task}, GET /health, GET /metrics; Ctrl-C stops",
        server.model,
        server.recipe,
        server.addr
    );
    server.wait()?;
    errln!("stopped");
    Ok(())
}
