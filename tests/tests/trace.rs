//! Trace propagation, on every backend: a job enqueued inside a span that
//! carries an OpenTelemetry context — in the caller's transaction
//! (`enqueue_in`) or not — stores the W3C trace context in its metadata,
//! and its attempt's `jobq.job` span, in a worker of another process,
//! continues that trace as a child of the enqueuing span: one trace from
//! the request to the handler, seen through an in-memory exporter in each
//! process. Outside a span, or in a span of a subscriber without
//! OpenTelemetry, nothing is stored. Its own test binary: it installs the
//! process's subscriber.

use std::sync::OnceLock;
use std::time::Duration;

use jobq_runtime::{Backend, JobContext, JobStatus, Jobq, job};
use jobq_tests::{TestDb, WorkerProcess, on, unique_queue, wait_for_status, wait_until};
use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tokio::process::Command;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-trace-worker");
const LONG: Duration = Duration::from_secs(60);

/// The worker process's job, here for its name and payload.
#[job(name = "jobq_trace_probe")]
async fn probe(ctx: JobContext, n: u64) {
    let _ = (ctx, n);
}

/// This process's tracer provider, installed once as the global subscriber's
/// OpenTelemetry layer (before the test's database, whose set-up would
/// install a subscriber of its own).
fn install() {
    static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
    PROVIDER.get_or_init(|| {
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(InMemorySpanExporter::default())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("jobq-tests"));
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("the only subscriber of this binary");
        provider
    });
}

/// Enqueues a probe in a transaction of the handle's own pool, committed.
async fn enqueue_in(jobq: &Jobq, queue: &str) -> i64 {
    macro_rules! in_tx {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = jobq
                .enqueue_in_with(&mut *tx, Probe::new(1), on(queue))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            e.id
        }};
    }
    match jobq.backend() {
        Backend::MySql => in_tx!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => in_tx!(jobq.pg_pool().unwrap()),
        _ => in_tx!(jobq.sqlite_pool().unwrap()),
    }
}

async fn one_trace_from_a_request_to_the_handler_in_another_process(db: TestDb) {
    let jobq = db.jobq().await;
    jobq.migrate().await.unwrap();
    let queue = unique_queue("trace");
    let mut command = Command::new(WORKER);
    command
        .env("JOBQ_TRACE_URL", db.url())
        .env("JOBQ_TRACE_QUEUE", &queue);
    let process = WorkerProcess::start(command, LONG).await;

    // A request's span: one job in its transaction, one not.
    let request = tracing::info_span!("http.request", http.route = "/orders");
    let context: SpanContext = request.context().span().span_context().clone();
    assert!(
        context.is_valid(),
        "the test's own subscriber exports spans"
    );
    let in_tx = enqueue_in(&jobq, &queue).instrument(request.clone()).await;
    let plain = jobq
        .enqueue_with(Probe::new(2), on(&queue))
        .instrument(request.clone())
        .await
        .unwrap()
        .id;
    // Outside any span, and in a span of a subscriber without OpenTelemetry.
    let outside = jobq
        .enqueue_with(Probe::new(3), on(&queue))
        .await
        .unwrap()
        .id;
    let untraced = async {
        jobq.enqueue_with(Probe::new(4), on(&queue))
            .instrument(tracing::info_span!("no.otel"))
            .await
    }
    .with_subscriber(tracing_subscriber::registry())
    .await
    .unwrap()
    .id;

    let traceparent = format!("00-{}-{}-", context.trace_id(), context.span_id());
    for id in [in_tx, plain] {
        let info = jobq.job(id).await.unwrap().unwrap();
        let stored = info
            .metadata
            .as_ref()
            .and_then(|m| m["traceparent"].as_str());
        assert!(
            stored.is_some_and(|t| t.starts_with(&traceparent)),
            "job {id}: {:?}, expected {traceparent}…",
            info.metadata
        );
    }
    for id in [outside, untraced] {
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.metadata, None, "job {id}: nothing stored");
    }
    for id in [in_tx, plain, outside, untraced] {
        wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    }
    // In the worker's process: each handler ran in the request's trace,
    // under a `jobq.job` span whose parent is the request's span.
    let trace = context.trace_id().to_string();
    let parent = context.span_id().to_string();
    wait_until("the worker exported both jobs' spans", LONG, || async {
        let printed = process.printed();
        let children = printed
            .iter()
            .filter(|l| {
                let parts: Vec<&str> = l.split(' ').collect();
                parts.len() == 4 && parts[0] == "span" && parts[1] == trace && parts[3] == parent
            })
            .count();
        children == 2
    })
    .await;
    let printed = process.printed();
    for id in [in_tx, plain] {
        assert!(
            printed.contains(&format!("ran {id} {trace}")),
            "job {id} in trace {trace}: {printed:?}"
        );
    }
    for id in [outside, untraced] {
        let ran = printed
            .iter()
            .find(|l| l.starts_with(&format!("ran {id} ")))
            .unwrap_or_else(|| panic!("job {id} ran: {printed:?}"));
        assert!(
            !ran.ends_with(&trace),
            "job {id} in a trace of its own: {ran}"
        );
    }
    process.stop(LONG).await;
}

jobq_tests::on_every_backend!(setup = install; one_trace_from_a_request_to_the_handler_in_another_process);
