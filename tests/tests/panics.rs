//! Panics outside the handler's poll: in the drop of a handler future, in a
//! payload's `Deserialize`, in a log line during the settle. Each attempt
//! still ends in a settle (a failed attempt naming the panic) or a release,
//! and a clean shutdown leaves nothing `processing`.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::__inject::{Action, Point, arm};
use jobq_runtime::{Enqueue, JobContext, JobStatus, Jobq, State, Worker, WorkerHandle, job};
use jobq_tests::{Recorder, TestDb, fixture, unique_queue, wait_for_status, wait_until};
use tracing_subscriber::layer::SubscriberExt;

const LONG: Duration = Duration::from_secs(20);

/// Panics when dropped, unless already unwinding.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a guard panicked in its drop");
        }
    }
}

/// Outlives its timeout holding a guard whose `Drop` panics.
#[job(
    name = "panics_in_drop_after_timeout",
    timeout = "100ms",
    max_attempts = 1
)]
async fn drop_panics_after_timeout(ctx: &JobContext, recorder: State<Recorder>) {
    recorder.record(ctx.id(), ctx.attempt());
    let _guard = PanicsOnDrop;
    std::future::pending::<()>().await;
}

/// A payload field whose `Deserialize` panics.
#[derive(Debug, Clone, serde::Serialize)]
struct Explosive(u64);

impl<'de> serde::Deserialize<'de> for Explosive {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        panic!("deserializing Explosive panicked")
    }
}

#[job(name = "panics_in_decode", max_attempts = 1)]
async fn decode_panics(ctx: &JobContext, recorder: State<Recorder>, value: Explosive) {
    let _ = value;
    recorder.record(ctx.id(), ctx.attempt());
}

#[job(name = "panics_plain")]
async fn plain(ctx: &JobContext, recorder: State<Recorder>, fail: bool) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    if fail {
        Err("failed on purpose".into())
    } else {
        Ok(())
    }
}

/// Queues whose job spans' events make [`PanickingLayer`] panic, as a
/// subscriber writing to a closed pipe does.
static BROKEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The job ids of every settle write that was tried again, as
/// [`PanickingLayer`] saw them (the worker's "retrying" line, logged inside
/// the job's span or naming its `job.id`).
static SETTLE_RETRIES: Mutex<Vec<i64>> = Mutex::new(Vec::new());

const SETTLE_RETRY_MESSAGE: &str = "settling the attempt failed; retrying";

/// Panics on every event inside a `jobq.job` span of a queue in [`BROKEN`].
struct PanickingLayer;

/// The queue and job id of a `jobq.job` span.
struct SpanJob {
    queue: Option<String>,
    id: Option<i64>,
}

/// The fields of a span or event this layer looks at.
#[derive(Default)]
struct Fields {
    queue: Option<String>,
    job_id: Option<i64>,
    message: Option<String>,
}

impl tracing::field::Visit for Fields {
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        if field.name() == "job.id" {
            self.job_id = Some(value);
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "queue.name" {
            self.queue = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "queue.name" => self.queue = Some(format!("{value:?}")),
            "message" => self.message = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S> tracing_subscriber::Layer<S> for PanickingLayer
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if attrs.metadata().name() == "jobq.job"
            && fields.queue.is_some()
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(SpanJob {
                queue: fields.queue,
                id: fields.job_id,
            });
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let spans: Vec<(Option<String>, Option<i64>)> = ctx
            .event_scope(event)
            .into_iter()
            .flatten()
            .filter_map(|span| {
                span.extensions()
                    .get::<SpanJob>()
                    .map(|job| (job.queue.clone(), job.id))
            })
            .collect();
        if fields.message.as_deref() == Some(SETTLE_RETRY_MESSAGE)
            && let Some(id) = fields
                .job_id
                .or_else(|| spans.iter().find_map(|(_, id)| *id))
        {
            SETTLE_RETRIES
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(id);
        }
        let broken: HashSet<String> = BROKEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        for (queue, _) in spans {
            if let Some(queue) = queue
                && broken.contains(queue.trim_matches('"'))
            {
                panic!("failed printing to stderr: Broken pipe (os error 32)");
            }
        }
    }
}

/// Runs `test` on a runtime whose threads all log to [`PanickingLayer`]
/// (their default subscriber, so other tests of this binary keep theirs).
fn with_panicking_layer(test: impl std::future::Future<Output = ()>) {
    fn install() {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(PanickingLayer));
        std::mem::forget(tracing::dispatcher::set_default(&dispatch));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(install)
        .build()
        .expect("runtime");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(PanickingLayer));
    tracing::dispatcher::with_default(&dispatch, || runtime.block_on(test));
}

fn worker(jobq: &Jobq, queue: &str, recorder: &Recorder) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 4)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(50))
        .shutdown_timeout(Duration::from_secs(5))
}

/// A migrated handle, a fresh queue (named after `queue`), a recorder, and a
/// [`worker`] started on them.
async fn started(db: &TestDb, queue: &str) -> (Jobq, String, Recorder, WorkerHandle) {
    let jobq = db.jobq().await;
    let queue = unique_queue(queue);
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, &recorder)
        .build()
        .expect("build")
        .start();
    (jobq, queue, recorder, handle)
}

/// Waits until the worker holds no job, shuts it down and checks that
/// nothing on `queue` is left `processing`.
async fn let_go_and_stop(jobq: &Jobq, queue: &str, handle: WorkerHandle) {
    wait_until("the worker holds nothing", LONG, || async {
        handle.held_jobs() == 0
    })
    .await;
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    nothing_processing(jobq, queue).await;
}

async fn nothing_processing(jobq: &Jobq, queue: &str) {
    let counts = jobq.counts(queue).await.expect("counts");
    assert_eq!(counts.processing, 0, "{counts:?}");
}

async fn a_panic_dropping_a_timed_out_handler_fails_the_attempt(db: TestDb) {
    let (jobq, queue, _, handle) = started(&db, "panics-drop").await;
    let id = jobq
        .enqueue_with(DropPanicsAfterTimeout {}, Enqueue::new().queue(&queue))
        .await
        .expect("enqueue")
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    let error = info.last_error.unwrap_or_default();
    assert!(error.contains("a guard panicked in its drop"), "{error}");
    let_go_and_stop(&jobq, &queue, handle).await;
}

async fn a_panic_in_a_payloads_deserialize_fails_the_attempt(db: TestDb) {
    let (jobq, queue, recorder, handle) = started(&db, "panics-decode").await;
    let id = jobq
        .enqueue_with(
            DecodePanics {
                value: Explosive(7),
            },
            Enqueue::new().queue(&queue),
        )
        .await
        .expect("enqueue")
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    let error = info.last_error.unwrap_or_default();
    assert!(
        error.contains("deserializing Explosive panicked"),
        "{error}"
    );
    assert!(recorder.runs(id).is_empty(), "the handler must not run");
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    nothing_processing(&jobq, &queue).await;
}

/// Ten jobs, every other one failing, on a queue whose job spans' events
/// panic; returns once every job reached its final status (not yet whether
/// the worker let go of them), with their ids.
async fn broken_log_jobs(jobq: &Jobq, recorder: &Recorder) -> (WorkerHandle, String, Vec<i64>) {
    let queue = unique_queue("panics-log");
    BROKEN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(queue.clone());
    let handle = worker(jobq, &queue, recorder)
        .build()
        .expect("build")
        .start();
    let mut ids = Vec::new();
    for n in 0..10 {
        let job = Plain { fail: n % 2 == 1 };
        let options = Enqueue::new().queue(&queue).max_attempts(1);
        ids.push(jobq.enqueue_with(job, options).await.expect("enqueue").id);
    }
    for (n, id) in ids.iter().enumerate() {
        let status = if n % 2 == 1 {
            JobStatus::Failed
        } else {
            JobStatus::Done
        };
        wait_for_status(jobq, *id, status, LONG).await;
    }
    (handle, queue, ids)
}

/// [`broken_log_jobs`] run to the end and the worker shut down: nothing is
/// left `processing`. The recorder, and the jobs' ids.
async fn broken_log_jobs_drained(db: &TestDb) -> (Recorder, Vec<i64>) {
    let jobq = db.jobq().await;
    let recorder = Recorder::default();
    let (handle, queue, ids) = broken_log_jobs(&jobq, &recorder).await;
    let_go_and_stop(&jobq, &queue, handle).await;
    (recorder, ids)
}

async fn a_log_line_that_panics_during_the_settle_does_not_stop_it(db: TestDb) {
    let (recorder, _) = broken_log_jobs_drained(&db).await;
    assert_eq!(recorder.totals(), (10, 10));
}

/// The write that settles a failed attempt runs outside the job's span: the
/// database driver's statement log (an event like any other) cannot panic in
/// a subscriber that panics on the job's events, lose a write that went
/// through, and make the settle try again with backoff while the worker
/// keeps holding a job whose row is already final.
async fn a_log_line_that_panics_in_the_jobs_span_costs_its_settle_no_second_write(db: TestDb) {
    let (_, ids) = broken_log_jobs_drained(&db).await;
    let retried: Vec<i64> = SETTLE_RETRIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .filter(|id| ids.contains(id))
        .collect();
    assert!(
        retried.is_empty(),
        "settles tried again after a log line panicked: jobs {retried:?}"
    );
}

jobq_tests::on_every_backend!(
    a_panic_dropping_a_timed_out_handler_fails_the_attempt,
    a_panic_in_a_payloads_deserialize_fails_the_attempt,
    a_panic_or_drop_at_any_point_ends_in_a_settle_or_a_release,
    a_claim_loop_that_panics_stops_the_worker_with_an_error,
    a_heartbeat_that_panics_is_restarted_and_keeps_the_leases,
);

/// Under a subscriber that panics on every event of the job (a closed stderr).
mod broken_log {
    use super::*;

    jobq_tests::on_every_backend!(
        run_with = with_panicking_layer;
        a_log_line_that_panics_during_the_settle_does_not_stop_it,
        a_log_line_that_panics_in_the_jobs_span_costs_its_settle_no_second_write,
    );
}

#[job(name = "panics_sleeper", max_attempts = 1)]
async fn sleeper(ctx: &JobContext, recorder: State<Recorder>, ms: u64) {
    recorder.record(ctx.id(), ctx.attempt());
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Every injection point between a claim and its settle, with whether a
/// fault there stops the worker (it is in a claim loop) rather than only
/// failing or releasing the attempt.
const POINTS: [(Point, bool); 9] = [
    (Point::Claimed, true),
    (Point::Buffered, true),
    (Point::BeforeExecute, false),
    (Point::Decode, false),
    (Point::BeforeSettle, false),
    (Point::CompleterSend, false),
    (Point::CompleterWrite, false),
    (Point::ShutdownRelease, true),
    (Point::Heartbeat, false),
];

async fn failed_already(handle: &WorkerHandle) -> bool {
    tokio::time::timeout(Duration::ZERO, handle.failed())
        .await
        .is_ok()
}

/// One fault at `point`: every job ends settled or released, nothing is
/// `processing` after the shutdown, and a clean worker then finishes what was
/// released.
async fn a_fault_at(jobq: &Jobq, point: Point, action: Action, stops_worker: bool, jobs: usize) {
    let queue = unique_queue("panics-at");
    let recorder = Recorder::default();
    arm(&queue, point, action, 1);
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(20))
        .lease(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_millis(50))
        .shutdown_timeout(Duration::from_secs(5))
        .build()
        .expect("build")
        .start();
    let options = Enqueue::new().queue(&queue);
    let ids: Vec<i64> = jobq
        .enqueue_many_with((0..jobs).map(|_| (Sleeper { ms: 120 }, options.clone())))
        .await
        .expect("enqueue")
        .into_iter()
        .map(|e| e.id)
        .collect();
    let what = format!("{point:?}/{action:?}: every job settled, or the worker failed");
    wait_until(&what, LONG, || async {
        let counts = jobq.counts(&queue).await.expect("counts");
        counts.pending + counts.processing == 0 || failed_already(&handle).await
    })
    .await;
    let result = handle.shutdown(Duration::from_secs(5)).await;
    match &result {
        Ok(()) => {}
        Err(jobq_runtime::Error::Panicked { .. }) if stops_worker => {}
        Err(error) => panic!("{point:?}/{action:?}: shutdown returned {error:?}"),
    }
    let counts = jobq.counts(&queue).await.expect("counts");
    assert_eq!(counts.processing, 0, "{point:?}/{action:?}: {counts:?}");
    // What was released runs on a worker without faults.
    let clean = worker(jobq, &queue, &recorder)
        .build()
        .expect("build")
        .start();
    for id in &ids {
        wait_until(
            &format!("{point:?}/{action:?}: job {id} finished"),
            LONG,
            || async {
                let info = jobq.job(*id).await.expect("job").expect("row");
                matches!(info.status, JobStatus::Done | JobStatus::Failed)
            },
        )
        .await;
        let info = jobq.job(*id).await.expect("job").expect("row");
        if info.status == JobStatus::Failed {
            let error = info.last_error.unwrap_or_default();
            assert!(
                error.contains("panic"),
                "{point:?}/{action:?}: job {id}: {error}"
            );
        }
    }
    clean
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// The class test: a panic, and a drop, at every point. Short form: each
/// once; `JOBQ_PANIC_ROUNDS=n` repeats the whole set n times with more jobs.
async fn a_panic_or_drop_at_any_point_ends_in_a_settle_or_a_release(db: TestDb) {
    let jobq = db.jobq().await;
    let rounds: usize = std::env::var("JOBQ_PANIC_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for round in 0..rounds {
        for (point, stops_worker) in POINTS {
            for action in [Action::Panic, Action::Drop] {
                a_fault_at(&jobq, point, action, stops_worker, 4 + round * 4).await;
            }
        }
    }
}

async fn a_claim_loop_that_panics_stops_the_worker_with_an_error(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "panics-claim").await;
    arm(&queue, Point::Claimed, Action::Panic, 1);
    let worker = worker(&jobq, &queue, &recorder).build().expect("build");
    let id = jobq
        .enqueue_with(Sleeper { ms: 1 }, Enqueue::new().queue(&queue))
        .await
        .expect("enqueue")
        .id;
    let result = tokio::time::timeout(LONG, worker.run_until(std::future::pending()))
        .await
        .expect("run_until returns once its claim loop panicked");
    let error = result.expect_err("a panicked claim loop is an error");
    assert!(
        error.to_string().contains("worker task `claim` panicked"),
        "{error}"
    );
    let info = jobq.job(id).await.expect("job").expect("row");
    assert_eq!(info.status, JobStatus::Pending, "released: {info:?}");
    assert_eq!(
        info.attempts, 0,
        "the release refunds the attempt: {info:?}"
    );
}

async fn a_heartbeat_that_panics_is_restarted_and_keeps_the_leases(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "panics-heartbeat").await;
    let handle = worker(&jobq, &queue, &recorder)
        .lease(Duration::from_millis(800))
        .heartbeat_interval(Duration::from_millis(100))
        .reap_interval(Duration::from_millis(100))
        .build()
        .expect("build")
        .start();
    let id = jobq
        .enqueue_with(Sleeper { ms: 3_000 }, Enqueue::new().queue(&queue))
        .await
        .expect("enqueue")
        .id;
    wait_until("the job runs", LONG, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    arm(&queue, Point::Heartbeat, Action::Panic, 1);
    wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    assert_eq!(recorder.runs(id).len(), 1, "run once: the lease was kept");
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
