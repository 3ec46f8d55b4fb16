//! The behavioural suite: every promise of the worker and the handle that is
//! not dialect-specific, written once and run against MariaDB/MySQL,
//! PostgreSQL and SQLite.
//!
//! Tests share a database and run in parallel, so each uses its own queue.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{
    Enqueue, Job, JobContext, JobError, JobStatus, Jobq, State, Worker, WorkerHandle, job,
};
use jobq_tests::{Recorder, TestDb, unique_queue, wait_for_status, wait_until};

/// Held attempts of a gated job, by attempt number.
type Gates = jobq_tests::Gates<u32>;

#[job(name = "conf_record")]
async fn record(ctx: &JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
}

#[job(name = "conf_flaky", max_attempts = 5, retry = ["300ms", "600ms"])]
async fn flaky(ctx: JobContext, recorder: State<Recorder>, fail_until: u32) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    if ctx.attempt() <= fail_until {
        return Err(format!("flaky failure on attempt {}", ctx.attempt()));
    }
    Ok(())
}

#[job(name = "conf_always_fails", max_attempts = 3, retry = ["10ms"])]
async fn always_fails(ctx: JobContext, recorder: State<Recorder>) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    Err(format!("attempt {} failed", ctx.attempt()))
}

#[job(name = "conf_permanent")]
async fn permanent(ctx: JobContext, recorder: State<Recorder>) -> Result<(), JobError> {
    recorder.record(ctx.id(), ctx.attempt());
    Err(JobError::permanent("no such user"))
}

#[job(name = "conf_snooze", max_attempts = 2)]
async fn snoozer(ctx: JobContext, recorder: State<Recorder>, times: usize) -> Result<(), JobError> {
    recorder.record(ctx.id(), ctx.attempt());
    if recorder.runs(ctx.id()).len() <= times {
        return Err(JobError::snooze(Duration::from_millis(20)));
    }
    Ok(())
}

#[job(name = "conf_panics", max_attempts = 1)]
async fn panics(ctx: JobContext, recorder: State<Recorder>) {
    recorder.record(ctx.id(), ctx.attempt());
    panic!("kaboom in job {}", ctx.id());
}

#[job(name = "conf_slow", timeout = "100ms", max_attempts = 1)]
async fn slow(ctx: JobContext, recorder: State<Recorder>) {
    recorder.record(ctx.id(), ctx.attempt());
    tokio::time::sleep(Duration::from_secs(30)).await;
}

#[job(name = "conf_gated", max_attempts = 5, retry = ["10ms"])]
async fn gated(
    ctx: JobContext,
    recorder: State<Recorder>,
    gates: State<Gates>,
) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    gates.wait(ctx.attempt()).await;
    if ctx.attempt() == 1 {
        return Err("the first attempt fails, late".into());
    }
    Ok(())
}

#[job(name = "conf_long")]
async fn long(ctx: JobContext, recorder: State<Recorder>, first_attempt_ms: u64) {
    recorder.record(ctx.id(), ctx.attempt());
    if ctx.attempt() == 1 {
        tokio::time::sleep(Duration::from_millis(first_attempt_ms)).await;
    }
}

/// The idempotency keys handlers saw.
#[derive(Debug, Clone, Default)]
struct KeyLog(Arc<Mutex<Vec<String>>>);

#[job(name = "conf_key", key = "conf-key:{user_id}")]
async fn keyed(ctx: JobContext, recorder: State<Recorder>, keys: State<KeyLog>, user_id: u64) {
    let _ = user_id;
    recorder.record(ctx.id(), ctx.attempt());
    keys.0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(ctx.idempotency_key());
}

/// A job type with no handler anywhere: what a newer deploy might enqueue.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct FromTheFuture {
    n: u64,
}

impl Job for FromTheFuture {
    const NAME: &'static str = "conf_from_the_future";
    const MAX_ATTEMPTS: u32 = 3;
}

/// Stored under `conf_record`'s name with a payload that does not fit it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WrongShape {
    n: String,
}

impl Job for WrongShape {
    const NAME: &'static str = "conf_record";
}

const LONG: Duration = Duration::from_secs(20);

/// A worker on `queue` with the states every job here needs.
fn worker(
    jobq: &Jobq,
    queue: &str,
    concurrency: usize,
    recorder: &Recorder,
) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, concurrency)
        .state(recorder.clone())
        .state(Gates::default())
        .state(KeyLog::default())
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
}

fn on(queue: &str) -> Enqueue {
    Enqueue::new().queue(queue)
}

/// Enqueues `jobs` in one batch; their ids, in order.
async fn enqueue_ids<J: Job>(
    jobq: &Jobq,
    jobs: impl IntoIterator<Item = (J, Enqueue)>,
) -> Vec<i64> {
    jobq.enqueue_many_with(jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

async fn stop(handle: WorkerHandle) {
    handle
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}

async fn a_worker_drains_enqueued_jobs_to_done(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("drain");
    let recorder = Recorder::default();
    let mut ids = Vec::new();
    for n in 0..50 {
        ids.push(
            jobq.enqueue_with(Record::new(n), on(&queue))
                .await
                .unwrap()
                .id,
        );
    }
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    wait_until("all 50 jobs are done", LONG, || async {
        jobq.counts(&queue).await.unwrap().done == 50
    })
    .await;
    stop(handle).await;
    for id in ids {
        assert_eq!(recorder.runs(id).len(), 1, "job {id} ran once");
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Done);
        assert_eq!(info.attempts, 1);
        assert!(info.finished_at.is_some());
    }
}

async fn eight_workers_drain_every_job_exactly_once(db: TestDb) {
    let total: u64 = match db.backend() {
        jobq_runtime::Backend::Sqlite => 2_000,
        _ => 10_000,
    };
    let jobq = db.jobq().await;
    let queue = unique_queue("eight");
    let recorder = Recorder::default();
    let mut ids = Vec::new();
    for chunk in (0..total).collect::<Vec<_>>().chunks(1000) {
        let batch = chunk.iter().map(|n| (Record::new(*n), on(&queue)));
        ids.extend(
            jobq.enqueue_many_with(batch)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.id),
        );
    }
    let mut handles = Vec::new();
    for _ in 0..8 {
        let own = Jobq::connect_with(db.url(), 4).await.unwrap();
        handles.push(worker(&own, &queue, 8, &recorder).build().unwrap().start());
    }
    wait_until("every job is done", Duration::from_secs(120), || async {
        jobq.counts(&queue).await.unwrap().done == total
    })
    .await;
    for handle in handles {
        stop(handle).await;
    }
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.done, total);
    assert_eq!(counts.processing + counts.pending + counts.failed, 0);
    let repeated: Vec<i64> = recorder
        .repeated()
        .into_iter()
        .filter(|id| ids.contains(id))
        .collect();
    assert!(repeated.is_empty(), "jobs run more than once: {repeated:?}");
    for id in &ids {
        assert_eq!(recorder.runs(*id).len(), 1, "job {id} ran exactly once");
    }
}

async fn an_existing_idempotency_key_returns_the_existing_job(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("key");
    // Keys live as long as their rows, and the database outlives test runs.
    let user: u64 = rand::random::<u32>().into();
    let first = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap();
    let other = jobq
        .enqueue_with(Keyed::new(user + 1), on(&queue))
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert!(again.duplicate);
    assert_eq!(again.id, first.id);
    assert_ne!(other.id, first.id);
    let info = jobq.job(first.id).await.unwrap().unwrap();
    assert_eq!(info.idempotency_key, Some(format!("conf-key:{user}")));
    // An explicit key overrides the template; the handler sees it.
    let explicit = format!("explicit-{queue}");
    let e = jobq
        .enqueue_with(
            Keyed::new(user + 2),
            on(&queue).idempotency_key(explicit.clone()),
        )
        .await
        .unwrap();
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    wait_for_status(&jobq, e.id, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, first.id, JobStatus::Done, LONG).await;
    stop(handle).await;
    // Enqueueing a done job's key again still returns it: keys are unique for the row's lifetime.
    let after = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap();
    assert_eq!(
        after,
        jobq_runtime::Enqueued {
            id: first.id,
            duplicate: true
        }
    );
}

async fn concurrent_enqueuers_of_one_key_create_one_row(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("race");
    let key = format!("race-{queue}");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let jobq = jobq.clone();
        let options = on(&queue).idempotency_key(key.clone());
        tasks.push(tokio::spawn(async move {
            jobq.enqueue_with(Record::new(1), options).await.unwrap()
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let ids: HashSet<i64> = results.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 1, "all enqueuers got one id: {results:?}");
    assert_eq!(
        results.iter().filter(|e| !e.duplicate).count(),
        1,
        "exactly one inserted"
    );
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

async fn enqueue_many_returns_ids_in_input_order(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("many");
    let key = format!("many-{queue}");
    let existing = jobq
        .enqueue_with(Record::new(99), on(&queue).idempotency_key(key.clone()))
        .await
        .unwrap();
    let batch = vec![
        (Record::new(0), on(&queue)),
        (Record::new(1), on(&queue).idempotency_key(key)),
        (Record::new(2), on(&queue)),
    ];
    let out = jobq.enqueue_many_with(batch).await.unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(
        out[1],
        jobq_runtime::Enqueued {
            id: existing.id,
            duplicate: true
        }
    );
    assert!(!out[0].duplicate && !out[2].duplicate);
    for (i, e) in [(0u64, out[0]), (2, out[2])] {
        let info = jobq.job(e.id).await.unwrap().unwrap();
        let payload: serde_json::Value = serde_json::from_str(&info.payload).unwrap();
        assert_eq!(payload["n"], i, "row {} holds input {i}", e.id);
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().pending, 3);
}

/// Batches without keys are one INSERT each; the ids they return belong to
/// the rows in input order, even with other batches inserting at once.
async fn concurrent_keyless_batches_return_each_rows_id(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keyless");
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..4u64 {
        let jobq = jobq.clone();
        let queue = queue.clone();
        tasks.spawn(async move {
            // Batches 0 and 1 are due now (MySQL's short row form); batch 3
            // is delayed, so every row carries its own run_at.
            let options = |i: u64| {
                let options = on(&queue)
                    .priority(i16::try_from(t).unwrap())
                    .max_attempts(u32::try_from(t + 2).unwrap());
                if t == 3 {
                    options.delay(Duration::from_secs(3600 + i))
                } else {
                    options
                }
            };
            let batch = (0..300).map(|i| (Record::new(t * 1000 + i), options(i)));
            let ids = jobq.enqueue_many_with(batch).await.unwrap();
            (t, ids)
        });
    }
    let mut seen = HashSet::new();
    let soon = chrono::Utc::now() + chrono::Duration::minutes(30);
    for (t, ids) in tasks.join_all().await {
        assert_eq!(ids.len(), 300);
        for (i, e) in ids.into_iter().enumerate() {
            assert!(!e.duplicate && seen.insert(e.id), "{e:?}");
            let info = jobq.job(e.id).await.unwrap().unwrap();
            let payload: serde_json::Value = serde_json::from_str(&info.payload).unwrap();
            assert_eq!(
                payload["n"],
                t * 1000 + i as u64,
                "row {} of batch {t}",
                e.id
            );
            assert_eq!(
                (info.priority, u64::from(info.max_attempts)),
                (i16::try_from(t).unwrap(), t + 2),
                "row {} of batch {t}",
                e.id
            );
            assert_eq!(info.run_at > soon, t == 3, "row {} of batch {t}", e.id);
        }
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1200);
}

async fn claims_follow_priority_then_run_at(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("order");
    let low = jobq
        .enqueue_with(Record::new(0), on(&queue).priority(5))
        .await
        .unwrap()
        .id;
    let early = jobq
        .enqueue_with(
            Record::new(1),
            on(&queue).run_at(chrono::Utc::now() - chrono::Duration::seconds(60)),
        )
        .await
        .unwrap()
        .id;
    let normal = jobq
        .enqueue_with(Record::new(2), on(&queue))
        .await
        .unwrap()
        .id;
    let urgent = jobq
        .enqueue_with(Record::new(3), on(&queue).priority(-5))
        .await
        .unwrap()
        .id;
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 1, &recorder).build().unwrap().start();
    wait_until("all four ran", LONG, || async { recorder.totals().0 == 4 }).await;
    stop(handle).await;
    let mut order: Vec<(Instant, i64)> = [low, early, normal, urgent]
        .iter()
        .map(|id| (recorder.runs(*id)[0].at, *id))
        .collect();
    order.sort();
    let order: Vec<i64> = order.into_iter().map(|(_, id)| id).collect();
    assert_eq!(order, vec![urgent, early, normal, low]);
}

/// Moves a finished row's times an hour back, as if it finished long ago
/// (`finished_at`, and `run_at`, which is the same time on a finished row).
async fn finished_an_hour_ago(jobq: &Jobq, id: i64) {
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        Some(info.run_at),
        info.finished_at,
        "a finished row's run_at is when it finished"
    );
    let db = jobq_tests::sql::Db::of(jobq);
    let sql = db.pick(
        "UPDATE jobq_jobs SET finished_at = finished_at - INTERVAL 1 HOUR, run_at = run_at - INTERVAL 1 HOUR WHERE id = ?",
        "UPDATE jobq_jobs SET finished_at = finished_at - interval '1 hour', run_at = run_at - interval '1 hour' WHERE id = ?",
        "UPDATE jobq_jobs SET finished_at = finished_at - 3600000000, run_at = run_at - 3600000000 WHERE id = ?",
    );
    assert_eq!(db.execute(sql, &[id.into()]).await.unwrap(), 1);
}

/// Pruning deletes finished rows past the retention, by kind, and nothing
/// else: not a row finished within it, not a pending one, not a failed one
/// unless failed rows are pruned. (The table is shared with other tests, so
/// rows are checked one by one, not counted.)
async fn prune_deletes_finished_rows_past_the_retention_and_nothing_else(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("prune");
    let old_done = jobq
        .enqueue_with(Record::new(0), on(&queue))
        .await
        .unwrap()
        .id;
    let new_done = jobq
        .enqueue_with(Record::new(1), on(&queue))
        .await
        .unwrap()
        .id;
    let old_failed = jobq
        .enqueue_with(Permanent::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let later = on(&queue).delay(Duration::from_secs(3600));
    let old_cancelled = jobq
        .enqueue_with(Record::new(2), later.clone())
        .await
        .unwrap()
        .id;
    let pending = jobq.enqueue_with(Record::new(3), later).await.unwrap().id;
    assert!(jobq.cancel(old_cancelled).await.unwrap());
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    wait_for_status(&jobq, old_done, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, new_done, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, old_failed, JobStatus::Failed, LONG).await;
    stop(handle).await;
    for id in [old_done, old_failed, old_cancelled] {
        finished_an_hour_ago(&jobq, id).await;
    }
    let exists = |id: i64| {
        let jobq = jobq.clone();
        async move { jobq.job(id).await.unwrap().is_some() }
    };

    let deleted = jobq
        .prune_finished(Duration::from_secs(1800))
        .await
        .unwrap();
    assert!(deleted >= 2, "at least this test's two rows: {deleted}");
    assert!(!exists(old_done).await, "done an hour ago: pruned");
    assert!(
        !exists(old_cancelled).await,
        "cancelled an hour ago: pruned"
    );
    assert!(exists(new_done).await, "done just now: kept");
    assert!(
        exists(old_failed).await,
        "failed rows are not pruned with the finished ones"
    );
    assert!(exists(pending).await, "pending: kept");

    assert!(jobq.prune_failed(Duration::from_secs(1800)).await.unwrap() >= 1);
    assert!(!exists(old_failed).await, "failed an hour ago: pruned");
    assert!(exists(new_done).await && exists(pending).await);

    // A pruned job's key is free again.
    let key = format!("prune-key-{queue}");
    let first = jobq
        .enqueue_with(Record::new(4), on(&queue).idempotency_key(key.clone()))
        .await
        .unwrap();
    assert!(jobq.cancel(first.id).await.unwrap());
    finished_an_hour_ago(&jobq, first.id).await;
    jobq.prune_finished(Duration::from_secs(1800))
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(Record::new(4), on(&queue).idempotency_key(key))
        .await
        .unwrap();
    assert!(!again.duplicate && again.id != first.id, "{again:?}");
}

/// A job scheduled every second; records the tick it was enqueued for.
#[job(name = "conf_cron_tick", queue = "conf_cron")]
async fn cron_tick(ctx: JobContext, recorder: State<Recorder>, keys: State<KeyLog>) {
    recorder.record(ctx.id(), ctx.attempt());
    keys.0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(ctx.idempotency_key());
}

/// Two workers (two processes' worth: each its own pool) schedule the same
/// job every second; each tick is enqueued once and runs once, and no tick
/// between the first and the last is missed.
async fn a_cron_job_runs_once_per_tick_however_many_workers_schedule_it(db: TestDb) {
    let keys = KeyLog::default();
    let recorder = Recorder::default();
    let started = chrono::Utc::now();
    // The ticks of this test's rows, in the order they ran (the queue may
    // hold rows an earlier, interrupted run left; their ticks are older).
    let ticks = || -> Vec<chrono::DateTime<chrono::Utc>> {
        keys.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|key| {
                let at = key
                    .strip_prefix("cron:conf_cron_tick:")
                    .unwrap_or_else(|| panic!("the key names the job and the tick: {key}"));
                chrono::DateTime::parse_from_rfc3339(at)
                    .unwrap()
                    .with_timezone(&chrono::Utc)
            })
            .filter(|tick| *tick > started)
            .collect()
    };
    let mut handles = Vec::new();
    for _ in 0..2 {
        let jobq = db.jobq().await;
        handles.push(
            Worker::builder(jobq)
                .queue("conf_cron", 2)
                .state(recorder.clone())
                .state(keys.clone())
                .poll_interval(Duration::from_millis(50))
                .cron("* * * * * *", CronTick::new())
                .build()
                .unwrap()
                .start(),
        );
    }
    wait_until("four ticks ran", LONG, || async { ticks().len() >= 4 }).await;
    for handle in handles {
        stop(handle).await;
    }
    let ran = ticks();
    let mut distinct = ran.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ran.len(), "a tick ran twice: {ran:?}");
    for pair in distinct.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            chrono::Duration::seconds(1),
            "ticks one second apart, none missed: {distinct:?}"
        );
    }
    assert!(recorder.repeated().is_empty(), "no job ran twice");
}

/// Claims during a long drain may go on from where the previous claim
/// ended (MySQL/MariaDB does, to skip the index entries claims leave behind
/// until purge); a job that sorts before that point must still run soon,
/// not after the backlog.
async fn a_job_ahead_of_a_draining_backlog_runs_before_the_backlog_is_done(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("ahead");
    // 2,000 jobs of 3 ms on 4 slots: at least 1.5 s of draining.
    let backlog = enqueue_ids(
        &jobq,
        (0..2_000).map(|_| (Long::new(3), on(&queue).priority(5))),
    )
    .await;
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    wait_until("200 backlog jobs ran", LONG, || async {
        recorder.totals().0 >= 200
    })
    .await;
    let urgent = jobq
        .enqueue_with(Record::new(0), on(&queue).priority(0))
        .await
        .unwrap()
        .id;
    let past = jobq
        .enqueue_with(
            Record::new(1),
            on(&queue)
                .priority(5)
                .run_at(chrono::Utc::now() - chrono::Duration::hours(1)),
        )
        .await
        .unwrap()
        .id;
    wait_until("every job ran", LONG, || async {
        recorder.totals().0 == backlog.len() + 2
    })
    .await;
    stop(handle).await;
    let last_of_backlog = backlog
        .iter()
        .map(|id| recorder.runs(*id)[0].at)
        .max()
        .unwrap();
    for (what, id) in [("priority 0", urgent), ("an hour-old run_at", past)] {
        let ran = recorder.runs(id)[0].at;
        let after = backlog
            .iter()
            .filter(|id| recorder.runs(**id)[0].at > ran)
            .count();
        assert!(
            ran < last_of_backlog && after > 100,
            "the job with {what} ran before only {after} of the backlog's jobs"
        );
    }
}

async fn a_delayed_job_waits_for_its_run_at(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("delay");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let start = Instant::now();
    let id = jobq
        .enqueue_with(Record::new(0), on(&queue).delay(Duration::from_millis(700)))
        .await
        .unwrap()
        .id;
    wait_until("the delayed job ran", LONG, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    let ran_after = recorder.runs(id)[0].at - start;
    stop(handle).await;
    assert!(
        ran_after >= Duration::from_millis(650),
        "ran after {ran_after:?}"
    );
    assert!(
        ran_after < Duration::from_millis(2500),
        "ran after {ran_after:?}"
    );
}

async fn failed_attempts_retry_on_the_policy_schedule(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("retry");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = jobq
        .enqueue_with(Flaky::new(2), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    let runs = recorder.runs(id);
    assert_eq!(
        runs.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(info.attempts, 3);
    assert_eq!(
        info.last_error.as_deref(),
        Some("flaky failure on attempt 2")
    );
    // retry = ["300ms", "600ms"]: the gaps follow the list (poll 50 ms, tolerance 250 ms).
    for (gap, want) in [
        (runs[1].at - runs[0].at, 300),
        (runs[2].at - runs[1].at, 600),
    ] {
        let want = Duration::from_millis(want);
        assert!(
            gap >= want - Duration::from_millis(20),
            "gap {gap:?} shorter than {want:?}"
        );
        assert!(
            gap <= want + Duration::from_millis(250),
            "gap {gap:?} much longer than {want:?}"
        );
    }
}

async fn exhausted_attempts_mark_the_job_failed_with_the_last_error(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("exhaust");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = jobq
        .enqueue_with(AlwaysFails::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(handle).await;
    assert_eq!(info.attempts, 3);
    assert_eq!(recorder.runs(id).len(), 3);
    let error = info.last_error.unwrap();
    assert!(error.starts_with("attempt 3 failed"), "{error}");
    assert!(error.contains("attempts exhausted"), "{error}");
    assert!(info.finished_at.is_some());
}

async fn a_permanent_error_fails_after_one_attempt(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("permanent");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = jobq
        .enqueue_with(Permanent::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(handle).await;
    assert_eq!(info.attempts, 1);
    assert_eq!(info.last_error.as_deref(), Some("no such user"));
    assert_eq!(recorder.runs(id).len(), 1);
}

async fn snooze_does_not_use_up_an_attempt(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("snooze");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    // max_attempts = 2, snoozed 3 times: only possible if snoozes do not count.
    let id = jobq
        .enqueue_with(Snoozer::new(3), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    let attempts: Vec<u32> = recorder.runs(id).iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 1, 1, 1]);
    assert_eq!(info.attempts, 1);
}

async fn a_panic_is_a_failed_attempt_with_the_panic_message(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("panic");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = jobq
        .enqueue_with(Panics::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    // The worker survives: it runs the next job.
    let next = jobq
        .enqueue_with(Record::new(1), on(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, next, JobStatus::Done, LONG).await;
    stop(handle).await;
    let error = info.last_error.unwrap();
    assert!(
        error.contains(&format!("handler panicked: kaboom in job {id}")),
        "{error}"
    );
}

async fn a_timeout_is_a_failed_attempt(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("timeout");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let started = Instant::now();
    let id = jobq.enqueue_with(Slow::new(), on(&queue)).await.unwrap().id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(handle).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let error = info.last_error.unwrap();
    assert!(error.contains("timed out after 100ms"), "{error}");
}

async fn a_payload_that_does_not_decode_fails_with_a_clear_message(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("badpayload");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let bad = jobq
        .enqueue_with(WrongShape { n: "x".into() }, on(&queue))
        .await
        .unwrap()
        .id;
    let good = jobq
        .enqueue_with(Record::new(5), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, bad, JobStatus::Failed, LONG).await;
    wait_for_status(&jobq, good, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(info.attempts, 1, "not retried: retrying cannot fix it");
    let error = info.last_error.unwrap();
    assert!(
        error.contains("payload of job `conf_record` does not deserialize"),
        "{error}"
    );
    assert!(error.contains("invalid type"), "{error}");
    assert!(recorder.runs(bad).is_empty());
}

async fn an_unknown_job_name_is_retried_with_a_clear_error(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unknown");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = jobq
        .enqueue_with(FromTheFuture { n: 1 }, on(&queue))
        .await
        .unwrap()
        .id;
    let good = jobq
        .enqueue_with(Record::new(5), on(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, good, JobStatus::Done, LONG).await;
    wait_until("the unknown job was attempted", LONG, || async {
        jobq.job(id).await.unwrap().unwrap().last_error.is_some()
    })
    .await;
    stop(handle).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        info.status,
        JobStatus::Pending,
        "kept for a worker that knows it"
    );
    assert!(
        info.run_at > chrono::Utc::now() - chrono::Duration::milliseconds(100),
        "scheduled with backoff"
    );
    let error = info.last_error.unwrap();
    assert!(
        error.contains("unknown job `conf_from_the_future`"),
        "{error}"
    );
}

async fn a_stale_worker_cannot_settle_a_reclaimed_job(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("stale");
    let recorder = Recorder::default();
    let gates = Gates::default();
    // A: short lease, no heartbeats, so its claim expires while attempt 1 runs.
    let a = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .state(recorder.clone())
        .state(gates.clone())
        .state(KeyLog::default())
        .lease(Duration::from_millis(500))
        .disable_heartbeats()
        .reap_interval(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(50))
        .worker_id("worker-a")
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Gated::new(), on(&queue))
        .await
        .unwrap()
        .id;
    wait_until("A started attempt 1", LONG, || async {
        recorder.runs(id).len() == 1
    })
    .await;
    let b = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .state(recorder.clone())
        .state(gates.clone())
        .state(KeyLog::default())
        .reap_interval(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(50))
        .worker_id("worker-b")
        .build()
        .unwrap()
        .start();
    wait_until("B re-claimed the job as attempt 2", LONG, || async {
        recorder.runs(id).len() == 2
    })
    .await;
    // A's attempt now fails: its retry settle must be fenced out.
    gates.open(1);
    wait_until("A let go of the job", LONG, || async { a.held_jobs() == 0 }).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Processing, "still B's: {info:?}");
    assert_eq!(info.attempts, 2);
    assert_eq!(info.claimed_by.as_deref(), Some("worker-b"));
    assert!(
        info.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("lease expired"),
        "{info:?}"
    );
    gates.open(2);
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    assert_eq!(info.attempts, 2);
    stop(a).await;
    stop(b).await;
}

async fn a_worker_dropped_mid_job_has_it_run_again_within_about_a_lease(db: TestDb) {
    let lease = Duration::from_secs(1);
    let recorder = Recorder::default();
    let queue = unique_queue("dropped");
    let jobq = db.jobq().await;
    let id = jobq
        .enqueue_with(Long::new(60_000), on(&queue))
        .await
        .unwrap()
        .id;
    // Worker A lives in its own runtime, which is dropped mid-job: no shutdown, no settle.
    let (url, q, r) = (db.url().to_owned(), queue.clone(), recorder.clone());
    let a = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let jobq = Jobq::connect(&url).await.unwrap();
            let handle = worker(&jobq, &q, 1, &r)
                .lease(lease)
                .build()
                .unwrap()
                .start();
            wait_until("A started the job", LONG, || async {
                !r.runs(id).is_empty()
            })
            .await;
            std::mem::forget(handle);
        });
        runtime.shutdown_background();
    });
    a.join().unwrap();
    let dropped_at = Instant::now();
    let handle = worker(&jobq, &queue, 1, &recorder).build().unwrap().start();
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    let rerun = recorder.runs(id)[1].at - dropped_at;
    stop(handle).await;
    assert_eq!(info.attempts, 2);
    assert!(
        rerun <= lease + Duration::from_millis(700),
        "ran again after {rerun:?}"
    );
}

async fn shutdown_releases_unfinished_jobs_to_pending_by_the_deadline(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("shutdown");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    let short = jobq
        .enqueue_with(Record::new(0), on(&queue))
        .await
        .unwrap()
        .id;
    let mut long = Vec::new();
    for _ in 0..3 {
        long.push(
            jobq.enqueue_with(Long::new(60_000), on(&queue))
                .await
                .unwrap()
                .id,
        );
    }
    wait_until("all four started", LONG, || async {
        recorder.totals().0 == 4
    })
    .await;
    let started = Instant::now();
    handle.shutdown(Duration::from_millis(300)).await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(290),
        "waited for the deadline: {took:?}"
    );
    assert!(
        took < Duration::from_secs(3),
        "deadline respected: {took:?}"
    );
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.processing, 0, "{counts:?}");
    assert_eq!(
        jobq.job(short).await.unwrap().unwrap().status,
        JobStatus::Done
    );
    for id in long {
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Pending);
        assert_eq!(info.attempts, 0, "the interrupted attempt is not counted");
    }
}

/// Short jobs are claimed ahead of free slots; a shutdown in the middle of a
/// drain hands those back to `pending` without counting an attempt, and
/// nothing runs twice or stays `processing`.
async fn shutdown_mid_drain_hands_back_jobs_claimed_ahead_uncounted(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("ahead");
    let total = 3000;
    let ids = enqueue_ids(&jobq, (0..total).map(|n| (Record::new(n), on(&queue)))).await;
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    wait_until("some jobs ran", LONG, || async {
        recorder.totals().0 >= 300
    })
    .await;
    stop(handle).await;

    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.processing, 0, "{counts:?}");
    assert_eq!(counts.done + counts.pending, total, "{counts:?}");
    assert!(
        recorder.repeated().is_empty(),
        "ran twice: {:?}",
        recorder.repeated()
    );
    assert_eq!(recorder.totals().0 as u64, counts.done, "{counts:?}");
    for id in ids {
        let job = jobq.job(id).await.unwrap().unwrap();
        let expected = if job.status == JobStatus::Done { 1 } else { 0 };
        assert_eq!(job.attempts, expected, "{job:?}");
    }
}

async fn enqueue_in_follows_the_callers_transaction(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("outbox");
    macro_rules! in_tx {
        ($pool:expr, $commit:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = jobq
                .enqueue_in_with(&mut *tx, Record::new(u64::from($commit)), on(&queue))
                .await
                .unwrap();
            if $commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            e.id
        }};
    }
    let (rolled_back, committed) = match db.backend() {
        jobq_runtime::Backend::MySql => {
            let pool = jobq.mysql_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
        jobq_runtime::Backend::Postgres => {
            let pool = jobq.pg_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
        _ => {
            let pool = jobq.sqlite_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
    };
    // SQLite may hand the rolled-back id out again; the payload tells the rows apart.
    if rolled_back != committed {
        assert!(jobq.job(rolled_back).await.unwrap().is_none());
    }
    let info = jobq.job(committed).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Pending);
    assert_eq!(
        info.payload, r#"{"n":1}"#,
        "the committed job, not the rolled-back one"
    );
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

async fn cancel_stops_a_job_and_retry_revives_it(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("cancel");
    let id = jobq
        .enqueue_with(Record::new(1), on(&queue).delay(Duration::from_secs(3600)))
        .await
        .unwrap()
        .id;
    assert!(jobq.cancel(id).await.unwrap());
    assert!(!jobq.cancel(id).await.unwrap(), "already cancelled");
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Cancelled);
    assert!(jobq.retry(id).await.unwrap());
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 1, &recorder).build().unwrap().start();
    wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert!(!jobq.retry(id).await.unwrap(), "a done job is not retried");
}

async fn cancelling_a_running_job_stops_it_without_settling(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("cancelrun");
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, 1, &recorder)
        .heartbeat_interval(Duration::from_millis(100))
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Long::new(60_000), on(&queue))
        .await
        .unwrap()
        .id;
    wait_until("the job started", LONG, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    assert!(jobq.cancel(id).await.unwrap());
    wait_until("the heartbeat stopped the attempt", LONG, || async {
        handle.held_jobs() == 0
    })
    .await;
    let next = jobq
        .enqueue_with(Record::new(1), on(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, next, JobStatus::Done, LONG).await;
    stop(handle).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        info.status,
        JobStatus::Cancelled,
        "not overwritten by a settle"
    );
    assert_eq!(recorder.runs(id).len(), 1);
}

async fn the_handler_sees_a_stable_idempotency_key(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("ctxkey");
    let recorder = Recorder::default();
    let keys = KeyLog::default();
    let handle = worker(&jobq, &queue, 1, &recorder)
        .state(keys.clone())
        .build()
        .unwrap()
        .start();
    let user: u64 = rand::random::<u32>().into();
    let keyed = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, keyed, JobStatus::Done, LONG).await;
    stop(handle).await;
    let seen = keys
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(seen, [format!("conf-key:{user}")]);
    let ctx = JobContext::detached(jobq_runtime::JobMeta::new(5, "conf_record", "q"));
    assert_eq!(
        ctx.idempotency_key(),
        "jobq:conf_record:5",
        "the default without a key"
    );
}

jobq_tests::on_every_backend!(
    a_worker_drains_enqueued_jobs_to_done,
    eight_workers_drain_every_job_exactly_once,
    an_existing_idempotency_key_returns_the_existing_job,
    concurrent_enqueuers_of_one_key_create_one_row,
    enqueue_many_returns_ids_in_input_order,
    concurrent_keyless_batches_return_each_rows_id,
    claims_follow_priority_then_run_at,
    a_job_ahead_of_a_draining_backlog_runs_before_the_backlog_is_done,
    a_cron_job_runs_once_per_tick_however_many_workers_schedule_it,
    prune_deletes_finished_rows_past_the_retention_and_nothing_else,
    a_delayed_job_waits_for_its_run_at,
    failed_attempts_retry_on_the_policy_schedule,
    exhausted_attempts_mark_the_job_failed_with_the_last_error,
    a_permanent_error_fails_after_one_attempt,
    snooze_does_not_use_up_an_attempt,
    a_panic_is_a_failed_attempt_with_the_panic_message,
    a_timeout_is_a_failed_attempt,
    a_payload_that_does_not_decode_fails_with_a_clear_message,
    an_unknown_job_name_is_retried_with_a_clear_error,
    a_stale_worker_cannot_settle_a_reclaimed_job,
    a_worker_dropped_mid_job_has_it_run_again_within_about_a_lease,
    shutdown_releases_unfinished_jobs_to_pending_by_the_deadline,
    shutdown_mid_drain_hands_back_jobs_claimed_ahead_uncounted,
    enqueue_in_follows_the_callers_transaction,
    cancel_stops_a_job_and_retry_revives_it,
    cancelling_a_running_job_stops_it_without_settling,
    the_handler_sees_a_stable_idempotency_key,
);
