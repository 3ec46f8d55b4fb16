//! Errors a person can act on: a database error shows its cause, a database
//! never migrated says to migrate, a connect that cannot succeed fails at
//! once with the reason (or after the connect timeout), and no password is
//! ever printed.

use std::time::{Duration, Instant};

use jobq_runtime::{Backend, ConnectOptions, Error, Jobq, job};
use jobq_tests::scratch::with_database;
use jobq_tests::{TestDb, unique_queue};

#[job(name = "errors_probe")]
async fn probe(n: u64) {
    let _ = n;
}

/// What each backend's server says of the missing table, after the hint.
fn missing_table_cause(backend: Backend, database: &str) -> String {
    match backend {
        Backend::MySql => format!("Table '{database}.jobq_jobs' doesn't exist"),
        Backend::Postgres => "relation \"jobq_jobs\" does not exist".to_owned(),
        _ => "no such table: jobq_jobs".to_owned(),
    }
}

async fn an_unmigrated_database_says_to_run_migrate(db: TestDb) {
    let scratch = db.scratch("jobq_errors_fresh").await;
    let jobq = scratch.jobq(2).await;
    let queue = unique_queue("fresh");
    let hint = "the database has no table `jobq_jobs`: jobq's tables are not created yet; run Jobq::migrate() (or `jobq migrate`) once before using it";

    let enqueued = jobq.enqueue(Probe::new(1)).await;
    let counts = jobq.counts(&queue).await;
    let job = jobq.job(1).await;
    for (call, result) in [
        ("enqueue", enqueued.map(drop)),
        ("counts", counts.map(drop)),
        ("job", job.map(drop)),
    ] {
        let error = result.expect_err(call);
        assert!(
            matches!(&error, Error::NotMigrated { table, .. } if table == "jobq_jobs"),
            "{call}: {error:?}"
        );
        assert_eq!(error.to_string(), hint, "{call}");
        let cause = std::error::Error::source(&error)
            .expect("the server's error")
            .to_string();
        let database = scratch.url().rsplit('/').next().unwrap_or_default();
        assert!(
            cause.contains(&missing_table_cause(db.backend(), database)),
            "{call}: {cause}"
        );
    }

    jobq.migrate().await.unwrap();
    jobq.enqueue(Probe::new(1))
        .await
        .expect("enqueue after migrate");
}

async fn a_refused_login_or_a_missing_database_shows_the_servers_cause(db: TestDb) {
    let cases: Vec<(String, String, &str)> = match db.backend() {
        Backend::Sqlite => vec![(
            "sqlite:///jobq-no-such-directory/jobs.db".to_owned(),
            "unable to open database file".to_owned(),
            "",
        )],
        backend => {
            let (scheme, rest) = db.url().split_once("://").unwrap();
            let (userinfo, host_db) = rest.rsplit_once('@').unwrap();
            let user = userinfo.split(':').next().unwrap();
            let wrong = format!("{scheme}://{user}:N0tThePassword@{host_db}");
            // A name the tests' user may use (see `scoped`): a database
            // it has no privilege on is refused ("Access denied … to
            // database"), not reported missing.
            let missing_db = jobq_tests::scratch::scoped(db.url(), "no_such_database");
            let (denied, missing) = match backend {
                Backend::MySql => (
                    "Access denied for user".to_owned(),
                    format!("Unknown database '{missing_db}'"),
                ),
                _ => (
                    // Trust authentication takes any password: then the
                    // login succeeds and only the missing database fails.
                    String::new(),
                    format!("database \"{missing_db}\" does not exist"),
                ),
            };
            vec![
                (wrong, denied, "N0tThePassword"),
                (with_database(db.url(), &missing_db), missing, ""),
            ]
        }
    };
    for (url, cause, secret) in cases {
        let Err(error) = Jobq::connect(&url).await else {
            assert!(cause.is_empty(), "{url} connected");
            continue;
        };
        assert!(matches!(error, Error::Database(_)), "{error:?}");
        let text = error.to_string();
        assert!(text.starts_with("database error: "), "{text}");
        assert!(text.contains(&cause), "{text}");
        assert!(
            secret.is_empty() || !format!("{text} {error:?}").contains(secret),
            "{text}"
        );
    }
}

async fn a_refused_connection_fails_at_once_with_its_cause(db: TestDb) {
    let url = match db.backend() {
        Backend::MySql => "mysql://app:S3cret@127.0.0.1:1/app",
        Backend::Postgres => "postgres://app:S3cret@127.0.0.1:1/app",
        _ => return,
    };
    let started = Instant::now();
    let error = Jobq::connect(url)
        .await
        .expect_err("nothing listens on port 1");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let text = error.to_string();
    assert_eq!(
        text,
        "database error: error communicating with database: Connection refused (os error 111)"
    );
    assert!(!format!("{error:?}").contains("S3cret"));
}

async fn a_server_that_does_not_answer_fails_after_the_connect_timeout(db: TestDb) {
    let scheme = match db.backend() {
        Backend::MySql => "mysql",
        Backend::Postgres => "postgres",
        _ => return,
    };
    // Accepts connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let url = format!("{scheme}://app:S3cret@127.0.0.1:{port}/app");
    let options = ConnectOptions::new().connect_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let error = Jobq::connect_with_options(&url, options)
        .await
        .expect_err("the server never answers");
    let took = started.elapsed();
    assert!(
        (Duration::from_millis(300)..Duration::from_secs(3)).contains(&took),
        "took {took:?}"
    );
    assert!(matches!(error, Error::ConnectTimeout { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "no connection to {scheme}://app:***@127.0.0.1:{port}/app within 300ms: is the server running, and are the URL's host and port right?"
        )
    );
    silent.abort();
}

/// The hint of [`Error::NotMigrated`] for `table`.
fn not_migrated(table: &str) -> String {
    format!(
        "the database has no table `{table}`: jobq's tables are not created yet; run Jobq::migrate() (or `jobq migrate`) once before using it"
    )
}

/// A worker gets this long to fail; it fails at its first statement (the
/// bound only keeps a worker that idles from hanging the test).
const FAILS_WITHIN: Duration = Duration::from_secs(30);

/// `run_until` on a database never migrated returns the migrate hint at
/// once, and so does `shutdown` of a started worker, whose `failed()`
/// completes; the worker claims nothing. Before the fix, `run_until` idled
/// (logging `reading the paused queues failed (has Jobq::migrate run?)`
/// twice a second) until its signal.
async fn a_worker_on_an_unmigrated_database_fails_at_once_saying_to_run_migrate(db: TestDb) {
    let scratch = db.scratch("jobq_errors_worker").await;
    let jobq = scratch.jobq(2).await;
    let queue = unique_queue("fresh-worker");
    let worker = || {
        jobq_runtime::Worker::builder(jobq.clone())
            .queue_unchecked(&queue, 2)
            .build()
            .expect("build: it reads nothing from the database")
    };

    let start = Instant::now();
    let ran = tokio::time::timeout(FAILS_WITHIN, worker().run_until(std::future::pending())).await;
    let error = ran
        .unwrap_or_else(|_| panic!("run_until still running after {FAILS_WITHIN:?}"))
        .expect_err("run_until on an unmigrated database");
    assert!(matches!(&error, Error::NotMigrated { .. }), "{error:?}");
    assert_eq!(error.to_string(), not_migrated("jobq_migrations"));
    println!("run_until failed after {:?}", start.elapsed());

    let handle = worker().start();
    let failed = tokio::time::timeout(FAILS_WITHIN, handle.failed()).await;
    assert!(failed.is_ok(), "the started worker did not fail");
    let error = handle
        .shutdown(Duration::from_secs(10))
        .await
        .expect_err("shutdown of a worker that failed");
    assert_eq!(error.to_string(), not_migrated("jobq_migrations"));
}

/// A database migrated by an older jobq (one of its migrations not applied):
/// a worker fails at once naming what is missing and what to do.
async fn a_worker_on_a_database_of_an_older_jobq_fails_at_once_naming_the_migrations(db: TestDb) {
    let scratch = db.scratch("jobq_errors_older").await;
    let jobq = scratch.jobq(2).await;
    jobq.migrate().await.unwrap();
    let sql = jobq_tests::sql::Db::of(&jobq);
    // The migration of the list indexes where there is one (MySQL, SQLite),
    // else the newest.
    let picked: Vec<(i64, String)> = sql
        .fetch_all(
            "SELECT version, description FROM jobq_migrations \
             ORDER BY description = 'jobq_jobs_job_name' DESC, version DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    let (version, description) = picked[0].clone();
    sql.execute(
        "DELETE FROM jobq_migrations WHERE version = ?",
        &[version.into()],
    )
    .await
    .unwrap();
    // What that migration made, gone too where it made indexes (an older
    // jobq's table).
    let drops: &[&str] = match db.backend() {
        Backend::MySql => &["ALTER TABLE jobq_jobs DROP INDEX jobq_jobs_job_name"],
        Backend::Sqlite => &["DROP INDEX jobq_jobs_job_name"],
        _ => &[],
    };
    for drop in drops {
        sql.execute(drop, &[]).await.unwrap();
    }
    let by_name = jobq_runtime::JobFilter::new().job_name("errors_probe");
    let listed = jobq.list(&by_name, jobq_runtime::Page::first(10)).await;
    if db.backend() == Backend::MySql {
        // The list names the index it reads through: the same advice.
        let error = listed.expect_err("a list that needs the missing index");
        assert!(
            matches!(&error, Error::MigrationsPending { .. }),
            "{error:?}"
        );
        let advice = |index| {
            format!(
                "the database lacks jobq's index `{index}` (it was migrated by an older jobq, or not fully): run Jobq::migrate() (or `jobq migrate`) of this version before using it"
            )
        };
        let message = error.to_string();
        assert_eq!(message, advice("jobq_jobs_job_name"));
    } else {
        listed.expect("a list without the index reads the table");
    }
    let queue = unique_queue("older-worker");
    let worker = jobq_runtime::Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .build()
        .unwrap();
    let ran = tokio::time::timeout(FAILS_WITHIN, worker.run_until(std::future::pending())).await;
    let error = ran
        .unwrap_or_else(|_| panic!("run_until still running after {FAILS_WITHIN:?}"))
        .expect_err("run_until on a database of an older jobq");
    assert!(
        matches!(&error, Error::MigrationsPending { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the database lacks jobq's migration {version} ({description}) (it was migrated by an older jobq, or not fully): run Jobq::migrate() (or `jobq migrate`) of this version before using it"
        )
    );
    // Migrating again applies it (every migration can run again) and the
    // worker runs.
    jobq.migrate().await.unwrap();
    jobq.list(&by_name, jobq_runtime::Page::first(10))
        .await
        .expect("a list after migrate");
    let worker = jobq_runtime::Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .build()
        .unwrap()
        .start();
    let probe = jobq
        .enqueue_with(Probe::new(2), jobq_runtime::Enqueue::new().queue(&queue))
        .await
        .unwrap();
    jobq_tests::wait_for_status(&jobq, probe.id, jobq_runtime::JobStatus::Done, FAILS_WITHIN).await;
    worker.shutdown(Duration::from_secs(10)).await.unwrap();
}

jobq_tests::on_every_backend!(
    a_worker_on_an_unmigrated_database_fails_at_once_saying_to_run_migrate,
    a_worker_on_a_database_of_an_older_jobq_fails_at_once_naming_the_migrations,
    an_unmigrated_database_says_to_run_migrate,
    a_refused_login_or_a_missing_database_shows_the_servers_cause,
    a_refused_connection_fails_at_once_with_its_cause,
    a_server_that_does_not_answer_fails_after_the_connect_timeout,
);
