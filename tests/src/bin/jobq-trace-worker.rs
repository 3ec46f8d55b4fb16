//! A worker process of the trace propagation test (`tests/tests/trace.rs`):
//! one real [`Worker`] serving one queue, in a process whose `tracing`
//! subscriber exports OpenTelemetry spans to memory. It prints `started`
//! once its worker runs; each `jobq_trace_probe` job prints `ran <id>
//! <trace id>` (the trace its handler runs in); every `jobq.job` span the
//! exporter has finished is printed once as `span <trace id> <span id>
//! <parent span id>`. It shuts down gracefully when its stdin closes.
//!
//! - `JOBQ_TRACE_URL`: the database; `JOBQ_TRACE_QUEUE`: the queue.

use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;

use jobq_runtime::{JobContext, Jobq, Worker, job};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Says which trace it runs in.
#[job(name = "jobq_trace_probe")]
async fn probe(ctx: JobContext, n: u64) {
    let _ = n;
    let context = tracing::Span::current().context();
    say(format_args!(
        "ran {} {}",
        ctx.id(),
        context.span().span_context().trace_id()
    ));
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let tracer = provider.tracer("jobq-trace-worker");
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tracer))
        .init();
    let jobq = Jobq::connect(&var("JOBQ_TRACE_URL"))
        .await
        .expect("connect");
    let handle = Worker::builder(jobq)
        .queue_unchecked(var("JOBQ_TRACE_QUEUE"), 2)
        .poll_interval(Duration::from_millis(100))
        .build()
        .expect("a worker")
        .start();
    // The finished `jobq.job` spans, each said once.
    tokio::spawn(async move {
        let mut said = HashSet::new();
        loop {
            for span in exporter.get_finished_spans().unwrap_or_default() {
                let id = span.span_context.span_id();
                if span.name == "jobq.job" && said.insert(id) {
                    say(format_args!(
                        "span {} {} {}",
                        span.span_context.trace_id(),
                        id,
                        span.parent_span_id
                    ));
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    say(format_args!("started"));
    jobq_tests::process::until_stdin_closes().await;
    let result = handle.shutdown(Duration::from_secs(10)).await;
    let _ = provider.shutdown();
    // The stdin reader is a blocking thread that would hold the runtime open.
    std::process::exit(i32::from(result.is_err()));
}
