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
    let cases: Vec<(String, &str, &str)> = match db.backend() {
        Backend::Sqlite => vec![(
            "sqlite:///jobq-no-such-directory/jobs.db".to_owned(),
            "unable to open database file",
            "",
        )],
        backend => {
            let (scheme, rest) = db.url().split_once("://").unwrap();
            let (userinfo, host_db) = rest.rsplit_once('@').unwrap();
            let user = userinfo.split(':').next().unwrap();
            let wrong = format!("{scheme}://{user}:N0tThePassword@{host_db}");
            let (denied, missing) = match backend {
                Backend::MySql => (
                    "Access denied for user",
                    "Unknown database 'jobq_no_such_database'",
                ),
                _ => (
                    // Trust authentication takes any password: then the
                    // login succeeds and only the missing database fails.
                    "",
                    "database \"jobq_no_such_database\" does not exist",
                ),
            };
            vec![
                (wrong, denied, "N0tThePassword"),
                (
                    with_database(db.url(), "jobq_no_such_database"),
                    missing,
                    "",
                ),
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
        assert!(text.contains(cause), "{text}");
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

jobq_tests::on_every_backend!(
    an_unmigrated_database_says_to_run_migrate,
    a_refused_login_or_a_missing_database_shows_the_servers_cause,
    a_refused_connection_fails_at_once_with_its_cause,
    a_server_that_does_not_answer_fails_after_the_connect_timeout,
);
