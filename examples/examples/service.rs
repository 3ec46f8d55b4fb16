//! jobq embedded in an axum service: HTTP and the worker in one process,
//! shut down together on SIGTERM (what systemd, Docker and Kubernetes send)
//! or SIGINT (Ctrl-C): the server stops accepting connections and answers
//! the requests it has, then the worker finishes its running jobs (30 s at
//! most) and hands back the rest; the process exits 0 with nothing left
//! `processing`.
//!
//! ```sh
//! cargo run -p jobq-examples --example service
//! curl -s -XPOST localhost:3000/signup -H 'content-type: application/json' -d '{"email":"ada@example.com"}'
//! curl -s localhost:3000/jobs/1
//! curl -s localhost:3000/metrics
//! ```
//!
//! `DATABASE_URL` picks the SQLite database (default: `jobq-service.db` in
//! the OS temp directory, kept between runs); `PORT` the port (default
//! 3000, `0` for any free one); `DASHBOARD_HOSTS` the host names (comma
//! separated) the dashboard at `/admin/jobs` answers to besides localhost
//! and IP addresses.
//!
//! Logs go to stdout, coloured only on a terminal (never with `NO_COLOR`).
//! A closed stdout or stderr (the log reader went away) ends the logging,
//! not the service: it goes on serving and shuts down as usual.

// Output goes through `tracing` or `say`, which a closed pipe cannot panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::time::Duration;

use jobq_examples::service::{App, install_prometheus};
use tokio::signal::unix::{SignalKind, signal};

/// How long running jobs get to finish at shutdown before they are handed back.
const DRAIN: Duration = Duration::from_secs(30);

/// A line on stdout; dropped if stdout is closed.
fn say(line: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let colours = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_ansi(colours)
        // A log line that cannot be written is dropped, not reported on a
        // stderr that may be closed too.
        .log_internal_errors(false)
        .init();
    // Before the first log line that says the service is up: a signal that
    // arrives from then on shuts it down gracefully.
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    // Before jobq records anything: its handles bind to this recorder.
    let metrics = install_prometheus()?;
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| {
        let file = std::env::temp_dir().join("jobq-service.db");
        format!("sqlite://{}", file.display())
    });
    let port = std::env::var("PORT").unwrap_or_else(|_| "3000".into());
    let hosts = std::env::var("DASHBOARD_HOSTS").unwrap_or_default();
    let app = App::open(&url)
        .await?
        .with_metrics(metrics)
        .with_dashboard_hosts(hosts.split(',').map(str::trim).filter(|h| !h.is_empty()));
    // The queue gauges (lag, expired leases, …) from one stats read per 15 s.
    let worker = app
        .worker()
        .stats_gauges_every(Duration::from_secs(15))
        .build()?
        .start();
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    say(format_args!(
        "listening on http://{}, users and jobs in {url}",
        listener.local_addr()?
    ));
    axum::serve(listener, app.router())
        .with_graceful_shutdown(async move {
            let name = tokio::select! {
                _ = sigterm.recv() => "SIGTERM",
                _ = sigint.recv() => "SIGINT",
            };
            tracing::info!(
                signal = name,
                "shutting down: no new connections, answering the requests in flight"
            );
        })
        .await?;
    tracing::info!(
        drain = ?DRAIN,
        "HTTP server stopped; stopping the worker: running jobs finish, the rest go back to pending"
    );
    worker.shutdown(DRAIN).await?;
    tracing::info!("worker stopped, no job left processing; bye");
    Ok(())
}
