//! Accepting connections: HTTP/1.1 with a header-read timeout (a client that sends its request
//! head too slowly is dropped after [`HEADER_TIMEOUT`]), and a bounded graceful shutdown: on
//! the first stop request the port closes, the requests in flight get up to the grace period
//! to finish, and the connections left are then dropped; a second SIGINT or SIGTERM during
//! that time ends the process at once.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long a client may take to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// [`super::Server::stop`] (an in-process server).
    Asked,
    /// SIGINT or SIGTERM, by number.
    Signal(i32),
}

impl Stopped {
    /// The process's exit status, as training's: 0, or 128 + the signal (130, 143).
    pub fn exit_code(self) -> i32 {
        match self {
            Stopped::Asked => 0,
            Stopped::Signal(s) => 128 + s,
        }
    }
}

/// Serves `router` on `listener` until `stop` resolves, then shuts down within `grace`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    stop: impl Future<Output = Stopped>,
    grace: Duration,
) -> Stopped {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    tokio::pin!(stop);
    let why = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router.clone()));
                    let watched = graceful.watch(conn);
                    tokio::spawn(async move {
                        let _ = watched.await;
                    });
                }
                // Out of file descriptors or a connection reset before accept: try again shortly.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            why = &mut stop => break why,
        }
    };
    drop(listener);
    if let Stopped::Signal(_) = why {
        tokio::spawn(exit_on_second_signal());
    }
    let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
    why
}

/// `rx` fired, or with `signals` SIGINT/SIGTERM came.
pub async fn stop_requested(rx: tokio::sync::oneshot::Receiver<()>, signals: bool) -> Stopped {
    if !signals {
        let _ = rx.await;
        return Stopped::Asked;
    }
    tokio::select! {
        _ = rx => Stopped::Asked,
        s = next_signal() => Stopped::Signal(s),
    }
}

/// During the grace period: a second signal ends the process now.
async fn exit_on_second_signal() {
    let s = next_signal().await;
    crate::io::term::err(format_args!("stopped by a second signal before the requests in flight were answered"));
    std::process::exit(Stopped::Signal(s).exit_code());
}

/// The next SIGINT or SIGTERM, by number.
async fn next_signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut i), Ok(mut t)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            return tokio::select! { _ = i.recv() => libc::SIGINT, _ = t.recv() => libc::SIGTERM };
        }
        std::future::pending().await
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        2
    }
}
