//! `jobq_runtime::testing`: the helpers an application tests its own jobs
//! with, used as an application would (`#[job]` fns, a `TestJobq`), on
//! every backend: SQLite in memory, and a database of each test's own on
//! MariaDB and PostgreSQL (`TestJobq::isolated`, on the servers of
//! `JOBQ_MYSQL_URL` and `JOBQ_POSTGRES_URL`).

use std::sync::Mutex;
use std::time::Duration;

use jobq_runtime::testing::{Drain, Ended, TestJobq, perform};
use jobq_runtime::{Enqueue, JobContext, JobError, JobMeta, JobStatus, State, States, job};

/// A `TestJobq` on each backend: SQLite in memory, and a database of its
/// own on the MariaDB and PostgreSQL servers the environment names (under
/// `CI=true` both must be named; elsewhere a missing one is skipped, said
/// on stderr).
async fn every_backend() -> Vec<(&'static str, TestJobq)> {
    let mut all = vec![("sqlite", TestJobq::new().await.unwrap())];
    for (backend, url) in servers() {
        all.push((backend, TestJobq::isolated(&url).await.unwrap()));
    }
    all
}

/// The URLs of the MariaDB and PostgreSQL servers the environment names
/// (under `CI=true` both must be named).
fn servers() -> Vec<(&'static str, String)> {
    let mut all = Vec::new();
    for (backend, var) in [
        ("mariadb", "JOBQ_MYSQL_URL"),
        ("postgres", "JOBQ_POSTGRES_URL"),
    ] {
        match std::env::var(var) {
            Ok(url) => all.push((backend, url)),
            Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("{var} is not set: under CI=true every backend runs")
            }
            Err(_) => eprintln!("{var} is not set: {backend} skipped"),
        }
    }
    all
}

/// What the handlers saw: `(job, attempt)` per run.
#[derive(Debug, Default)]
struct Runs(Mutex<Vec<(u64, u32)>>);

impl Runs {
    fn record(&self, n: u64, attempt: u32) {
        self.0.lock().unwrap().push((n, attempt));
    }

    fn seen(&self) -> Vec<(u64, u32)> {
        self.0.lock().unwrap().clone()
    }
}

/// Succeeds for an even `n`; fails for good for `n == 1`; otherwise fails
/// its first attempt and asks to run again at once.
#[job(queue = "outcomes", max_attempts = 3)]
async fn outcome(ctx: JobContext, runs: State<Runs>, n: u64) -> Result<(), JobError> {
    runs.record(n, ctx.attempt());
    match n {
        1 => Err(JobError::permanent(format!("job {n} cannot work"))),
        n if n % 2 == 0 => Ok(()),
        _ if ctx.attempt() == 1 => Err(JobError::retry_in(Duration::ZERO, "flaky")),
        _ => Ok(()),
    }
}

#[tokio::test]
async fn drain_runs_due_jobs_through_a_worker_and_reports_every_attempt() {
    for (backend, jobq) in every_backend().await {
        eprintln!("on {backend}");
        let jobq = jobq.state(Runs::default());
        let ok = jobq.enqueue(Outcome::new(2)).await.unwrap().id;
        let failed = jobq.enqueue(Outcome::new(1)).await.unwrap().id;
        let retried = jobq.enqueue(Outcome::new(3)).await.unwrap().id;

        let drained = jobq.drain("outcomes").await.unwrap();

        let ended: Vec<(i64, u32, Ended)> = drained
            .attempts
            .iter()
            .map(|a| (a.id, a.attempt, a.ended.clone()))
            .collect();
        assert_eq!(
            ended,
            vec![
                (ok, 1, Ended::Succeeded),
                (
                    failed,
                    1,
                    Ended::Failed(JobError::permanent("job 1 cannot work"))
                ),
                (
                    retried,
                    1,
                    Ended::Retried(JobError::retry_in(Duration::ZERO, "flaky"), Duration::ZERO)
                ),
                (retried, 2, Ended::Succeeded),
            ],
            "one at a time, in claim order; the retry due at once ran in the same drain"
        );
        assert_eq!(drained.succeeded(), 2);
        assert_eq!(drained.failed().count(), 1);
        assert_eq!(drained.retried().count(), 1);
        assert_eq!(drained.of(retried).count(), 2);
        assert_eq!(drained.attempts[0].job_name, "outcome");
        // The rows were settled as a worker settles them.
        let status = |id| {
            let jobq = jobq.clone();
            async move { jobq.job(id).await.unwrap().unwrap() }
        };
        assert_eq!(status(ok).await.status, JobStatus::Done);
        let row = status(failed).await;
        assert_eq!(row.status, JobStatus::Failed);
        assert_eq!(row.last_error.as_deref(), Some("job 1 cannot work"));
        assert_eq!(status(retried).await.attempts, 2);
        // A second drain finds nothing to do.
        assert!(jobq.drain("outcomes").await.unwrap().attempts.is_empty());
    }
}

/// Fails every attempt, to run again in an hour.
#[job(queue = "later", max_attempts = 2, retry = ["1h"])]
async fn always_fails(id: u64) -> Result<(), String> {
    Err(format!("no luck for {id}"))
}

#[tokio::test]
async fn a_retry_waits_its_delay_unless_the_drain_runs_scheduled_jobs() {
    for (backend, jobq) in every_backend().await {
        eprintln!("on {backend}");
        let jobq = jobq;
        let id = jobq.enqueue(AlwaysFails::new(5)).await.unwrap().id;

        let first = jobq.drain("later").await.unwrap();
        assert_eq!(first.attempts.len(), 1);
        match &first.attempts[0].ended {
            Ended::Retried(error, delay) => {
                assert_eq!(error.message(), "no luck for 5");
                assert!(*delay > Duration::from_secs(60), "{delay:?}");
            }
            other => panic!("expected a retry, got {other}"),
        }
        assert_eq!(
            jobq.job(id).await.unwrap().unwrap().status,
            JobStatus::Pending
        );

        let second = jobq
            .drain_with("later", Drain::new().with_scheduled())
            .await
            .unwrap();
        assert_eq!(second.attempts.len(), 1);
        assert_eq!(second.attempts[0].attempt, 2);
        assert_eq!(
            second.failed().next().map(|a| a.ended.to_string()),
            Some("failed: no luck for 5".to_owned()),
            "the last attempt fails the job"
        );
        let row = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(row.status, JobStatus::Failed);
        assert_eq!(
            row.last_error.as_deref(),
            Some("no luck for 5 (attempt 2 of 2: attempts exhausted)")
        );
    }
}

/// Sends the welcome mail.
#[job(queue = "mail", key = "welcome:{user_id}")]
async fn send_welcome(user_id: u64, locale: String) {
    let _ = (user_id, locale);
}

#[tokio::test]
async fn a_delayed_job_runs_only_when_the_drain_runs_scheduled_jobs() {
    for (backend, jobq) in every_backend().await {
        eprintln!("on {backend}");
        let jobq = jobq;
        let later = Enqueue::new().delay(Duration::from_secs(3600));
        jobq.enqueue_with(SendWelcome::new(1, "en".into()), later)
            .await
            .unwrap();

        assert!(jobq.drain("mail").await.unwrap().attempts.is_empty());
        assert_eq!(jobq.enqueued::<SendWelcome>().await.unwrap().len(), 1);

        let drained = jobq
            .drain_with("mail", Drain::new().with_scheduled())
            .await
            .unwrap();
        assert_eq!(drained.succeeded(), 1);
        assert!(jobq.enqueued::<SendWelcome>().await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn enqueued_jobs_are_typed_and_scoped_to_a_queue() {
    for (backend, jobq) in every_backend().await {
        eprintln!("on {backend}");
        let jobq = jobq;
        jobq.enqueue(SendWelcome::new(42, "en".into()))
            .await
            .unwrap();
        jobq.enqueue(SendWelcome::new(7, "fr".into()))
            .await
            .unwrap();
        jobq.enqueue_with(
            SendWelcome::new(9, "de".into()),
            Enqueue::new().queue("mail-bulk"),
        )
        .await
        .unwrap();

        let mail: Vec<(u64, String)> = jobq
            .enqueued::<SendWelcome>()
            .await
            .unwrap()
            .into_iter()
            .map(|j| (j.user_id, j.locale))
            .collect();
        assert_eq!(mail, [(42, "en".to_owned()), (7, "fr".to_owned())]);
        let bulk = jobq.enqueued_on::<SendWelcome>("mail-bulk").await.unwrap();
        assert_eq!(bulk.len(), 1);
        assert_eq!(bulk[0].user_id, 9);

        jobq.assert_enqueued::<SendWelcome>(|j| j.user_id == 42)
            .await;
        jobq.assert_enqueued_on::<SendWelcome>("mail-bulk", |j| j.locale == "de")
            .await;
    }
}

#[tokio::test]
async fn assert_enqueued_fails_listing_what_was_enqueued() {
    for (backend, jobq) in every_backend().await {
        eprintln!("on {backend}");
        let jobq = jobq;
        jobq.enqueue(SendWelcome::new(7, "fr".into()))
            .await
            .unwrap();
        let asserting = jobq.clone();
        let panicked = tokio::spawn(async move {
            asserting
                .assert_enqueued::<SendWelcome>(|j| j.user_id == 42)
                .await;
        })
        .await
        .unwrap_err()
        .into_panic();
        let message = panicked.downcast_ref::<String>().unwrap();
        assert!(
            message.starts_with(
                "no pending `send_welcome` job on queue `mail` matches; pending there: ["
            ),
            "{message}"
        );
        assert!(message.contains("user_id: 7"), "{message}");
    }
}

#[tokio::test]
async fn each_test_jobq_is_a_database_of_its_own() {
    let one = TestJobq::new().await.unwrap();
    let other = TestJobq::new().await.unwrap();
    one.enqueue(SendWelcome::new(1, "en".into())).await.unwrap();
    assert_eq!(one.enqueued::<SendWelcome>().await.unwrap().len(), 1);
    assert!(other.enqueued::<SendWelcome>().await.unwrap().is_empty());
    for (backend, url) in servers() {
        eprintln!("on {backend}");
        let one = TestJobq::isolated(&url).await.unwrap();
        let other = TestJobq::isolated(&url).await.unwrap();
        assert_ne!(one.url(), other.url());
        one.enqueue(SendWelcome::new(1, "en".into())).await.unwrap();
        assert_eq!(one.enqueued::<SendWelcome>().await.unwrap().len(), 1);
        assert!(other.enqueued::<SendWelcome>().await.unwrap().is_empty());
    }
}

/// Whether database `name` exists on the server of `url`.
async fn exists(backend: &str, url: &str, name: &str) -> bool {
    use jobq_runtime::sqlx::{self, Connection};
    if backend == "mariadb" {
        let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?",
        )
        .bind(name)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        n == 1
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        n == 1
    }
}

/// The application's code under test: stores a user and enqueues its
/// welcome mail in one transaction, committed or not.
#[tokio::test]
async fn an_isolated_database_holds_the_applications_tables_and_goes_with_the_last_clone() {
    use jobq_runtime::sqlx;
    for (backend, server) in servers() {
        eprintln!("on {backend}");
        let jobq = TestJobq::isolated(&server).await.unwrap();
        let url = jobq.url().unwrap().to_owned();
        let name = url.rsplit('/').next().unwrap().to_owned();
        assert!(exists(backend, &server, &name).await);
        let create = "CREATE TABLE users (id BIGINT PRIMARY KEY, email VARCHAR(100) NOT NULL)";
        if backend == "mariadb" {
            let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
            sqlx::query(create).execute(&pool).await.unwrap();
            for (id, commit) in [(1_u64, true), (2, false)] {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query("INSERT INTO users (id, email) VALUES (?, ?)")
                    .bind(id)
                    .bind(format!("user{id}@example.com"))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                jobq.enqueue_in(&mut *tx, SendWelcome::new(id, "en".into()))
                    .await
                    .unwrap();
                if commit {
                    tx.commit().await.unwrap();
                } else {
                    tx.rollback().await.unwrap();
                }
            }
            pool.close().await;
        } else {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            sqlx::query(create).execute(&pool).await.unwrap();
            for (id, commit) in [(1_i64, true), (2, false)] {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query("INSERT INTO users (id, email) VALUES ($1, $2)")
                    .bind(id)
                    .bind(format!("user{id}@example.com"))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                jobq.enqueue_in(&mut *tx, SendWelcome::new(id as u64, "en".into()))
                    .await
                    .unwrap();
                if commit {
                    tx.commit().await.unwrap();
                } else {
                    tx.rollback().await.unwrap();
                }
            }
            pool.close().await;
        }
        let users: Vec<u64> = jobq
            .enqueued::<SendWelcome>()
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.user_id)
            .collect();
        assert_eq!(users, [1], "the rolled-back sign-up enqueued nothing");
        assert_eq!(jobq.drain("mail").await.unwrap().succeeded(), 1);

        let clone = jobq.clone();
        drop(jobq);
        assert!(exists(backend, &server, &name).await, "a clone keeps it");
        drop(clone);
        assert!(
            !exists(backend, &server, &name).await,
            "dropped with the last clone"
        );
    }
}

/// Asks to run again in a second, forever.
#[job(queue = "snoozing")]
async fn snoozer() -> Result<(), JobError> {
    Err(JobError::snooze(Duration::from_secs(1)))
}

#[tokio::test]
async fn a_drain_that_does_not_end_in_time_panics_saying_what_is_left() {
    for (backend, jobq) in every_backend().await {
        eprintln!("on {backend}");
        let jobq = jobq;
        jobq.enqueue(Snoozer::new()).await.unwrap();
        let draining = jobq.clone();
        let panicked = tokio::spawn(async move {
            let options = Drain::new()
                .with_scheduled()
                .timeout(Duration::from_millis(300));
            let result = draining.drain_with("snoozing", options).await;
            panic!("the drain returned: {result:?}");
        })
        .await
        .unwrap_err()
        .into_panic();
        let message = panicked.downcast_ref::<String>().unwrap();
        assert!(
            message.starts_with("queue `snoozing` was not drained within 300ms: "),
            "{message}"
        );
    }
}

#[tokio::test]
async fn perform_runs_one_job_inline_with_its_context_and_states() {
    let mut states = States::default();
    states.insert(Runs::default());
    let mut meta = JobMeta::new(11, "outcome", "outcomes");
    meta.attempt = 1;
    meta.max_attempts = 3;
    let result = perform(Outcome::new(3), JobContext::detached(meta.clone()), &states).await;
    assert_eq!(
        result,
        Err(JobError::retry_in(Duration::ZERO, "flaky")),
        "attempt 1 of job 3 fails"
    );
    meta.attempt = 2;
    perform(Outcome::new(3), JobContext::detached(meta), &states)
        .await
        .unwrap();
    let runs = states.get::<Runs>().unwrap();
    assert_eq!(runs.seen(), [(3, 1), (3, 2)]);
}

#[tokio::test]
async fn perform_without_a_needed_state_is_an_error_naming_it() {
    let ctx = JobContext::detached(JobMeta::new(1, "outcome", "outcomes"));
    let error = perform(Outcome::new(2), ctx, &States::default())
        .await
        .unwrap_err();
    assert!(
        error.message().starts_with("job `outcome` needs `State<"),
        "{}",
        error.message()
    );
    assert!(error.message().contains("Runs"), "{}", error.message());
}
