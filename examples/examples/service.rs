//! jobq embedded in an axum service: HTTP and the worker in one process,
//! shut down together on Ctrl-C (requests first, then the worker finishes
//! or hands back its jobs).
//!
//! ```sh
//! cargo run -p jobq-examples --example service
//! curl -s -XPOST localhost:3000/signup -H 'content-type: application/json' -d '{"email":"ada@example.com"}'
//! curl -s localhost:3000/jobs/1
//! curl -s localhost:3000/metrics
//! ```
//!
//! `DATABASE_URL` picks the SQLite file (default `sqlite://service.db`);
//! `PORT` the port (default 3000).

use std::time::Duration;

use jobq_examples::service::{App, install_prometheus};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    // Before jobq records anything: its handles bind to this recorder.
    let metrics = install_prometheus()?;
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "sqlite://service.db".into());
    let port = std::env::var("PORT").unwrap_or_else(|_| "3000".into());
    let app = App::open(&url).await?.with_metrics(metrics);
    // The queue gauges (lag, expired leases, …) from one stats read per 15 s.
    let worker = app
        .worker()
        .stats_gauges_every(Duration::from_secs(15))
        .build()?
        .start();
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!(
        "listening on http://{}, jobs in {url}",
        listener.local_addr()?
    );
    axum::serve(listener, app.router())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    worker.shutdown(Duration::from_secs(30)).await?;
    Ok(())
}
