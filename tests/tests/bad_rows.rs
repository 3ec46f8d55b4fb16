//! Bad rows and bad values, on every backend: a row no worker can read fails
//! on its own and stays inspectable; a value no backend can store is refused
//! up front by the same rule everywhere; a batch is stored whole or not at
//! all; a delay a handler asks for beyond the database's range is clamped.
//! The last test looks for the class: random values through enqueue and
//! random bytes through raw INSERT never stall a queue or a worker
//! (`JOBQ_BAD_ROW_CASES=N` for a longer run, `JOBQ_BAD_ROW_SEED` to replay).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::{
    Error, Job, JobContext, JobError, JobStatus, Jobq, MAX_DELAY, State, Worker, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{
    Recorder, TestDb, assert_contains, fixture, invalid, on, stop, unique_queue, wait_for_status,
    wait_until,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[job(name = "rows_record")]
async fn record(ctx: &JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
}

/// What each job's handler received, by job id.
#[derive(Debug, Clone, Default)]
struct Seen(Arc<Mutex<HashMap<i64, String>>>);

impl Seen {
    fn get(&self, id: i64) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }
}

#[job(name = "rows_blob")]
async fn blob(ctx: &JobContext, seen: State<Seen>, data: String) {
    seen.0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(ctx.id(), data);
}

/// Asks for a delay (or a lease) far beyond what any database stores.
#[job(name = "rows_far", max_attempts = 3, retry = ["1000000000h"])]
async fn far(ctx: &JobContext, recorder: State<Recorder>, how: String) -> Result<(), JobError> {
    recorder.record(ctx.id(), ctx.attempt());
    match how.as_str() {
        "snooze" => Err(JobError::snooze(Duration::MAX)),
        "retry_in" => Err(JobError::retry_in(
            Duration::from_secs(10_000 * 365 * 24 * 3600),
            "busy for ten thousand years",
        )),
        "policy" => Err(JobError::retry("the policy decides")),
        "lease" => ctx
            .extend_lease(Duration::MAX)
            .await
            .map_err(|e| JobError::permanent(format!("extend_lease failed: {e}"))),
        other => Err(JobError::permanent(format!("unknown case {other}"))),
    }
}

/// A job whose name no backend can store.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct NulName;

impl Job for NulName {
    const NAME: &'static str = "rows\0nul";
}

const LONG: Duration = Duration::from_secs(30);

fn worker(jobq: &Jobq, queue: &str) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 4)
        .state(Recorder::default())
        .state(Seen::default())
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
}

/// How many rows `queue` holds, in any status.
async fn rows_of(jobq: &Jobq, queue: &str) -> u64 {
    jobq.counts(queue).await.expect("counts").total()
}

/// Enqueues `n` good jobs on `queue`.
async fn good_jobs(jobq: &Jobq, queue: &str, n: u64) -> Vec<i64> {
    let jobs = (0..n).map(|i| (Record::new(i), on(queue)));
    let enqueued = jobq.enqueue_many_with(jobs).await.expect("good jobs");
    enqueued.into_iter().map(|e| e.id).collect()
}

async fn all_done(jobq: &Jobq, ids: &[i64]) {
    for &id in ids {
        wait_for_status(jobq, id, JobStatus::Done, LONG).await;
    }
}

/// A row written by another program: any bytes in `job_name`, `payload` and
/// `idempotency_key`, bound as BLOBs (`as_text`: cast to TEXT, as a row
/// written as text with a broken encoding reads), one attempt allowed.
async fn insert_sqlite_bytes(
    jobq: &Jobq,
    queue: &[u8],
    job_name: &[u8],
    payload: &[u8],
    key: Option<&[u8]>,
    as_text: bool,
) -> i64 {
    let pool = jobq.sqlite_pool().expect("SQLite");
    let cast = |p: &str| {
        if as_text {
            format!("CAST({p} AS TEXT)")
        } else {
            p.to_owned()
        }
    };
    let sql = format!(
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) \
         VALUES (CAST(?1 AS TEXT), {}, {}, 0, ?5, 1, {}, ?5)",
        cast("?2"),
        cast("?3"),
        cast("?4"),
    );
    let now = jobq_tests::chaos::now_us();
    sqlx::query(&sql)
        .bind(queue)
        .bind(job_name)
        .bind(payload)
        .bind(key)
        .bind(now)
        .execute(pool)
        .await
        .expect("raw insert")
        .last_insert_rowid()
}

// ---------------------------------------------------------------- finding 6

/// SQLite stores whatever it is given; MySQL (strict `sql_mode`, the
/// default) and PostgreSQL refuse bytes that are not UTF-8 in text columns,
/// so on them such a row cannot exist: the raw INSERT fails.
async fn an_unreadable_row_fails_on_its_own_and_stays_inspectable(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unreadable");
    let handle = worker(&jobq, &queue).build().unwrap().start();
    let mut bad = Vec::new();
    match Db::of(&jobq) {
        Db::Sqlite(_) => {
            let q = queue.as_bytes();
            let payload = b"{\"n\":1\xff}".as_slice();
            // A BLOB payload, and invalid UTF-8 as TEXT (`CAST(x'ff' AS TEXT)`).
            bad.push(insert_sqlite_bytes(&jobq, q, b"rows_record", payload, None, false).await);
            bad.push(insert_sqlite_bytes(&jobq, q, b"rows_record", payload, None, true).await);
            // A job name and a key that are not UTF-8.
            bad.push(insert_sqlite_bytes(&jobq, q, b"rows_\xffrecord", b"{}", None, true).await);
            let key = Some(b"key-\xfe".as_slice());
            bad.push(insert_sqlite_bytes(&jobq, q, b"rows_record", b"{\"n\":2}", key, true).await);
        }
        db @ (Db::MySql(_) | Db::Postgres(_)) => {
            let sql = db.pick(
                "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
                 VALUES (?, 'rows_record', x'7bff7d', 0, UTC_TIMESTAMP(6), 1, UTC_TIMESTAMP(6))",
                "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
                 VALUES (?, 'rows_record', convert_from('\\x7bff7d'::bytea, 'UTF8'), 0, now(), 1, now())",
                "",
            );
            let refused = db.execute(sql, &[queue.as_str().into()]).await;
            assert!(
                refused.is_err(),
                "{}: a payload that is not UTF-8 was stored",
                db.name()
            );
        }
    }
    let good = good_jobs(&jobq, &queue, 20).await;
    all_done(&jobq, &good).await;
    for &id in &bad {
        let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
        assert_eq!(info.attempts, 1, "not retried: {info:?}");
        let error = info.last_error.clone().unwrap_or_default();
        assert_contains(&error, &["not valid UTF-8", "failed without retrying"]);
        assert!(
            info.payload.contains('\u{FFFD}')
                || info.job_name.contains('\u{FFFD}')
                || info
                    .idempotency_key
                    .as_deref()
                    .unwrap_or("")
                    .contains('\u{FFFD}'),
            "shown lossily: {info:?}"
        );
    }
    stop(handle).await;
    if let Db::Sqlite(_) = Db::of(&jobq) {
        // A row on a queue name that is not UTF-8 is never claimed (no
        // worker can name its queue), and can be inspected.
        let id = insert_sqlite_bytes(&jobq, b"q\xff", b"rows_record", b"{}", None, true).await;
        let info = jobq.job(id).await.expect("job").expect("exists");
        assert_eq!(info.queue, "q\u{FFFD}");
    }
}

// ---------------------------------------------------------------- finding 9

async fn a_nul_in_a_queue_name_key_or_job_name_is_refused_up_front(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("nul");
    let nul_queue = format!("{queue}\0");

    let error = invalid(jobq.enqueue_with(Record::new(1), on(&nul_queue)).await);
    assert!(error.contains("NUL"), "{error}");
    let error = invalid(
        jobq.enqueue_with(Record::new(1), on(&queue).idempotency_key("k\0"))
            .await,
    );
    assert!(
        error.contains("idempotency key") && error.contains("NUL"),
        "{error}"
    );
    let error = invalid(jobq.enqueue_with(NulName, on(&queue)).await);
    assert!(
        error.contains("job name") && error.contains("NUL"),
        "{error}"
    );

    // A batch whose last key has a NUL: refused whole, before anything is written.
    let tag = rand::random::<u32>();
    let batch = (0..1001).map(|i| {
        let key = if i == 1000 {
            format!("nul-{tag:08x}-\0")
        } else {
            format!("nul-{tag:08x}-{i}")
        };
        (Record::new(i), on(&queue).idempotency_key(key))
    });
    let error = invalid(jobq.enqueue_many_with(batch).await);
    assert!(error.contains("NUL"), "{error}");
    assert_eq!(
        rows_of(&jobq, &queue).await,
        0,
        "nothing of the batch stored"
    );

    let built = Worker::builder(jobq.clone())
        .queue_unchecked(nul_queue, 1)
        .build();
    match built {
        Err(Error::Config(message)) => assert!(message.to_string().contains("NUL"), "{message}"),
        Err(other) => panic!("expected Error::Config, got {other:?}"),
        Ok(_) => panic!("a worker serving a queue name with a NUL was built"),
    }

    // The handle still works.
    let handle = worker(&jobq, &queue).build().unwrap().start();
    all_done(&jobq, &good_jobs(&jobq, &queue, 1).await).await;
    stop(handle).await;
}

/// A trigger that refuses the row `{"n":1000}` of one queue, dropped when
/// the test ends (even on failure).
struct Refuser {
    db: Db,
    name: String,
}

impl Refuser {
    async fn create(jobq: &Jobq, queue: &str) -> Self {
        let db = Db::of(jobq);
        let name = format!("jobq_test_refuse_{:08x}", rand::random::<u32>());
        let refused = r#"{"n":1000}"#;
        let sql = match &db {
            Db::Sqlite(_) => format!(
                "CREATE TRIGGER {name} BEFORE INSERT ON jobq_jobs \
                 WHEN NEW.queue = '{queue}' AND NEW.payload = '{refused}' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END"
            ),
            Db::Postgres(_) => format!(
                "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF NEW.payload = '{refused}' THEN RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$; \
                 CREATE TRIGGER {name} BEFORE INSERT ON jobq_jobs FOR EACH ROW \
                 WHEN (NEW.queue = '{queue}') EXECUTE FUNCTION {name}()"
            ),
            Db::MySql(_) => format!(
                "CREATE TRIGGER {name} BEFORE INSERT ON jobq_jobs FOR EACH ROW \
                 BEGIN IF NEW.queue = '{queue}' AND NEW.payload = '{refused}' THEN \
                 SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test trigger'; \
                 END IF; END"
            ),
        };
        ddl(&db, &sql).await;
        Self { db, name }
    }

    async fn drop_it(self) {
        let name = &self.name;
        let sql = match &self.db {
            Db::Postgres(_) => format!(
                "DROP TRIGGER IF EXISTS {name} ON jobq_jobs; DROP FUNCTION IF EXISTS {name}()"
            ),
            Db::Sqlite(_) | Db::MySql(_) => format!("DROP TRIGGER IF EXISTS {name}"),
        };
        ddl(&self.db, &sql).await;
    }
}

/// Runs DDL on the shared table, waiting at most 1 s per try for the
/// table's lock (a DDL waiting for it holds up every other session's
/// statements on the table behind it), up to 30 tries.
async fn ddl(db: &Db, sql: &str) {
    let mut tries = 0;
    loop {
        tries += 1;
        let result = match db {
            Db::Sqlite(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
            Db::Postgres(pool) => {
                async {
                    let mut tx = pool.begin().await?;
                    sqlx::raw_sql("SET LOCAL lock_timeout = '1s'")
                        .execute(&mut *tx)
                        .await?;
                    sqlx::raw_sql(sql).execute(&mut *tx).await?;
                    tx.commit().await
                }
                .await
            }
            Db::MySql(pool) => {
                async {
                    let mut conn = pool.acquire().await?;
                    sqlx::raw_sql("SET SESSION lock_wait_timeout = 1")
                        .execute(&mut *conn)
                        .await?;
                    let result = sqlx::raw_sql(sql).execute(&mut *conn).await.map(drop);
                    // Its session setting goes with it, not back to the pool.
                    conn.detach();
                    result
                }
                .await
            }
        };
        match result {
            Ok(()) => return,
            Err(error) if tries < 30 => {
                eprintln!("test DDL waits for the table ({error}); trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("test DDL failed 30 times: {error}: {sql}"),
        }
    }
}

/// 1,001 rows (more than one statement or chunk on every backend), the last
/// refused by a trigger: nothing of the batch is stored, with keys and without.
async fn a_batch_is_stored_whole_or_not_at_all(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("whole");
    let refuser = Refuser::create(&jobq, &queue).await;
    let body = {
        let (jobq, queue) = (jobq.clone(), queue.clone());
        tokio::spawn(async move {
            let tag = rand::random::<u32>();
            for keyed in [false, true] {
                let batch = (0..=1000).map(|i| {
                    let options = on(&queue);
                    let options = if keyed {
                        options.idempotency_key(format!("whole-{tag:08x}-{i}"))
                    } else {
                        options
                    };
                    (Record::new(i), options)
                });
                let result = jobq.enqueue_many_with(batch).await;
                assert!(
                    matches!(result, Err(Error::Database(_))),
                    "keyed {keyed}: {result:?}"
                );
                assert_eq!(
                    rows_of(&jobq, &queue).await,
                    0,
                    "keyed {keyed}: part of a refused batch was stored"
                );
            }
            // Without the refused row, the same batch is stored whole.
            let stored = jobq
                .enqueue_many_with((0..1000).map(|i| (Record::new(i), on(&queue))))
                .await
                .expect("a batch without the refused row");
            assert_eq!(stored.len(), 1000);
            assert_eq!(rows_of(&jobq, &queue).await, 1000);
        })
    };
    let outcome = body.await;
    refuser.drop_it().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic.into_panic());
    }
}

// ---------------------------------------------------------------- finding 8

/// A delay past the database's range (a snooze of `Duration::MAX`, a retry in
/// ten thousand years, a retry policy of a million centuries) is clamped to
/// `MAX_DELAY` and said so in `last_error`; a snooze still uses no attempt.
/// A lease extended by `Duration::MAX` is clamped the same way.
async fn a_delay_beyond_the_range_is_clamped_to_the_limit_and_noted(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "far").await;
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 4)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(50))
        .lease(Duration::from_secs(2))
        .build()
        .unwrap()
        .start();
    let mut ids = HashMap::new();
    for how in ["snooze", "retry_in", "policy", "lease"] {
        let id = jobq
            .enqueue_with(Far::new(how.to_owned()), on(&queue))
            .await
            .unwrap()
            .id;
        ids.insert(how, id);
    }
    let done = wait_for_status(&jobq, ids["lease"], JobStatus::Done, LONG).await;
    assert_eq!(done.attempts, 1, "{done:?}");
    let limit = chrono::Duration::from_std(MAX_DELAY).unwrap();
    for how in ["snooze", "retry_in", "policy"] {
        let id = ids[how];
        wait_until(&format!("the {how} job is pending again"), LONG, || async {
            let info = jobq.job(id).await.unwrap().unwrap();
            info.status == JobStatus::Pending && !recorder.runs(id).is_empty()
        })
        .await;
        let info = jobq.job(id).await.unwrap().unwrap();
        let ahead = info.run_at - chrono::Utc::now();
        assert!(
            ahead > limit - chrono::Duration::days(2) && ahead <= limit,
            "{how}: runs {ahead} from now: {info:?}"
        );
        let error = info.last_error.clone().unwrap_or_default();
        assert!(error.contains("clamped to 100 years"), "{how}: {error}");
        let expected_attempts = if how == "snooze" { 0 } else { 1 };
        assert_eq!(info.attempts, expected_attempts, "{how}: {info:?}");
    }
    // Nothing was run twice (no settle failed and was reaped).
    for (how, id) in &ids {
        assert_eq!(recorder.runs(*id).len(), 1, "{how}");
    }
    stop(handle).await;
}

// ---------------------------------------------------------------- the class

/// Characters a row's text may hold, weighted toward the awkward ones.
const CHARS: &[char] = &[
    'a',
    'Z',
    '0',
    ' ',
    '\0',
    '\u{1}',
    '\t',
    '\n',
    '\'',
    '"',
    '\\',
    '%',
    '_',
    '?',
    '$',
    'é',
    'ß',
    '\u{FFFD}',
    '\u{200B}',
    '😀',
    '\u{10FFFF}',
    '\u{7F}',
    '\u{80}',
    '\u{FEFF}',
];

fn random_text(rng: &mut StdRng) -> String {
    let len = match rng.random_range(0..10) {
        0 => 0,
        1 => rng.random_range(120..300),
        _ => rng.random_range(1..12),
    };
    (0..len)
        .map(|_| {
            if rng.random_bool(0.2) {
                char::from_u32(rng.random_range(0..0x11_0000)).unwrap_or('x')
            } else {
                CHARS[rng.random_range(0..CHARS.len())]
            }
        })
        .collect()
}

fn random_bytes(rng: &mut StdRng) -> Vec<u8> {
    if rng.random_bool(0.3) {
        return random_text(rng).into_bytes();
    }
    let len = rng.random_range(0..40);
    (0..len).map(|_| rng.random::<u8>()).collect()
}

/// Whether the rule every backend shares accepts `queue`.
fn queue_ok(queue: &str) -> bool {
    !queue.is_empty() && queue.len() <= jobq_runtime::MAX_QUEUE_LEN && !queue.contains('\0')
}

fn key_ok(key: &str) -> bool {
    let n = key.chars().count();
    (1..=jobq_runtime::MAX_KEY_LEN).contains(&n) && !key.contains('\0')
}

/// Random values through the public API and random bytes through raw
/// INSERT, next to good jobs: each value is stored exactly or refused with
/// `Error::Invalid` by the shared rule; each raw row ends `done` or `failed`
/// (with a `last_error`) or is refused by the database; every good job runs.
async fn random_values_and_raw_bytes_never_stall_a_queue(db: TestDb) {
    let cases: usize = std::env::var("JOBQ_BAD_ROW_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("JOBQ_BAD_ROW_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{}: {cases} cases, JOBQ_BAD_ROW_SEED={seed}", db.backend());
    let mut rng = StdRng::seed_from_u64(seed);
    let jobq = db.jobq().await;
    let queue = unique_queue("class");
    let tag = format!("{queue}:");
    let seen = Seen::default();
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 8)
        .state(Recorder::default())
        .state(seen.clone())
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap()
        .start();
    let raw = Db::of(&jobq);
    let (mut payloads, mut keyed, mut raw_rows, mut refused_raw) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    let (mut refused, mut queues_checked) = (0, 0);
    for case in 0..cases {
        let value = random_text(&mut rng);
        let context = format!("case {case} (seed {seed}): {value:?}");
        match case % 4 {
            // Any string as a payload: stored as JSON, handed back exactly.
            0 => {
                let id = jobq
                    .enqueue_with(Blob::new(value.clone()), on(&queue))
                    .await
                    .unwrap_or_else(|e| panic!("{context}: {e}"))
                    .id;
                payloads.push((id, value));
            }
            // Any string as a key.
            1 => {
                let key = format!("{tag}{case}:{value}");
                match jobq
                    .enqueue_with(Record::new(1), on(&queue).idempotency_key(key.clone()))
                    .await
                {
                    Ok(e) => {
                        assert!(key_ok(&key), "{context}: accepted");
                        keyed.push((e.id, key));
                    }
                    Err(Error::Invalid(message)) => {
                        assert!(!key_ok(&key), "{context}: refused: {message}");
                        refused += 1;
                    }
                    Err(other) => panic!("{context}: not a clear error: {other:?}"),
                }
            }
            // Any string as a queue name: enqueue and build() agree.
            2 => {
                let name = format!("{tag}{value}");
                let built = Worker::builder(jobq.clone())
                    .queue_unchecked(name.clone(), 1)
                    .build()
                    .is_ok();
                match jobq.enqueue_with(Record::new(1), on(&name)).await {
                    Ok(e) => {
                        assert!(queue_ok(&name) && built, "{context}: accepted");
                        let info = jobq.job(e.id).await.unwrap().unwrap();
                        assert_eq!(info.queue, name, "{context}");
                        jobq.cancel(e.id).await.unwrap();
                    }
                    Err(Error::Invalid(message)) => {
                        assert!(!queue_ok(&name) && !built, "{context}: refused: {message}");
                        refused += 1;
                    }
                    Err(other) => panic!("{context}: not a clear error: {other:?}"),
                }
                queues_checked += 1;
            }
            // Any bytes in a raw row's job name, payload and key.
            _ => {
                let name = if rng.random_bool(0.5) {
                    b"rows_blob".to_vec()
                } else {
                    random_bytes(&mut rng)
                };
                let payload = random_bytes(&mut rng);
                let key = rng.random_bool(0.3).then(|| {
                    let mut key = format!("{tag}{case}:").into_bytes();
                    key.extend(random_bytes(&mut rng));
                    key
                });
                let inserted = match &raw {
                    Db::Sqlite(_) => Some(
                        insert_sqlite_bytes(
                            &jobq,
                            queue.as_bytes(),
                            &name,
                            &payload,
                            key.as_deref(),
                            rng.random_bool(0.5),
                        )
                        .await,
                    ),
                    // Text columns: the bytes as (lossy) text, as a client sends them.
                    db => {
                        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                        let sql = db.pick(
                            "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) \
                             VALUES (?, ?, ?, 0, UTC_TIMESTAMP(6), 1, ?, UTC_TIMESTAMP(6))",
                            "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) \
                             VALUES (?, ?, ?, 0, now(), 1, ?, now())",
                            "",
                        );
                        let args = [
                            Arg::from(queue.as_str()),
                            Arg::Text(text(&name)),
                            Arg::Text(text(&payload)),
                            key.as_deref().map_or(Arg::Null, |k| Arg::Text(text(k))),
                        ];
                        match db.execute(sql, &args).await {
                            Ok(_) => {
                                let (id,): (i64,) = db
                                    .fetch_all::<(i64,)>(
                                        "SELECT MAX(id) FROM jobq_jobs WHERE queue = ?",
                                        &[queue.as_str().into()],
                                    )
                                    .await
                                    .unwrap()[0];
                                Some(id)
                            }
                            Err(_) => None,
                        }
                    }
                };
                match inserted {
                    Some(id) => raw_rows.push((id, context)),
                    None => refused_raw += 1,
                }
            }
        }
    }
    let good = good_jobs(&jobq, &queue, 20).await;
    all_done(&jobq, &good).await;
    for (id, value) in &payloads {
        wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
        assert_eq!(seen.get(*id).as_ref(), Some(value), "payload of job {id}");
    }
    for (id, key) in &keyed {
        let info = wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
        assert_eq!(info.idempotency_key.as_ref(), Some(key));
    }
    for (id, context) in &raw_rows {
        wait_until(&format!("{context}: the raw row ends"), LONG, || async {
            let info = jobq.job(*id).await.expect("inspectable").unwrap();
            match info.status {
                JobStatus::Done => true,
                JobStatus::Failed => info.last_error.is_some_and(|e| !e.is_empty()),
                _ => false,
            }
        })
        .await;
    }
    stop(handle).await;
    eprintln!(
        "{}: {} payloads and {} keys stored exactly, {refused} values refused by the shared rule, \
         {queues_checked} queue names checked, {} raw rows settled, {refused_raw} raw rows refused by the database",
        db.backend(),
        payloads.len(),
        keyed.len(),
        raw_rows.len(),
    );
}

// ---------------------------------------------------------------- finding 10

#[tokio::test]
async fn an_unsupported_url_is_shown_without_its_password() {
    let cases = [
        (
            "postgress://admin:S3cret@db.example/app",
            "S3cret",
            "postgress://admin:***@db.example/app",
        ),
        (
            "mysq://app:S3cret@db:3306/app?ssl-mode=required",
            "S3cret",
            "mysq://app:***@db:3306/app?ssl-mode=required",
        ),
        ("redis://:S3cret@cache/0", "S3cret", "redis://:***@cache/0"),
        (
            "postgress://admin@db/app?password=S3cret&x=1",
            "S3cret",
            "postgress://admin@db/app?password=***&x=1",
        ),
        ("pg://u:Pa/ss?wo@rd@db/app", "ss?wo", "pg://u:***@db/app"),
    ];
    for (url, secret, shown) in cases {
        let error = Jobq::connect(url).await.expect_err("unsupported");
        assert!(matches!(error, Error::UnsupportedUrl(_)), "{error:?}");
        let text = format!("{error} / {error:?}");
        assert!(!text.contains(secret), "{url}: {text}");
        assert!(text.contains(shown), "{url}: {text}");
    }
}

jobq_tests::on_every_backend!(
    an_unreadable_row_fails_on_its_own_and_stays_inspectable,
    a_nul_in_a_queue_name_key_or_job_name_is_refused_up_front,
    a_batch_is_stored_whole_or_not_at_all,
    a_delay_beyond_the_range_is_clamped_to_the_limit_and_noted,
    random_values_and_raw_bytes_never_stall_a_queue,
);
