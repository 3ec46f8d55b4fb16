//! Bad input, one behaviour per test, on every backend: each is refused (or
//! failed) with an error that says what was wrong and what to do, and nothing
//! else is affected — the same handle enqueues, the same worker runs the next
//! job. (Conformance covers a payload of the wrong type, an unknown job that
//! is retried, and a panic with a message; these extend them.)

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use jobq_runtime::{
    DEFAULT_MAX_PAYLOAD_BYTES, Enqueue, Error, Job, JobContext, JobInfo, JobStatus, Jobq,
    MAX_DELAY, MAX_KEY_LEN, MAX_QUEUE_LEN, State, Worker, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{
    Recorder, TestDb, assert_contains, fixture, invalid, on, stop, unique_queue, wait_for_status,
    wait_until,
};

#[job(name = "bad_record")]
async fn record(ctx: &JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
}

#[job(name = "bad_blob")]
async fn blob(ctx: &JobContext, recorder: State<Recorder>, data: String) {
    let _ = data;
    recorder.record(ctx.id(), ctx.attempt());
}

#[job(name = "bad_panics_any", max_attempts = 1)]
async fn panics_any(ctx: &JobContext, recorder: State<Recorder>) {
    recorder.record(ctx.id(), ctx.attempt());
    std::panic::panic_any(42_i32);
}

/// Blocks its runtime thread (never do this in a handler: use spawn_blocking).
#[job(name = "bad_blocks_thread", max_attempts = 1)]
async fn blocks_thread(ctx: &JobContext, recorder: State<Recorder>, ms: u64) {
    recorder.record(ctx.id(), ctx.attempt());
    std::thread::sleep(Duration::from_millis(ms));
}

/// Blocks its runtime thread on the first attempt only.
#[job(name = "bad_blocks_first", max_attempts = 3)]
async fn blocks_first(ctx: &JobContext, recorder: State<Recorder>, ms: u64) {
    recorder.record(ctx.id(), ctx.attempt());
    if ctx.attempt() == 1 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// A job no worker has a handler for.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Unregistered {
    n: u64,
}

impl Job for Unregistered {
    const NAME: &'static str = "bad_unregistered";
}

const LONG: Duration = Duration::from_secs(20);

fn worker(jobq: &Jobq, queue: &str, recorder: &Recorder) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 2)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
}

/// `job`, enqueued on a fresh queue with `options` applied, runs on a fresh
/// worker until it failed; a good job then still runs. Its row, and the
/// recorder of the handlers' runs.
async fn fails_then_a_good_job_runs<J: Job>(
    db: &TestDb,
    queue: &str,
    job: J,
    options: impl FnOnce(Enqueue) -> Enqueue,
) -> (JobInfo, Recorder) {
    let (jobq, queue, recorder) = fixture(db, queue).await;
    let handle = worker(&jobq, &queue, &recorder).build().unwrap().start();
    let id = jobq
        .enqueue_with(job, options(on(&queue)))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    a_good_job_still_runs(&jobq, &queue).await;
    stop(handle).await;
    (info, recorder)
}

/// The message with which enqueueing a `Record` with `options` is refused.
async fn refused(jobq: &Jobq, options: Enqueue) -> String {
    invalid(jobq.enqueue_with(Record::new(1), options).await)
}

/// Inserts a row as jobq would, but with any payload text.
async fn insert_raw(jobq: &Jobq, queue: &str, job_name: &str, payload: &str) -> i64 {
    let db = Db::of(jobq);
    let sql = db.pick(
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
         VALUES (?, ?, ?, 0, UTC_TIMESTAMP(6), 5, UTC_TIMESTAMP(6))",
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
         VALUES (?, ?, ?, 0, now(), 5, now())",
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
         VALUES (?, ?, ?, 0, ?, 5, ?)",
    );
    let mut args: Vec<Arg> = vec![queue.into(), job_name.into(), payload.into()];
    if matches!(db, Db::Sqlite(_)) {
        let now = jobq_tests::chaos::now_us();
        args.extend([Arg::Int(now), Arg::Int(now)]);
    }
    db.execute(sql, &args).await.expect("raw insert");
    let (id,): (i64,) = db
        .fetch_all::<(i64,)>(
            "SELECT MAX(id) FROM jobq_jobs WHERE queue = ?",
            &[queue.into()],
        )
        .await
        .expect("the raw row's id")[0];
    id
}

/// Enqueues a good job on `queue` and waits until it is done: the worker and the handle still work.
async fn a_good_job_still_runs(jobq: &Jobq, queue: &str) {
    let id = jobq
        .enqueue_with(Record::new(7), on(queue))
        .await
        .expect("the handle still enqueues")
        .id;
    wait_for_status(jobq, id, JobStatus::Done, LONG).await;
}

async fn a_payload_that_is_not_json_fails_at_once_and_names_the_fix(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "notjson").await;
    let handle = worker(&jobq, &queue, &recorder).build().unwrap().start();
    let bad = insert_raw(&jobq, &queue, "bad_record", "this is {not json").await;
    let info = wait_for_status(&jobq, bad, JobStatus::Failed, LONG).await;
    a_good_job_still_runs(&jobq, &queue).await;
    stop(handle).await;
    assert_eq!(info.attempts, 1, "not retried: retrying cannot fix it");
    assert!(recorder.runs(bad).is_empty(), "the handler never ran");
    let error = info.last_error.unwrap();
    assert_contains(
        &error,
        &[
            "payload of job `bad_record` does not deserialize",
            "expected ident at line 1 column 2",
            "failed without retrying",
            "call Jobq::retry",
        ],
    );
}

async fn json_of_the_wrong_shape_fails_naming_the_field(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "shape").await;
    let handle = worker(&jobq, &queue, &recorder).build().unwrap().start();
    let cases = [
        ("{}", "missing field `n`"),
        (r#"{"m": 1}"#, "missing field `n`"),
        (r#"{"n": -1}"#, "invalid value: integer `-1`, expected u64"),
        (
            r#"{"n": 1.5}"#,
            "invalid type: floating point `1.5`, expected u64",
        ),
        ("null", "invalid type: null"),
        ("[]", "invalid length 0"),
        (r#""n""#, "invalid type: string"),
    ];
    let mut ids = Vec::new();
    for (payload, _) in cases {
        ids.push(insert_raw(&jobq, &queue, "bad_record", payload).await);
    }
    // Unknown fields are ignored (serde's default): a newer producer may add
    // fields. And serde reads a struct from an array of its fields in order.
    let extra = insert_raw(
        &jobq,
        &queue,
        "bad_record",
        r#"{"n": 3, "added_later": true}"#,
    )
    .await;
    let array = insert_raw(&jobq, &queue, "bad_record", "[4]").await;
    for (id, (payload, expected)) in ids.iter().zip(cases) {
        let info = wait_for_status(&jobq, *id, JobStatus::Failed, LONG).await;
        let error = info.last_error.unwrap();
        assert!(error.contains(expected), "{payload}: {error}");
        assert!(error.contains("bad_record"), "{payload}: {error}");
        assert_eq!(info.attempts, 1, "{payload}");
    }
    wait_for_status(&jobq, extra, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, array, JobStatus::Done, LONG).await;
    a_good_job_still_runs(&jobq, &queue).await;
    stop(handle).await;
}

async fn an_unknown_job_fails_once_its_attempts_are_used_up(db: TestDb) {
    let options = |o: Enqueue| o.max_attempts(1);
    let (info, _) =
        fails_then_a_good_job_runs(&db, "unknown1", Unregistered { n: 1 }, options).await;
    let error = info.last_error.unwrap();
    assert_contains(
        &error,
        &[
            "unknown job `bad_unregistered`",
            "no handler registered",
            "attempts exhausted",
            "pin the old name",
        ],
    );
}

async fn a_payload_over_the_limit_is_refused_at_enqueue_naming_the_limit(db: TestDb) {
    let jobq = db.jobq().await.with_max_payload_bytes(1024);
    let queue = unique_queue("big");
    let big = "x".repeat(2000);
    let message = invalid(jobq.enqueue_with(Blob::new(big.clone()), on(&queue)).await);
    assert_contains(
        &message,
        &[
            "payload of job `bad_blob`",
            "over the limit of 1024 bytes",
            "Jobq::with_max_payload_bytes",
        ],
    );
    // A batch with one payload over the limit inserts nothing.
    let batch = vec![
        (Blob::new("small".into()), on(&queue)),
        (Blob::new(big.clone()), on(&queue)),
    ];
    invalid(jobq.enqueue_many_with(batch).await);
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 0);
    // Just under the limit is fine, and so is the default limit of 4 MiB.
    let fits = "x".repeat(1024 - r#"{"data":""}"#.len());
    jobq.enqueue_with(Blob::new(fits), on(&queue))
        .await
        .unwrap();
    let default = db.jobq().await;
    assert_eq!(DEFAULT_MAX_PAYLOAD_BYTES, 4 << 20);
    let id = default
        .enqueue_with(Blob::new("y".repeat(4 << 20).split_off(16)), on(&queue))
        .await
        .unwrap()
        .id;
    let info = default.job(id).await.unwrap().unwrap();
    assert_eq!(info.payload.len(), (4 << 20) - 16 + r#"{"data":""}"#.len());
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 2);
}

async fn an_idempotency_key_over_the_column_length_is_refused(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("longkey");
    let long = "k".repeat(MAX_KEY_LEN + 1);
    let message = refused(&jobq, on(&queue).idempotency_key(long)).await;
    assert_contains(
        &message,
        &[
            "idempotency key of job `bad_record` is 256 characters long",
            "1 to 255",
            "hash a longer key",
        ],
    );
    let message = refused(&jobq, on(&queue).idempotency_key("")).await;
    assert!(message.contains("is 0 characters long"), "{message}");
    // 255 four-byte characters fit (the limit is in characters, as the column's).
    let key = format!(
        "{}{}",
        "🦀".repeat(MAX_KEY_LEN - 9),
        &queue[queue.len() - 9..]
    );
    assert_eq!(key.chars().count(), MAX_KEY_LEN);
    let e = jobq
        .enqueue_with(Record::new(2), on(&queue).idempotency_key(key.clone()))
        .await
        .unwrap();
    let info = jobq.job(e.id).await.unwrap().unwrap();
    assert_eq!(info.idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

async fn an_empty_or_over_long_queue_name_is_refused(db: TestDb) {
    let jobq = db.jobq().await;
    for queue in [String::new(), "q".repeat(MAX_QUEUE_LEN + 1)] {
        let message = refused(&jobq, on(&queue)).await;
        assert!(
            message.contains(&format!("is {} bytes long", queue.len())),
            "{message}"
        );
        assert!(message.contains("1 to 128 bytes"), "{message}");
        let error = Worker::builder(jobq.clone())
            .queue_unchecked(queue.clone(), 1)
            .state(Recorder::default())
            .build()
            .unwrap_err();
        assert!(matches!(error, Error::Config(_)), "{error:?}");
        assert!(error.to_string().contains("1 to 128 bytes"), "{error}");
    }
    // 128 bytes (64 two-byte characters) fit.
    let queue = format!("{}{}", "é".repeat(60), &unique_queue("")[1..]);
    assert_eq!(queue.len(), MAX_QUEUE_LEN);
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, &recorder).build().unwrap().start();
    a_good_job_still_runs(&jobq, &queue).await;
    stop(handle).await;
}

async fn a_concurrency_of_zero_or_beyond_reason_is_refused_at_build(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("conc");
    let error = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 0)
        .state(Recorder::default())
        .build()
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&format!("queue `{queue}` has concurrency 0")),
        "{message}"
    );
    assert!(message.contains("it must be 1 to 10000"), "{message}");
    let error = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, usize::MAX)
        .state(Recorder::default())
        .build()
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&format!("queue `{queue}` has concurrency {}", usize::MAX)),
        "{message}"
    );
    assert!(message.contains("run more workers"), "{message}");
    // The largest allowed builds.
    Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 10_000)
        .state(Recorder::default())
        .build()
        .unwrap();
}

async fn max_attempts_outside_its_range_is_refused(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("attempts");
    for attempts in [0, u32::MAX] {
        let message = refused(&jobq, on(&queue).max_attempts(attempts)).await;
        assert!(
            message.contains(&format!("max_attempts of job `bad_record` is {attempts}")),
            "{message}"
        );
        assert!(message.contains("it must be 1 to 2147483647"), "{message}");
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 0);
}

async fn a_delay_beyond_the_limit_is_refused(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("delay");
    for delay in [Duration::MAX, MAX_DELAY + Duration::from_secs(1)] {
        let message = refused(&jobq, on(&queue).delay(delay)).await;
        assert_contains(
            &message,
            &[
                "longer than the limit of 100 years",
                "MAX_DELAY",
                "pass a shorter delay",
            ],
        );
    }
    // The limit itself is stored as it is.
    let id = jobq
        .enqueue_with(Record::new(1), on(&queue).delay(MAX_DELAY))
        .await
        .unwrap()
        .id;
    let info = jobq.job(id).await.unwrap().unwrap();
    let expected = Utc::now() + chrono::Duration::from_std(MAX_DELAY).unwrap();
    assert!(
        (info.run_at - expected).num_seconds().abs() < 60,
        "{} vs {expected}",
        info.run_at
    );
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

async fn a_run_at_far_in_the_past_runs_now(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("past");
    let mut ids = Vec::new();
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    for (at, stored) in [
        (DateTime::<Utc>::MIN_UTC, epoch),
        (epoch - chrono::Duration::days(365 * 2000), epoch),
        (
            epoch + chrono::Duration::days(1),
            epoch + chrono::Duration::days(1),
        ),
    ] {
        let id = jobq
            .enqueue_with(Record::new(1), on(&queue).run_at(at))
            .await
            .unwrap_or_else(|e| panic!("run_at {at}: {e}"))
            .id;
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.run_at, stored, "run_at {at}");
        ids.push(id);
    }
    let recorder = Recorder::default();
    let handle = worker(&jobq, &queue, &recorder).build().unwrap().start();
    for id in ids {
        wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    }
    stop(handle).await;
}

async fn a_run_at_beyond_the_limit_is_refused(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("future");
    for at in [
        DateTime::<Utc>::MAX_UTC,
        "9999-12-31T23:59:59Z".parse::<DateTime<Utc>>().unwrap(),
        Utc::now() + chrono::Duration::from_std(MAX_DELAY + Duration::from_secs(3600)).unwrap(),
    ] {
        let message = refused(&jobq, on(&queue).run_at(at)).await;
        assert_contains(
            &message,
            &["run_at", "more than 100 years", "within 100 years"],
        );
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 0);
}

async fn a_handler_panicking_with_a_non_string_payload_is_a_failed_attempt(db: TestDb) {
    let (info, recorder) =
        fails_then_a_good_job_runs(&db, "panicany", PanicsAny::new(), |o| o).await;
    let id = info.id;
    assert_eq!(recorder.runs(id).len(), 1);
    let error = info.last_error.unwrap();
    assert_contains(&error, &["handler panicked", "not a string"]);
}

/// With a runtime of 2 worker threads, one handler blocking its thread does
/// not stop claiming or heartbeats: the other queue's jobs run meanwhile and
/// the blocked job keeps its lease (heartbeats run on the free thread).
async fn a_handler_blocking_its_thread_does_not_stall_other_queues(db: TestDb) {
    let jobq = db.jobq().await;
    let slow = unique_queue("blocking");
    let fast = unique_queue("notblocked");
    let recorder = Recorder::default();
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&slow, 1)
        .queue_unchecked(&fast, 2)
        .state(recorder.clone())
        .lease(Duration::from_millis(900))
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
        .build()
        .unwrap()
        .start();
    // A second worker that would re-run the blocked job if its lease expired.
    let other = Worker::builder(jobq.clone())
        .queue_unchecked(&slow, 1)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
        .build()
        .unwrap()
        .start();
    let blocker = jobq
        .enqueue_with(BlocksThread::new(3_000), on(&slow))
        .await
        .unwrap()
        .id;
    wait_until("the blocking handler started", LONG, || async {
        !recorder.runs(blocker).is_empty()
    })
    .await;
    let blocked_at = recorder.runs(blocker)[0].at;
    let mut fast_ids = Vec::new();
    for n in 0..5 {
        fast_ids.push(
            jobq.enqueue_with(Record::new(n), on(&fast))
                .await
                .unwrap()
                .id,
        );
    }
    for id in &fast_ids {
        wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
    }
    let fast_done = blocked_at.elapsed();
    assert!(
        fast_done < Duration::from_millis(2_500),
        "the other queue ran while the handler blocked: {fast_done:?}"
    );
    let info = wait_for_status(&jobq, blocker, JobStatus::Done, LONG).await;
    stop(handle).await;
    stop(other).await;
    assert_eq!(
        recorder.runs(blocker).len(),
        1,
        "heartbeats kept the lease: it did not run twice"
    );
    assert_eq!(info.attempts, 1);
}

/// When a handler blocks every thread of its runtime (here the only one),
/// the whole worker stalls with it, heartbeats included: the lease expires,
/// another worker runs the job again, and the blocked attempt's late
/// success is fenced out. At-least-once holds; the run is wasted.
async fn a_handler_blocking_every_runtime_thread_loses_its_lease_to_another_worker(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "blockall").await;
    let id = jobq
        .enqueue_with(BlocksFirst::new(2_500), on(&queue))
        .await
        .unwrap()
        .id;
    // A: a current-thread runtime of its own, so the blocking handler blocks all of it.
    let (url, q, r) = (db.url().to_owned(), queue.clone(), recorder.clone());
    let a = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let jobq = Jobq::connect(&url).await.unwrap();
            let handle = Worker::builder(jobq.clone())
                .queue_unchecked(&q, 1)
                .state(r.clone())
                .lease(Duration::from_millis(600))
                .poll_interval(Duration::from_millis(50))
                .worker_id("blocked-a")
                .build()
                .unwrap()
                .start();
            wait_until("A finished its attempt", LONG, || async {
                handle.held_jobs() == 0 && !r.runs(id).is_empty()
            })
            .await;
            stop(handle).await;
        });
    });
    wait_until("A started the job", LONG, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    let b = worker(&jobq, &queue, &recorder)
        .worker_id("free-b")
        .build()
        .unwrap()
        .start();
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    tokio::task::spawn_blocking(move || a.join().unwrap())
        .await
        .unwrap();
    stop(b).await;
    assert_eq!(recorder.runs(id).len(), 2, "B ran it again");
    let info_after = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info_after, info, "A's late success changed nothing");
    assert_eq!(info.attempts, 2);
    assert_eq!(info.claimed_by.as_deref(), Some("free-b"));
    assert!(
        info.last_error
            .unwrap_or_default()
            .contains("lease expired during attempt 1: worker blocked-a"),
    );
}

/// A real server limit behind jobq's: MariaDB/MySQL `max_allowed_packet`
/// (16 MiB on MariaDB, 64 MiB on MySQL 8). A payload over it is refused at
/// enqueue with an error naming it — before jobq checked, the server dropped
/// the connection ("Got a packet bigger than 'max_allowed_packet' bytes") —
/// and the handle keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_payload_over_max_allowed_packet_fails_fast_and_clearly() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await.with_max_payload_bytes(usize::MAX);
    let queue = unique_queue("packet");
    let (packet,): (i64,) = Db::of(&jobq)
        .fetch_all::<(i64,)>("SELECT CAST(@@max_allowed_packet AS SIGNED)", &[])
        .await
        .unwrap()[0];
    let data = "z".repeat(usize::try_from(packet).unwrap() + (1 << 20));
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        jobq.enqueue_with(Blob::new(data), on(&queue)),
    )
    .await
    .expect("an oversized packet fails, it does not hang");
    let message = invalid(result);
    assert!(started.elapsed() < Duration::from_secs(5), "at once");
    assert!(message.contains("payload of job `bad_blob`"), "{message}");
    assert!(
        message.contains(&format!("max_allowed_packet = {packet} bytes")),
        "{message}"
    );
    assert!(message.contains("raise max_allowed_packet"), "{message}");
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 0);
    a_good_job_still_runs_with_a_worker(&jobq, &queue).await;
}

/// Many payloads that each fit but together exceed `max_allowed_packet`:
/// `enqueue_many` splits its statements so each fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_batch_larger_than_max_allowed_packet_is_split_to_fit() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await;
    let queue = unique_queue("packetbatch");
    let (packet,): (i64,) = Db::of(&jobq)
        .fetch_all::<(i64,)>("SELECT CAST(@@max_allowed_packet AS SIGNED)", &[])
        .await
        .unwrap()[0];
    let each = 256 << 10;
    let count = usize::try_from(packet).unwrap() / each * 2 + 3;
    let batch = (0..count).map(|i| (Blob::new(format!("{i}:{}", "b".repeat(each))), on(&queue)));
    let enqueued = jobq.enqueue_many_with(batch).await.expect("split to fit");
    assert_eq!(enqueued.len(), count);
    for (i, e) in enqueued.iter().enumerate().step_by(7) {
        let info = jobq.job(e.id).await.unwrap().unwrap();
        assert!(
            info.payload.starts_with(&format!(r#"{{"data":"{i}:"#)),
            "row {i}"
        );
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().pending, count as u64);
}

async fn a_good_job_still_runs_with_a_worker(jobq: &Jobq, queue: &str) {
    let recorder = Recorder::default();
    let handle = worker(jobq, queue, &recorder).build().unwrap().start();
    a_good_job_still_runs(jobq, queue).await;
    stop(handle).await;
}

jobq_tests::on_every_backend!(
    a_payload_that_is_not_json_fails_at_once_and_names_the_fix,
    json_of_the_wrong_shape_fails_naming_the_field,
    an_unknown_job_fails_once_its_attempts_are_used_up,
    a_payload_over_the_limit_is_refused_at_enqueue_naming_the_limit,
    an_idempotency_key_over_the_column_length_is_refused,
    an_empty_or_over_long_queue_name_is_refused,
    a_concurrency_of_zero_or_beyond_reason_is_refused_at_build,
    max_attempts_outside_its_range_is_refused,
    a_delay_beyond_the_limit_is_refused,
    a_run_at_far_in_the_past_runs_now,
    a_run_at_beyond_the_limit_is_refused,
    a_handler_panicking_with_a_non_string_payload_is_a_failed_attempt,
    a_handler_blocking_its_thread_does_not_stall_other_queues,
    a_handler_blocking_every_runtime_thread_loses_its_lease_to_another_worker,
);
