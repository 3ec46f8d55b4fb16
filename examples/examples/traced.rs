//! One trace from a request to the job it enqueued: the application's
//! `tracing` subscriber has an OpenTelemetry layer, so `enqueue` inside the
//! request's span stores the W3C trace context with the job, and the
//! attempt's `jobq.job` span continues that trace — here in the same
//! process, in production in whichever worker runs it. Spans go to an
//! in-memory exporter and are printed at the end; a service would export
//! them with `opentelemetry-otlp` instead.
//!
//! ```sh
//! cargo run -p jobq-examples --example traced
//! ```

use std::time::Duration;

use jobq_runtime::{Jobq, Worker, job};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Sends an order's confirmation.
#[job(queue = "mail")]
async fn confirm_order(order_id: u64) {
    tracing::info!(order_id, "confirmation sent");
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("shop")))
        .init();

    let jobq = Jobq::connect("sqlite::memory:").await?;
    jobq.migrate().await?;
    // The request: its span carries the trace the job continues.
    let request = tracing::info_span!("POST /orders");
    let job = jobq
        .enqueue(ConfirmOrder::new(42))
        .instrument(request)
        .await?;
    println!(
        "stored with the job: {:?}",
        jobq.job(job.id).await?.and_then(|j| j.metadata)
    );

    Worker::builder(jobq.clone())
        .queue("mail", 1)
        .build()?
        .run_until(tokio::time::sleep(Duration::from_millis(500)))
        .await?;

    for span in exporter.get_finished_spans()? {
        println!(
            "{:<14} trace {} span {} parent {}",
            span.name,
            span.span_context.trace_id(),
            span.span_context.span_id(),
            span.parent_span_id
        );
    }
    provider.shutdown()?;
    Ok(())
}
