//! A worker's tasks each run in a span under one `jobq.worker` span, with
//! fields named `worker.*`, `queue.*` and `job.*`. Its own test binary: the
//! test installs the process's subscriber.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::{Enqueue, Worker, job};
use jobq_tests::{TestDb, unique_queue, wait_until};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[job(name = "worker_spans_quick")]
async fn quick(n: u64) {
    let _ = n;
}

/// A span as the capture saw it open.
#[derive(Debug, Clone)]
struct Captured {
    name: &'static str,
    parent: Option<&'static str>,
    fields: BTreeMap<String, String>,
}

/// Records every span opened, with its parent's name and its fields.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> tracing_subscriber::Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.name());
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Captured {
                name: attrs.metadata().name(),
                parent,
                fields,
            });
    }
}

impl Capture {
    fn spans(&self) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_worker_task_runs_in_a_child_span_of_the_worker_span() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone()))
        .expect("the only subscriber of this binary");
    let db = TestDb::sqlite().expect("SQLite is always available");
    let jobq = db.jobq().await;
    let queue = unique_queue("worker-spans");
    let worker_id = unique_queue("spans-worker");
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .worker_id(&worker_id)
        .poll_interval(Duration::from_millis(20))
        .prune_finished_after(Duration::from_secs(3600))
        .cron("0 0 1 1 *", Quick::new(0))
        .build()
        .expect("build")
        .start();
    let enqueued = jobq
        .enqueue_with(Quick::new(1), Enqueue::new().queue(&queue))
        .await
        .expect("enqueue");
    wait_until("the job is done", Duration::from_secs(20), || async {
        jobq.counts(&queue).await.expect("counts").done == 1
    })
    .await;
    handle
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");

    let spans = capture.spans();
    let workers: Vec<&Captured> = spans.iter().filter(|s| s.name == "jobq.worker").collect();
    assert_eq!(workers.len(), 1, "one worker span: {spans:#?}");
    assert_eq!(
        workers[0].fields.get("worker.id"),
        Some(&worker_id),
        "{workers:?}"
    );
    let children: BTreeSet<&str> = spans
        .iter()
        .filter(|s| s.parent == Some("jobq.worker"))
        .map(|s| s.name)
        .collect();
    for task in [
        "jobq.claim",
        "jobq.completer",
        "jobq.rescuer",
        "jobq.heartbeat",
        "jobq.reaper",
        "jobq.pauses",
        "jobq.presence",
        "jobq.pruner",
        "jobq.cron",
        "jobq.listener",
        "jobq.shutdown",
    ] {
        assert!(
            children.contains(task),
            "no {task} span under jobq.worker: {children:?}"
        );
    }
    let field = |name: &str, key: &str| -> Option<String> {
        spans
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.fields.get(key).cloned())
    };
    assert_eq!(field("jobq.claim", "queue.name"), Some(queue.clone()));
    assert_eq!(
        field("jobq.cron", "job.name").as_deref(),
        Some("worker_spans_quick")
    );
    let job = spans
        .iter()
        .find(|s| s.name == "jobq.job")
        .expect("a job span");
    assert_eq!(job.parent, Some("jobq.claim"), "{job:?}");
    assert_eq!(job.fields.get("job.id"), Some(&enqueued.id.to_string()));
    assert_eq!(
        job.fields.get("job.name").map(String::as_str),
        Some("worker_spans_quick")
    );
    assert_eq!(job.fields.get("queue.name"), Some(&queue));
}
