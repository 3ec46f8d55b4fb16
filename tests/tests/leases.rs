//! Handlers that outlive the lease. With heartbeats the lease follows the
//! handler and no job runs twice, however long it takes; without them
//! (`disable_heartbeats`, a test-only switch) expired jobs are taken over by
//! another worker and the first worker's late settles — successes and
//! failures alike — are fenced out: they change nothing.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::{JobContext, JobStatus, Jobq, State, Worker, job};
use jobq_tests::{
    Recorder, TestDb, assert_contains, eventually, fixture, on, stop, wait_for_done,
    wait_for_status, wait_until,
};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The job ids of jobq's "lease lost" warnings.
struct LeaseLostWarnings;

static LEASE_LOST: Mutex<Vec<i64>> = Mutex::new(Vec::new());

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LeaseLostWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            lease_lost: bool,
            job: Option<i64>,
        }
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.lease_lost = format!("{value:?}").starts_with("lease lost");
                }
            }
            fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
                if field.name() == "job.id" {
                    self.job = Some(value);
                }
            }
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let (true, Some(job)) = (fields.lease_lost, fields.job) {
            LEASE_LOST
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(job);
        }
    }
}

fn count_lease_lost_warnings() {
    let _ = tracing_subscriber::registry()
        .with(LeaseLostWarnings)
        .try_init();
}

/// Jobs whose next attempt may finish, by id.
type Gates = jobq_tests::Gates<i64>;

/// Runs for `ms`, several leases.
#[job(name = "lease_slow")]
async fn slow(ctx: &JobContext, recorder: State<Recorder>, ms: u64) {
    recorder.record(ctx.id(), ctx.attempt());
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Attempt 1 outlives its lease: it returns only once attempt 2 (another
/// worker's) has started, then succeeds or fails as `fail_first` says.
/// Attempt 2 waits for the test to open its gate, then succeeds.
#[job(name = "lease_overtaken", max_attempts = 5, retry = ["10ms"])]
async fn overtaken(
    ctx: &JobContext,
    recorder: State<Recorder>,
    gates: State<Gates>,
    fail_first: bool,
) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    if ctx.attempt() == 1 {
        let id = ctx.id();
        wait_until("attempt 2 started", Duration::from_secs(30), || async {
            recorder.runs(id).len() >= 2
        })
        .await;
        if fail_first {
            return Err("stale failure of attempt 1".into());
        }
        return Ok(());
    }
    gates.wait(ctx.id()).await;
    Ok(())
}

const LONG: Duration = Duration::from_secs(30);
/// Lease of the workers whose leases must expire: short, so tests are quick.
const SHORT_LEASE: Duration = Duration::from_millis(600);
/// Lease of workers with heartbeats: long enough that a heartbeat delayed by
/// a loaded machine does not lose it.
const LEASE: Duration = Duration::from_millis(1_500);

fn builder(
    jobq: &Jobq,
    queue: &str,
    concurrency: usize,
    recorder: &Recorder,
    gates: &Gates,
    id: &str,
) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, concurrency)
        .state(recorder.clone())
        .state(gates.clone())
        .lease(LEASE)
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
        .worker_id(id)
}

async fn heartbeats_keep_handlers_that_outlive_the_lease_from_running_twice(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "heartbeat").await;
    let gates = Gates::default();
    // Two workers: either would take over a job whose lease expired.
    let a = builder(&jobq, &queue, 4, &recorder, &gates, "hb-a")
        .build()
        .unwrap()
        .start();
    let b = builder(&jobq, &queue, 4, &recorder, &gates, "hb-b")
        .build()
        .unwrap()
        .start();
    let mut ids = Vec::new();
    for _ in 0..8 {
        // 3 leases long.
        ids.push(
            jobq.enqueue_with(Slow::new(4_500), on(&queue))
                .await
                .unwrap()
                .id,
        );
    }
    for id in &ids {
        let info = wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
        assert_eq!(info.attempts, 1, "job {id}: {info:?}");
        assert_eq!(info.last_error, None, "job {id}: {info:?}");
    }
    stop(a).await;
    stop(b).await;
    for id in &ids {
        assert_eq!(recorder.runs(*id).len(), 1, "job {id} ran once");
    }
}

async fn without_heartbeats_expired_jobs_rerun_and_stale_settles_are_fenced_out(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "noheartbeat").await;
    let gates = Gates::default();
    const JOBS: usize = 6;
    // A: no heartbeats, and exactly one slot per job, so it cannot take the
    // expired jobs back itself.
    let a = builder(&jobq, &queue, JOBS, &recorder, &gates, "stale-a")
        .lease(SHORT_LEASE)
        .disable_heartbeats()
        .build()
        .unwrap()
        .start();
    let mut ids = Vec::new();
    for n in 0..JOBS {
        ids.push(
            jobq.enqueue_with(Overtaken::new(n % 2 == 1), on(&queue))
                .await
                .unwrap()
                .id,
        );
    }
    wait_until("A started every job", LONG, || async {
        ids.iter().all(|id| recorder.runs(*id).len() == 1)
    })
    .await;
    // A's leases run out while its handlers still run; A's own reaper
    // returns the jobs to pending (A cannot take them back: its slots are busy).
    wait_until("every job is back to pending", LONG, || async {
        jobq.counts(&queue).await.unwrap().pending == JOBS as u64
    })
    .await;
    // B: heartbeats on; it takes over every job in one claim (were they
    // returned one by one, A's slots freed by the first stale settles
    // could take the later ones back).
    let b = builder(&jobq, &queue, JOBS, &recorder, &gates, "fresh-b")
        .build()
        .unwrap()
        .start();
    wait_until("B re-ran every job", LONG, || async {
        ids.iter().all(|id| recorder.runs(*id).len() == 2)
    })
    .await;
    // A's attempts now end (half succeed, half fail) and try to settle.
    if !eventually(LONG, || async { a.held_jobs() == 0 }).await {
        let mut rows = Vec::new();
        for id in &ids {
            rows.push((recorder.runs(*id).len(), jobq.job(*id).await.unwrap()));
        }
        panic!(
            "A still holds {} jobs after {LONG:?} (B holds {}); (runs, row): {rows:#?}",
            a.held_jobs(),
            b.held_jobs()
        );
    }
    for id in &ids {
        let info = jobq.job(*id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Processing, "still B's: {info:?}");
        assert_eq!(info.claimed_by.as_deref(), Some("fresh-b"), "{info:?}");
        assert_eq!(info.attempts, 2, "{info:?}");
        let error = info.last_error.unwrap_or_default();
        assert_contains(&error, &["lease expired during attempt 1", "stale-a"]);
    }
    for id in &ids {
        gates.open(*id);
    }
    for id in &ids {
        let info = wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
        assert_eq!(info.attempts, 2, "{info:?}");
        assert!(
            !info
                .last_error
                .unwrap_or_default()
                .contains("stale failure"),
            "A's failure was not recorded"
        );
        assert_eq!(recorder.runs(*id).len(), 2, "no third run");
    }
    stop(a).await;
    stop(b).await;
}

/// Attempts that have ended but wait for the completer are still renewed;
/// a heartbeat that meets one just after its settle must not report it lost
/// (it did: "lease lost" warnings, and a cancel, for jobs that had succeeded).
async fn a_settled_attempt_is_not_reported_as_a_lost_lease(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "settled").await;
    let gates = Gates::default();
    let handle = builder(&jobq, &queue, 16, &recorder, &gates, "settled")
        .heartbeat_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let batch = (0..1_500).map(|_| (Slow::new(0), on(&queue)));
    let ids: HashSet<i64> = jobq
        .enqueue_many_with(batch)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    wait_for_done(&jobq, &queue, 1_500, LONG).await;
    stop(handle).await;
    let reported: Vec<i64> = LEASE_LOST
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|id| ids.contains(id))
        .copied()
        .collect();
    assert!(
        reported.is_empty(),
        "no lease was lost, none may be reported: {reported:?}"
    );
}

jobq_tests::on_every_backend!(
    setup = count_lease_lost_warnings;
    heartbeats_keep_handlers_that_outlive_the_lease_from_running_twice,
    without_heartbeats_expired_jobs_rerun_and_stale_settles_are_fenced_out,
    a_settled_attempt_is_not_reported_as_a_lost_lease,
);
