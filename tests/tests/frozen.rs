//! A database that stops answering. On MariaDB and PostgreSQL the server is
//! frozen: the connections stay open and nothing comes back (a SIGSTOPped
//! server, a forwarder that stopped forwarding) — here a forwarder the test
//! starts and freezes ([`Delay::freeze`]), never the shared servers. On
//! SQLite, which has no server, "frozen" is the write lock held by a
//! connection that does nothing more (a process stopped, or stuck, in the
//! middle of a write transaction): reads go on (WAL), every write waits.
//!
//! What jobq promises then: every call returns within its statement
//! deadline (the class test goes through the whole public API); a worker
//! stops an attempt whose lease it could not renew before that lease can
//! end, so two attempts of a job never run at once; `shutdown(deadline)`
//! returns by its deadline; with a connect list the pool moves to the next
//! node; and once the database answers again nothing is lost.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{
    Backend, ConnectOptions, JobContext, JobFilter, JobStatus, Jobq, Page, Rate, Schedule, State,
    Worker, WorkerHandle, Workflow, job,
};
use jobq_tests::net::loopback_forward;
use jobq_tests::net::proxy::{Delay, Proxy};
use jobq_tests::{Recorder, TestDb, on, on_every_backend, unique_queue, wait_until};
use sqlx::Connection;

/// The statement deadline of the handles these tests freeze under.
const DEADLINE: Duration = Duration::from_secs(1);
/// The calls of `every_call_returns_by_the_statement_deadline_while_the_database_is_frozen`.
const CALLS: usize = 35;
/// What a loaded machine may add to a deadline (timers, scheduling).
const SLACK: Duration = Duration::from_secs(2);
/// How long a test waits for a drain to finish.
const LONG: Duration = Duration::from_secs(90);

/// A database the test can freeze and thaw, and the URL jobq reaches it by.
struct Freezable {
    url: String,
    how: How,
}

enum How {
    /// MariaDB, PostgreSQL: through a forwarder on loopback.
    Path { delay: Delay, _proxy: Proxy },
    /// SQLite: a connection that holds the write lock while frozen.
    Lock(Option<sqlx::SqliteConnection>),
}

impl Freezable {
    fn new(db: &TestDb) -> Self {
        match db.backend() {
            Backend::Sqlite => Self {
                url: db.url().to_owned(),
                how: How::Lock(None),
            },
            _ => {
                let delay = Delay::default();
                let (proxy, url) = loopback_forward(db.url(), delay.clone()).expect("forwarder");
                Self {
                    url,
                    how: How::Path {
                        delay,
                        _proxy: proxy,
                    },
                }
            }
        }
    }

    /// A handle through it with the short statement and connect deadlines.
    async fn jobq(&self) -> Jobq {
        let options = ConnectOptions::new()
            .statement_timeout(DEADLINE)
            .connect_timeout(DEADLINE);
        Jobq::connect_with_options(&self.url, options)
            .await
            .expect("connect")
    }

    async fn freeze(&mut self) {
        match &mut self.how {
            How::Path { delay, .. } => delay.freeze(),
            How::Lock(held) => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("a connection of another process");
                sqlx::raw_sql("PRAGMA busy_timeout = 30000; BEGIN IMMEDIATE")
                    .execute(&mut conn)
                    .await
                    .expect("take the write lock");
                *held = Some(conn);
            }
        }
    }

    async fn thaw(&mut self) {
        match &mut self.how {
            How::Path { delay, .. } => delay.thaw(),
            How::Lock(held) => {
                if let Some(mut conn) = held.take() {
                    sqlx::raw_sql("ROLLBACK")
                        .execute(&mut conn)
                        .await
                        .expect("give the write lock back");
                    let _ = conn.close().await;
                }
            }
        }
    }
}

#[job(name = "frozen_record")]
async fn record(ctx: &JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
    tokio::time::sleep(Duration::from_millis(2)).await;
}

/// An attempt: its number, when it started and, if it was stopped, when.
type Run = (u32, Instant, Option<Instant>);

/// The attempts of a job, in the order they started.
#[derive(Debug, Clone, Default)]
struct Attempts(Arc<Mutex<Vec<Run>>>);

impl Attempts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Run>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Notes when an attempt stopped: the worker drops a stopped attempt's
/// future (after its cancellation token fires), and this with it.
struct Stopped(Attempts, usize);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.lock()[self.1].2 = Some(Instant::now());
    }
}

/// Its first attempt runs until stopped; later ones end at once.
#[job(name = "frozen_hold")]
async fn hold(ctx: &JobContext, attempts: State<Attempts>, n: u64) {
    let _ = n;
    let at = {
        let mut runs = attempts.lock();
        runs.push((ctx.attempt(), Instant::now(), None));
        runs.len() - 1
    };
    if ctx.attempt() == 1 {
        let _stopped = Stopped(Attempts::clone(&attempts), at);
        ctx.cancellation_token().cancelled().await;
    }
}

type Call<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

fn call<'a, T: std::fmt::Debug>(
    future: impl Future<Output = jobq_runtime::Result<T>> + Send + 'a,
) -> Call<'a> {
    Box::pin(async move {
        future
            .await
            .map(|v| format!("{v:?}"))
            .map_err(|e| e.to_string())
    })
}

/// The class test: every call of the public API returns within the
/// statement deadline (plus a loaded machine's slack) while the database
/// is frozen — an error on a server, where nothing can answer; on SQLite
/// reads may still answer. Then the same handle works again. (Not here:
/// `migrate`, whose statements may alter a large table and have a deadline
/// of their own, and `enqueue_in`, which runs on the caller's connection,
/// in the caller's transaction.)
async fn every_call_returns_by_the_statement_deadline_while_the_database_is_frozen(db: TestDb) {
    db.jobq().await;
    let mut frozen = Freezable::new(&db);
    let jobq = frozen.jobq().await;
    let queue = unique_queue("frozen-calls");
    let id = jobq
        .enqueue_with(Record::new(0), on(&queue))
        .await
        .expect("enqueue before the freeze")
        .id;
    // Each call on a handle of its own with an idle connection in its
    // stash: a call must not lean on another's stuck connections (a pool
    // out of connections fails by its acquire timeout anyway).
    let mut handles = Vec::new();
    for _ in 0..CALLS {
        let handle = frozen.jobq().await;
        handle.counts(&queue).await.expect("warm the handle");
        handles.push(handle);
    }
    let mut handles = handles.iter();
    let mut h = || handles.next().expect("a handle per call");
    frozen.freeze().await;
    let filter = JobFilter::new().queue(&queue);
    let schedule = format!("{queue}-nightly");
    let mut workflow = Workflow::new(&queue);
    workflow.add_with("a", Record::new(9), on(&queue));
    let calls: Vec<(&str, Call<'_>)> = vec![
        (
            "enqueue",
            call(h().enqueue_with(Record::new(1), on(&queue))),
        ),
        (
            "enqueue_with key",
            call(h().enqueue_with(Record::new(2), on(&queue).idempotency_key("k"))),
        ),
        (
            "enqueue_many",
            call(h().enqueue_many_with((3..6).map(|n| (Record::new(n), on(&queue))))),
        ),
        (
            "enqueue_json",
            call(h().enqueue_json("frozen_record", "{\"n\":7}", on(&queue))),
        ),
        ("job", call(h().job(id))),
        ("counts", call(h().counts(&queue))),
        ("cancel", call(h().cancel(id))),
        ("retry", call(h().retry(id))),
        ("stats", call(h().stats())),
        ("pause", call(h().pause(&queue))),
        ("resume", call(h().resume(&queue))),
        ("paused_queues", call(h().paused_queues())),
        ("list", call(h().list(&filter, Page::default()))),
        ("count_where", call(h().count_where(&filter))),
        ("retry_where", call(h().retry_where(&filter))),
        ("cancel_where", call(h().cancel_where(&filter))),
        (
            "prune_finished",
            call(h().prune_finished(Duration::from_secs(3600))),
        ),
        (
            "prune_failed",
            call(h().prune_failed(Duration::from_secs(3600))),
        ),
        ("doctor", call(h().doctor())),
        ("output", call(h().output::<Record>(id))),
        (
            "set_queue_limit",
            call(h().set_queue_limit(&queue, Some(2))),
        ),
        ("queue_limits", call(h().queue_limits())),
        (
            "set_queue_rate",
            call(h().set_queue_rate(&queue, Some(Rate::per(5, Duration::from_secs(1))))),
        ),
        ("queue_rates", call(h().queue_rates())),
        (
            "set_key_rate",
            call(h().set_key_rate("frozen-key", Some(Rate::per(5, Duration::from_secs(1))))),
        ),
        ("key_rates", call(h().key_rates())),
        ("workers", call(h().workers())),
        ("job_kinds", call(h().job_kinds())),
        (
            "put_schedule",
            call(h().put_schedule(Schedule::new(&schedule, "frozen_record", "0 3 * * *"))),
        ),
        ("schedules", call(h().schedules())),
        ("pause_schedule", call(h().pause_schedule(&schedule))),
        ("remove_schedule", call(h().remove_schedule(&schedule))),
        ("enqueue_workflow", call(h().enqueue_workflow(workflow))),
        ("workflow", call(h().workflow(&queue))),
        ("cancel_workflow", call(h().cancel_workflow(&queue))),
    ];
    let mut late = Vec::new();
    for (name, call) in calls {
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(10), call).await;
        let took = started.elapsed();
        println!("{name}: {took:?} {result:?}");
        let answered = match result {
            Err(_) => false,
            Ok(Ok(_)) => db.backend() == Backend::Sqlite || name == "doctor",
            Ok(Err(_)) => true,
        };
        if took > DEADLINE + SLACK || !answered {
            late.push(format!("{name}: {took:?} {answered}"));
        }
    }
    frozen.thaw().await;
    assert!(
        late.is_empty(),
        "calls that did not fail within {:?} on a frozen database: {late:?}",
        DEADLINE + SLACK
    );
    // The handle works again, on fresh connections.
    let again = tokio::time::timeout(Duration::from_secs(20), async {
        jobq.enqueue_with(Record::new(8), on(&queue)).await?;
        jobq.counts(&queue).await
    })
    .await
    .expect("answers within 20 s of the thaw")
    .expect("works after the thaw");
    assert!(again.total() >= 2, "{again:?}");
}

/// A worker draining a queue when the database freezes: `shutdown(2 s)`
/// returns within 3 s, whatever it was writing; once the database answers
/// again a new worker finishes the queue — jobs the frozen one left
/// `processing` come back when their leases expire — and every job is
/// `done`, none left `processing` or `pending`.
async fn shutdown_returns_by_its_deadline_with_the_database_frozen_mid_drain(db: TestDb) {
    db.jobq().await;
    let mut frozen = Freezable::new(&db);
    let jobq = frozen.jobq().await;
    let queue = unique_queue("frozen-drain");
    let n = 1_500u64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        jobq.enqueue_many_with(chunk.iter().map(|&i| (Record::new(i), on(&queue))))
            .await
            .expect("enqueue");
    }
    let recorder = Recorder::default();
    let lease = Duration::from_secs(3);
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 8)
        .state(recorder.clone())
        .lease(lease)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    wait_until("a third of the jobs ran", LONG, || async {
        recorder.totals().0 as u64 >= n / 3
    })
    .await;
    frozen.freeze().await;
    let deadline = Duration::from_secs(2);
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(30), worker.shutdown(deadline)).await;
    let took = started.elapsed();
    frozen.thaw().await;
    println!("shutdown({deadline:?}) with the database frozen took {took:?}: {result:?}");
    assert!(
        result.is_ok() && took <= deadline + Duration::from_secs(1),
        "shutdown({deadline:?}) returned within {:?} of a frozen database (took {took:?}, returned: {})",
        deadline + Duration::from_secs(1),
        result.is_ok()
    );

    let worker = Worker::builder(db.jobq().await)
        .queue_unchecked(&queue, 8)
        .state(recorder.clone())
        .lease(lease)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    let direct = db.jobq().await;
    wait_until("every job is done after the thaw", LONG, || async {
        direct.counts(&queue).await.expect("counts").done == n
    })
    .await;
    shut(worker).await;
    let counts = direct.counts(&queue).await.expect("counts");
    assert_eq!(
        (
            counts.pending,
            counts.processing,
            counts.failed,
            counts.done
        ),
        (0, 0, 0, n),
        "{counts:?}"
    );
    assert_eq!(recorder.totals().0 as u64, n, "every job ran");
}

/// A job runs when the database freezes: its worker can no longer renew
/// the lease, and stops the attempt (its cancellation token fires, it is
/// not settled) before the lease can end. Another worker, on a path that
/// still answers, returns the job once the lease has ended and runs it
/// again: the second attempt starts after the first was stopped, never
/// beside it. (On SQLite the other worker can write only after the thaw.)
async fn an_attempt_whose_lease_cannot_be_renewed_stops_before_another_can_start(db: TestDb) {
    db.jobq().await;
    let mut frozen = Freezable::new(&db);
    let jobq = frozen.jobq().await;
    let queue = unique_queue("frozen-lease");
    let attempts = Attempts::default();
    let lease = Duration::from_secs(2);
    let builder = |jobq: Jobq| {
        Worker::builder(jobq)
            .queue_unchecked(&queue, 2)
            .state(attempts.clone())
            .lease(lease)
            .heartbeat_interval(Duration::from_millis(400))
            .poll_interval(Duration::from_millis(50))
            .build()
            .expect("build")
            .start()
    };
    let id = jobq
        .enqueue_with(Hold::new(0), on(&queue).max_attempts(5))
        .await
        .expect("enqueue")
        .id;
    let frozen_worker = builder(jobq.clone());
    wait_until("the first attempt runs", LONG, || async {
        !attempts.lock().is_empty()
    })
    .await;
    // A heartbeat or two went through.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let direct = db.jobq().await;
    frozen.freeze().await;
    let frozen_at = Instant::now();
    let other = builder(direct.clone());
    let stopped = tokio::time::timeout(lease + SLACK, async {
        loop {
            if let Some(stopped) = attempts.lock()[0].2 {
                return stopped;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    if db.backend() == Backend::Sqlite {
        tokio::time::sleep(Duration::from_secs(1)).await;
        frozen.thaw().await;
    }
    wait_until("a second attempt ran", LONG, || async {
        attempts.lock().len() >= 2
    })
    .await;
    frozen.thaw().await;
    let stopped = stopped.unwrap_or_else(|_| {
        panic!(
            "the first attempt was not stopped within {:?} of the freeze: {:?}",
            lease + SLACK,
            attempts.lock()
        )
    });
    let runs = attempts.lock().clone();
    let second = runs[1].1;
    println!(
        "first attempt stopped {:?} after the freeze; second started {:?} after the freeze",
        stopped - frozen_at,
        second - frozen_at
    );
    assert!(
        stopped < second,
        "the second attempt started {:?} before the first was stopped",
        stopped - second
    );
    let info = jobq_tests::wait_for_status(&direct, id, JobStatus::Done, LONG).await;
    assert_eq!(info.attempts, 2, "{info:?}");
    shut(other).await;
    shut(frozen_worker).await;
}

/// Shuts a worker down, whatever the database does meanwhile.
async fn shut(worker: WorkerHandle) {
    let _ = tokio::time::timeout(
        Duration::from_secs(30),
        worker.shutdown(Duration::from_secs(5)),
    )
    .await
    .expect("shutdown returned");
}

on_every_backend!(
    every_call_returns_by_the_statement_deadline_while_the_database_is_frozen,
    shutdown_returns_by_its_deadline_with_the_database_frozen_mid_drain,
    an_attempt_whose_lease_cannot_be_renewed_stops_before_another_can_start,
);

/// A connect list whose first node freezes mid-drain: jobq's statements on
/// it end at their deadline, their connections are closed (not handed out
/// again), the pool moves to the next node, the drain finishes there, and
/// `shutdown(2 s)` returns within 3 s. Every job ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_frozen_mid_drain_moves_the_pool_and_shutdown_returns_by_its_deadline() {
    let Some(db) = TestDb::mysql() else { return };
    db.jobq().await;
    let mut frozen = Freezable::new(&db);
    let first = host_of(&frozen.url);
    let server = host_of(db.url());
    let url = with_hosts(db.url(), &[first.clone(), server.clone()]);
    let options = ConnectOptions::new()
        .statement_timeout(DEADLINE)
        .connect_timeout(DEADLINE);
    let jobq = Jobq::connect_with_options(&url, options)
        .await
        .expect("connect");
    assert_eq!(jobq.current_node(), Some(first.clone()));
    let queue = unique_queue("frozen-node");
    let n = 3_000u64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        jobq.enqueue_many_with(chunk.iter().map(|&i| (Record::new(i), on(&queue))))
            .await
            .expect("enqueue");
    }
    let recorder = Recorder::default();
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 8)
        .state(recorder.clone())
        .lease(Duration::from_secs(5))
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    wait_until("a third of the jobs ran", LONG, || async {
        recorder.totals().0 as u64 >= n / 3
    })
    .await;
    frozen.freeze().await;
    let frozen_at = Instant::now();
    wait_until(
        "the pool moved to the server",
        Duration::from_secs(20),
        || async { jobq.current_node().as_deref() == Some(server.as_str()) },
    )
    .await;
    let moved = frozen_at.elapsed();
    let direct = db.jobq().await;
    wait_until("every job is done", LONG, || async {
        direct.counts(&queue).await.expect("counts").done == n
    })
    .await;
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        worker.shutdown(Duration::from_secs(2)),
    )
    .await;
    let took = started.elapsed();
    frozen.thaw().await;
    println!(
        "moved {moved:?} after the freeze; shutdown(2 s) took {took:?}; {} runs of {n} jobs",
        recorder.totals().1
    );
    assert!(
        result.is_ok() && took <= Duration::from_secs(3),
        "shutdown(2 s) returned within 3 s (took {took:?})"
    );
    let (jobs, runs) = recorder.totals();
    assert_eq!(jobs as u64, n, "every job ran ({runs} runs)");
    let counts = direct.counts(&queue).await.expect("counts");
    assert_eq!(counts.processing + counts.pending, 0, "{counts:?}");
}

/// Where `url`'s host list starts and ends.
fn hosts_span(url: &str) -> (usize, usize) {
    let scheme_end = url.find("://").expect("a URL") + 3;
    let start = url
        .rfind('@')
        .filter(|&at| at >= scheme_end)
        .map_or(scheme_end, |at| at + 1);
    let len = url[start..].find(['/', '?']).unwrap_or(url.len() - start);
    (start, start + len)
}

/// `url` with its host list replaced by `hosts` (joined by commas).
fn with_hosts(url: &str, hosts: &[String]) -> String {
    let (start, end) = hosts_span(url);
    format!("{}{}{}", &url[..start], hosts.join(","), &url[end..])
}

/// The `host:port` of `url` (port 3306 if it has none).
fn host_of(url: &str) -> String {
    let (start, end) = hosts_span(url);
    let host = &url[start..end];
    if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:3306")
    }
}
