//! jobq on a real 3-node MariaDB Galera cluster (`tests/src/galera.rs`, one
//! cluster shared by this binary's tests, each in a database of its own):
//! what changes on a multi-primary engine, each checked where it bites.
//!
//! - `SELECT … FOR UPDATE SKIP LOCKED` locks on the local node only: claims
//!   of one row on two nodes meet at certification, where one COMMIT fails
//!   (1213); jobq retries its own claim and no job runs twice.
//! - `GET_LOCK` is per node: `migrate()` on every node at once must still
//!   leave each migration applied and recorded once.
//! - `auto_increment_increment`/`offset` are per node and
//!   `innodb_autoinc_lock_mode = 2` interleaves concurrent batches: every id
//!   a batch enqueue returns must be the row of its payload.
//! - Other nodes apply a commit a moment later: `job(id)` through one node
//!   right after `enqueue` through another must find the row.
//! - `doctor` reports the cluster, `wsrep_sync_wait` and the lease against
//!   `evs.suspect_timeout`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::join_all;
use jobq_runtime::{CheckStatus, Enqueue, JobContext, JobStatus, Jobq, State, Unique, Worker, job};
use jobq_tests::galera::{self, Cluster};
use jobq_tests::{Concurrency, Recorder, wait_until};
use sqlx::mysql::MySqlDatabaseError;
use sqlx::{Connection, Executor, MySqlConnection};

/// Records its run.
#[job(name = "galera_record")]
async fn record(ctx: JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
}

/// Carries where it was enqueued from, to check the id it was given.
#[job(name = "galera_tagged")]
async fn tagged(node: u64, batch: u64, index: u64) {
    let _ = (node, batch, index);
}

/// The shared cluster, or `None` (skipped) where Galera cannot run.
fn cluster(test: &str) -> Option<&'static Cluster> {
    galera::should_run(test).then(galera::shared)
}

/// A handle on `url`, not migrated.
async fn connect(url: &str) -> Jobq {
    Jobq::connect(url).await.expect("connect to a node")
}

fn node_count() -> u64 {
    galera::shared().len() as u64
}

/// Two transactions on two nodes lock the same pending row (each node
/// knows only its own locks) and update it; the second COMMIT fails
/// certification with 1213, the error jobq's `is_transient` retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_claimed_on_two_nodes_at_once_fails_one_commit_with_1213() {
    let Some(cluster) = cluster("galera two-node claim") else {
        return;
    };
    let db = cluster.database("claim2").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let a_handle = connect(&db.url(0)).await;
    let id = a_handle.enqueue(Record::new(1)).await.unwrap().id;
    let mut a = MySqlConnection::connect(&db.url(0)).await.unwrap();
    let mut b = MySqlConnection::connect(&db.url(1)).await.unwrap();
    wait_until("node 1 has the row", Duration::from_secs(10), || {
        let db = &db;
        async move {
            let mut c = MySqlConnection::connect(&db.url(1)).await.unwrap();
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM jobq_jobs WHERE id = ?")
                .bind(id)
                .fetch_one(&mut c)
                .await
                .unwrap()
                == 1
        }
    })
    .await;
    let lock = "SELECT id FROM jobq_jobs WHERE queue = 'default' AND status = 'pending' ORDER BY priority, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED";
    let take = "UPDATE jobq_jobs SET status = 'processing', lease_token = ? WHERE id = ?";
    for (conn, token) in [(&mut a, 1i64), (&mut b, 2)] {
        conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION")
            .await
            .unwrap();
        let got: Vec<i64> = sqlx::query_scalar(lock)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        assert_eq!(
            got,
            [id],
            "each node locks the row: it knows only its own locks"
        );
        sqlx::query(take)
            .bind(token)
            .bind(id)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    a.execute("COMMIT").await.expect("the first commit wins");
    let error = b
        .execute("COMMIT")
        .await
        .expect_err("the second is aborted");
    let code = error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
        .map(|e| e.number());
    assert_eq!(code, Some(1213), "{error}");
    let token: i64 = sqlx::query_scalar("SELECT lease_token FROM jobq_jobs WHERE id = ?")
        .bind(id)
        .fetch_one(&mut a)
        .await
        .unwrap();
    assert_eq!(token, 1, "the row is the first claim's");
}

/// Workers on every node drain one queue from its head at once: claims
/// meet at certification, jobq retries them, and every job runs once,
/// in one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_on_every_node_run_each_job_once_through_certification_aborts() {
    let Some(cluster) = cluster("galera drain") else {
        return;
    };
    let db = cluster.database("drain").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
    let queue = jobq_tests::unique_queue("galera-drain");
    let jobs = 1_500u64;
    let ids: Vec<i64> = handles[0]
        .enqueue_many_with((0..jobs).map(|n| (Record::new(n), Enqueue::new().queue(&queue))))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let recorder = Recorder::default();
    let retries_before = jobq_runtime::internal_retries();
    let aborts_before =
        cluster.total("wsrep_local_cert_failures") + cluster.total("wsrep_local_bf_aborts");
    let started = Instant::now();
    let workers: Vec<_> = handles
        .iter()
        .map(|h| {
            Worker::builder(h.clone())
                .queue_unchecked(&queue, 4)
                .state(recorder.clone())
                .poll_interval(Duration::from_millis(20))
                .build()
                .unwrap()
                .start()
        })
        .collect();
    wait_until("every job ran", Duration::from_secs(90), || async {
        recorder.totals().0 == jobs as usize
    })
    .await;
    for w in workers {
        jobq_tests::stop(w).await;
    }
    let took = started.elapsed();
    let retries = jobq_runtime::internal_retries() - retries_before;
    let aborts = cluster.total("wsrep_local_cert_failures")
        + cluster.total("wsrep_local_bf_aborts")
        - aborts_before;
    let (distinct, runs) = recorder.totals();
    assert_eq!(
        (distinct, runs),
        (jobs as usize, jobs as usize),
        "repeated: {:?}",
        recorder.repeated()
    );
    let counts = handles[1].counts(&queue).await.unwrap();
    assert_eq!(counts.done, jobs, "{counts:?}");
    let pool = sqlx::MySqlPool::connect(&db.url(2)).await.unwrap();
    let (min, max): (i32, i32) = sqlx::query_as(
        "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT MIN(attempts), MAX(attempts) FROM jobq_jobs WHERE queue = ?",
    )
    .bind(&queue)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((min, max), (1, 1), "an aborted claim counts no attempt");
    assert!(ids.iter().all(|id| recorder.runs(*id).len() == 1));
    eprintln!(
        "galera drain: {jobs} jobs by 3 nodes × 4 slots in {took:.2?} ({:.0} jobs/s); \
         jobq internal retries {retries}; cluster cert failures + BF aborts {aborts}",
        jobs as f64 / took.as_secs_f64()
    );
    assert!(
        aborts > 0 && retries > 0,
        "claims of one queue's head on three nodes met at certification (aborts {aborts}, retries {retries})"
    );
}

/// `GET_LOCK` is per node: `migrate()` started on every node at once, 20
/// rounds on fresh databases (`JOBQ_GALERA_MIGRATE_ROUNDS`), all succeed,
/// and each migration is recorded once, as every node sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrate_on_every_node_at_once_succeeds_everywhere_and_records_each_version_once() {
    let Some(cluster) = cluster("galera migrate") else {
        return;
    };
    let rounds: usize = std::env::var("JOBQ_GALERA_MIGRATE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let retries_before = jobq_runtime::internal_retries();
    for round in 0..rounds {
        let db = cluster.database("migrate").unwrap();
        let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
        let results = join_all(handles.iter().map(|h| h.migrate())).await;
        for (node, result) in results.iter().enumerate() {
            assert!(
                result.is_ok(),
                "round {round}: migrate on node {node}: {result:?}"
            );
        }
        for (node, url) in db.urls().iter().enumerate() {
            let pool = sqlx::MySqlPool::connect(url).await.unwrap();
            let versions: Vec<(i64, i64)> = sqlx::query_as(
                "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT version, COUNT(*) FROM jobq_migrations GROUP BY version ORDER BY version",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            // Every migration of MySQL's, each once.
            let migrations = std::fs::read_dir(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../jobq-runtime/migrations/mysql"
            ))
            .unwrap()
            .count();
            assert_eq!(
                versions.len(),
                migrations,
                "round {round}, node {node}: {versions:?}"
            );
            assert!(versions.iter().all(|(_, n)| *n == 1), "{versions:?}");
            // The schema is whole: a job goes in and out on this node.
            let id = handles[node]
                .enqueue(Tagged::new(node as u64, 0, 0))
                .await
                .unwrap()
                .id;
            assert!(handles[node].job(id).await.unwrap().is_some());
        }
    }
    eprintln!(
        "galera migrate: {rounds} rounds of {} concurrent migrate() all succeeded; jobq internal retries {}",
        node_count(),
        jobq_runtime::internal_retries() - retries_before
    );
}

/// Batches enqueued through every node at once: ids come from each node's
/// own `auto_increment_offset`, interleaved (`innodb_autoinc_lock_mode =
/// 2`); every id returned is the row holding that job's payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_ids_from_every_node_at_once_are_the_rows_of_their_jobs() {
    let Some(cluster) = cluster("galera batch ids") else {
        return;
    };
    let db = cluster.database("ids").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
    let (batches, size) = (20u64, 200u64);
    let per_node = join_all(handles.iter().enumerate().map(|(node, h)| async move {
        let mut out = Vec::new();
        for batch in 0..batches {
            let jobs = (0..size).map(|i| Tagged::new(node as u64, batch, i));
            let ids = h.enqueue_many(jobs).await.unwrap();
            out.extend(
                ids.into_iter()
                    .enumerate()
                    .map(|(i, e)| ((node as u64, batch, i as u64), e.id)),
            );
        }
        out
    }))
    .await;
    let returned: HashMap<(u64, u64, u64), i64> = per_node.into_iter().flatten().collect();
    assert_eq!(returned.len() as u64, node_count() * batches * size);
    let distinct: HashSet<i64> = returned.values().copied().collect();
    assert_eq!(distinct.len(), returned.len(), "ids are distinct");
    let pool = sqlx::MySqlPool::connect(&db.url(0)).await.unwrap();
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT id, CAST(payload AS CHAR) FROM jobq_jobs",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let stored: HashMap<i64, (u64, u64, u64)> = rows
        .into_iter()
        .map(|(id, payload)| {
            let v: serde_json::Value = serde_json::from_str(&payload).unwrap();
            let n = |k: &str| v[k].as_u64().unwrap();
            (id, (n("node"), n("batch"), n("index")))
        })
        .collect();
    let mut gaps = 0;
    for (tag, id) in &returned {
        assert_eq!(stored.get(id), Some(tag), "id {id} returned for {tag:?}");
        if returned
            .get(&(tag.0, tag.1, tag.2 + 1))
            .is_some_and(|next| next - id != 1)
        {
            gaps += 1;
        }
    }
    eprintln!(
        "galera batch ids: {} ids from {} nodes all name their rows; {gaps} neighbours in a batch not 1 apart",
        returned.len(),
        node_count()
    );
}

/// Read-your-writes across nodes: `job(id)` through node B right after
/// `enqueue` through node A finds the row, 2,000 times (without
/// `wsrep_sync_wait` such reads missed 9 and 125 times in 2,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_through_one_node_is_found_at_once_through_another() {
    let Some(cluster) = cluster("galera read-your-writes") else {
        return;
    };
    let db = cluster.database("ryw").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
    let raw = sqlx::MySqlPool::connect(&db.url(1)).await.unwrap();
    let n = handles.len();
    let (mut missed, raw_missed) = (0u64, AtomicU64::new(0));
    let rounds = 2_000;
    for i in 0..rounds {
        let (a, b) = (i % n, (i + 1) % n);
        let id = handles[a]
            .enqueue(Tagged::new(a as u64, 0, i as u64))
            .await
            .unwrap()
            .id;
        if handles[b].job(id).await.unwrap().is_none() {
            missed += 1;
        }
        // The same read without the wait, for the record (not asserted).
        if b == 1 {
            let id2 = handles[a]
                .enqueue(Tagged::new(a as u64, 1, i as u64))
                .await
                .unwrap()
                .id;
            let found: Option<i64> = sqlx::query_scalar("SELECT id FROM jobq_jobs WHERE id = ?")
                .bind(id2)
                .fetch_optional(&raw)
                .await
                .unwrap();
            if found.is_none() {
                raw_missed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    eprintln!(
        "galera read-your-writes: job(id) missed {missed} of {rounds}; a plain read on node 1 missed {} of {}",
        raw_missed.load(Ordering::Relaxed),
        rounds / n
    );
    assert_eq!(missed, 0);
}

/// `doctor` on a node: the cluster is Primary, 3 nodes, Synced; the server
/// default `wsrep_sync_wait` is 0; the default lease (30 s) is well above
/// `evs.suspect_timeout` (5 s), 10 s has little margin, 3 s fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_cluster_sync_wait_and_the_lease_against_suspect_timeout() {
    let Some(cluster) = cluster("galera doctor") else {
        return;
    };
    let db = cluster.database("doctor").unwrap();
    let jobq = connect(&db.url(1)).await;
    jobq.migrate().await.unwrap();
    let report = jobq.doctor().await.unwrap();
    let check = |name: &str| {
        report
            .check(name)
            .unwrap_or_else(|| panic!("no {name} in {report:?}"))
            .clone()
    };
    let cluster_check = check("galera_cluster");
    assert_eq!(cluster_check.status, CheckStatus::Ok, "{cluster_check:?}");
    jobq_tests::assert_contains(
        &cluster_check.found,
        &["Primary", &format!("{} nodes", cluster.len()), "Synced"],
    );
    assert_eq!(check("galera_sync_wait").status, CheckStatus::Ok);
    let binlog = check("binlog_format");
    assert_eq!(binlog.status, CheckStatus::Ok, "{binlog:?}");
    jobq_tests::assert_contains(&binlog.found, &["Galera", "ROW"]);
    let lease = check("galera_lease");
    assert_eq!(lease.status, CheckStatus::Ok, "{lease:?}");
    jobq_tests::assert_contains(&lease.found, &["30s", "5s"]);
    let short = jobq
        .doctor_with_lease(Duration::from_secs(3))
        .await
        .unwrap();
    let short = short.check("galera_lease").unwrap();
    assert_eq!(short.status, CheckStatus::Fail, "{short:?}");
    jobq_tests::assert_contains(short.advice.as_deref().unwrap_or(""), &["15s"]);
    let tight = jobq
        .doctor_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        tight.check("galera_lease").unwrap().status,
        CheckStatus::Warn
    );
    // The same call on a server that is no Galera node has none of these.
    if let Some(local) = jobq_tests::TestDb::mysql() {
        let report = local.jobq().await.doctor().await.unwrap();
        assert!(report.check("galera_cluster").is_none());
    }
}

/// 16 enqueuers of one idempotency key spread over the nodes: the unique
/// key meets at certification (the node that loses retries and then finds
/// the row), so one row exists and exactly one enqueuer inserted it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enqueuers_of_one_key_on_every_node_make_one_job() {
    let Some(cluster) = cluster("galera one key") else {
        return;
    };
    let db = cluster.database("key").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
    for round in 0..10 {
        let key = format!("galera-key-{round}");
        let results = join_all((0..16).map(|i| {
            let jobq = &handles[i % handles.len()];
            let options = Enqueue::new().idempotency_key(key.clone());
            async move {
                jobq.enqueue_with(Tagged::new(0, round, i as u64), options)
                    .await
            }
        }))
        .await;
        let results: Vec<_> = results.into_iter().map(|r| r.expect("enqueue")).collect();
        let ids: HashSet<i64> = results.iter().map(|e| e.id).collect();
        assert_eq!(ids.len(), 1, "round {round}: {results:?}");
        let inserted = results.iter().filter(|e| !e.duplicate).count();
        assert_eq!(inserted, 1, "round {round}: {results:?}");
    }
    let counts = handles[2].counts("default").await.unwrap();
    assert_eq!(counts.total(), 10, "{counts:?}");
}

/// Counts itself running for a few milliseconds.
#[job(name = "galera_limited")]
async fn limited(running: State<Concurrency>, n: u64) {
    let _ = n;
    running.run_for(Duration::from_millis(5)).await;
}

/// A queue limited to 3 drained by workers on all three nodes (4 slots
/// each): slots are rows each limited claim writes, so two nodes taking one
/// slot meet at certification. Handlers running at once (all in this
/// process) never exceed 3, nor do the rows processing as node 0 sees them
/// after every other node's commits (`wsrep_sync_wait`), and every job runs
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_limit_holds_with_workers_on_every_node() {
    let Some(cluster) = cluster("galera limit") else {
        return;
    };
    let db = cluster.database("limit").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
    let queue = jobq_tests::unique_queue("galera-limit");
    handles[1].set_queue_limit(&queue, Some(3)).await.unwrap();
    let jobs = 300u64;
    handles[0]
        .enqueue_many_with((0..jobs).map(|n| (Limited::new(n), Enqueue::new().queue(&queue))))
        .await
        .unwrap();
    let running = Concurrency::default();
    let pool = sqlx::MySqlPool::connect(&db.url(0)).await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (pool, queue, stop) = (pool.clone(), queue.clone(), stop.clone());
        tokio::spawn(async move {
            let mut most = 0i64;
            while !stop.load(Ordering::SeqCst) {
                let (n,): (i64,) = sqlx::query_as(
                    "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT COUNT(*) FROM jobq_jobs \
                     WHERE queue = ? AND status = 'processing' AND run_at > UTC_TIMESTAMP(6)",
                )
                .bind(&queue)
                .fetch_one(&pool)
                .await
                .unwrap();
                most = most.max(n);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            most
        })
    };
    let started = Instant::now();
    let workers: Vec<_> = handles
        .iter()
        .map(|h| {
            Worker::builder(h.clone())
                .queue_unchecked(&queue, 4)
                .state(running.clone())
                .poll_interval(Duration::from_millis(20))
                .build()
                .unwrap()
                .start()
        })
        .collect();
    wait_until("every job ran", Duration::from_secs(120), || async {
        running.ran() == jobs
    })
    .await;
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let in_database = sampler.await.unwrap();
    for w in workers {
        jobq_tests::stop(w).await;
    }
    let most = running.most();
    eprintln!(
        "galera limit: {jobs} jobs under a limit of 3 on 3 nodes in {took:.2?}; at most {most} handlers and {in_database} rows running at once"
    );
    assert_eq!(most, 3, "handlers running at once");
    assert!(in_database <= 3, "{in_database} rows running at once");
    assert_eq!(handles[2].counts(&queue).await.unwrap().done, jobs);
}

/// A queue rate-limited to 20 a second drained by workers on all three
/// nodes (4 slots each): the rate is one row every rate-limited claim
/// writes, so two nodes writing it meet at certification. The starts as
/// node 0 records them after every node's commits (`claimed_at`, each node
/// writing with its own clock — one machine's here) hold no more than 20 in
/// any second and 1 in any 50 ms (+ 1 for the distance between the clock
/// reading of the rate and the one of `claimed_at`); every job runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_rate_holds_with_workers_on_every_node() {
    let Some(cluster) = cluster("galera rate") else {
        return;
    };
    let db = cluster.database("rate").unwrap();
    connect(&db.url(0)).await.migrate().await.unwrap();
    let handles: Vec<Jobq> = join_all(db.urls().iter().map(|u| connect(u))).await;
    let queue = jobq_tests::unique_queue("galera-rate");
    let rate = jobq_runtime::Rate::per(20, Duration::from_secs(1));
    handles[1].set_queue_rate(&queue, Some(rate)).await.unwrap();
    let jobs = 60u64;
    handles[0]
        .enqueue_many_with((0..jobs).map(|n| (Limited::new(n), Enqueue::new().queue(&queue))))
        .await
        .unwrap();
    let running = Concurrency::default();
    let started = Instant::now();
    let workers: Vec<_> = handles
        .iter()
        .map(|h| {
            Worker::builder(h.clone())
                .queue_unchecked(&queue, 4)
                .state(running.clone())
                .poll_interval(Duration::from_millis(100))
                .build()
                .unwrap()
                .start()
        })
        .collect();
    wait_until("every job ran", Duration::from_secs(120), || async {
        running.ran() == jobs
    })
    .await;
    let took = started.elapsed();
    for w in workers {
        jobq_tests::stop(w).await;
    }
    let pool = sqlx::MySqlPool::connect(&db.url(0)).await.unwrap();
    let mut starts: Vec<i64> = sqlx::query_scalar(
        "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT \
         TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', claimed_at) FROM jobq_jobs \
         WHERE queue = ? AND attempts = 1",
    )
    .bind(&queue)
    .fetch_all(&pool)
    .await
    .unwrap();
    starts.sort_unstable();
    let most_in = |window: i64| {
        let mut most = 0;
        let mut from = 0;
        for (to, &at) in starts.iter().enumerate() {
            while at - starts[from] >= window {
                from += 1;
            }
            most = most.max(to - from + 1);
        }
        most
    };
    let (in_second, in_interval) = (most_in(1_000_000), most_in(50_000));
    let span = (starts[starts.len() - 1] - starts[0]) as f64 / 1e6;
    eprintln!(
        "galera rate: {jobs} jobs at {rate} on 3 nodes in {took:.2?}: {:.2}/s; at most {in_second} in any second, {in_interval} in any 50 ms",
        (starts.len() - 1) as f64 / span
    );
    assert_eq!(starts.len() as u64, jobs, "each job started once");
    assert!(in_second <= 21, "{in_second} starts in one second");
    assert!(in_interval <= 2, "{in_interval} starts in one interval");
    assert!(span >= 59.0 * 0.05 * 0.98, "{jobs} starts in {span} s");
}

/// A table of `rows` rows on one node: updating every row is a large
/// commit, which the other nodes apply a moment after it (and apply what
/// comes after it only then): a node held a moment behind the cluster.
struct Filler(MySqlConnection);

impl Filler {
    async fn on(url: &str, rows: u32) -> Self {
        let mut conn = MySqlConnection::connect(url).await.unwrap();
        conn.execute("CREATE TABLE filler (id INT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL)")
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO filler (v) SELECT 0 FROM information_schema.COLUMNS a, \
             information_schema.COLUMNS b LIMIT ?",
        )
        .bind(rows)
        .execute(&mut conn)
        .await
        .unwrap();
        Self(conn)
    }

    /// Commits an update of every row.
    async fn commit_large(&mut self) {
        self.0.execute("UPDATE filler SET v = v + 1").await.unwrap();
    }
}

/// A job unique by its key.
#[job(name = "galera_digest", key = "digest:{n}")]
async fn digest(n: u64) {
    let _ = n;
}

/// A unique enqueue through one node right after another node cancelled
/// the key's holder makes the new job, round after round: the enqueue's
/// transaction begins once its node has applied what the cluster committed
/// before it. MariaDB does not hold a statement inside a transaction for
/// `wsrep_sync_wait`, so a sync wait on the holder's read alone read the
/// node as it was, a moment behind (2 to 30 rounds in 300 answered a
/// duplicate of the cancelled job, and no job was made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_enqueue_through_another_node_right_after_the_holders_cancel_makes_the_job() {
    const ROUNDS: u64 = 50;
    let Some(cluster) = cluster("galera unique after cancel") else {
        return;
    };
    let db = cluster.database("unique_after").unwrap();
    let near = connect(&db.url(0)).await;
    near.migrate().await.unwrap();
    let far = connect(&db.url(1)).await;
    // Node 1 applies other nodes' commits in order: a large one just before
    // the cancel holds the cancel back there for a moment.
    let mut filler = Filler::on(&db.url(0), 20000).await;
    let active = || Enqueue::new().unique(Unique::while_active());
    let mut stale = Vec::new();
    for round in 0..ROUNDS {
        let first = near
            .enqueue_with(Digest::new(round), active())
            .await
            .unwrap();
        assert!(!first.duplicate, "round {round}: {first:?}");
        filler.commit_large().await;
        assert!(near.cancel(first.id).await.unwrap(), "round {round}");
        let next = far
            .enqueue_with(Digest::new(round), active())
            .await
            .unwrap();
        if next.duplicate || next.id == first.id {
            stale.push((round, first.id, next));
        }
    }
    assert!(
        stale.is_empty(),
        "{} of {ROUNDS} enqueues answered a duplicate of the job just cancelled: {stale:?}",
        stale.len()
    );
}

/// The same for a concurrency key (limit 1): a keyed enqueue through one
/// node right after another node cancelled the key's only job starts
/// `pending`, not `blocked` behind the cancelled job (whose cancel released
/// nothing: the new job did not exist then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_enqueue_through_another_node_right_after_the_keys_cancel_is_admitted() {
    const ROUNDS: u64 = 30;
    let Some(cluster) = cluster("galera keyed after cancel") else {
        return;
    };
    let db = cluster.database("keyed_after").unwrap();
    let near = connect(&db.url(0)).await;
    near.migrate().await.unwrap();
    let far = connect(&db.url(1)).await;
    let mut filler = Filler::on(&db.url(0), 20000).await;
    let keyed = |round: u64| Enqueue::new().concurrency_key(format!("key-{round}"), 1);
    let mut blocked = Vec::new();
    for round in 0..ROUNDS {
        let first = near
            .enqueue_with(Tagged::new(0, round, 0), keyed(round))
            .await
            .unwrap();
        filler.commit_large().await;
        assert!(near.cancel(first.id).await.unwrap(), "round {round}");
        let next = far
            .enqueue_with(Tagged::new(1, round, 1), keyed(round))
            .await
            .unwrap();
        let status = far.job(next.id).await.unwrap().expect("the job").status;
        if status != JobStatus::Pending {
            blocked.push((round, status));
        }
    }
    assert!(
        blocked.is_empty(),
        "{} of {ROUNDS} keyed enqueues waited behind the key's cancelled job: {blocked:?}",
        blocked.len()
    );
}

/// Runs long enough to be seen `processing`.
#[job(name = "galera_long")]
async fn long(n: u64) {
    let _ = n;
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// A worker started on a node right after a queue's limit was set through
/// another node — its own node a moment behind (a 200,000-row commit just
/// before the limit's) — claims under the limit from its first claim: the
/// workers read the controls behind a sync wait. Without it the worker read
/// no limit and its first claim took four jobs (2 of 5 rounds; the CI saw 4
/// rows processing under a limit of 3 in
/// `a_queue_limit_holds_with_workers_on_every_node`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_a_node_behind_the_cluster_claims_under_a_limit_set_through_another() {
    const ROUNDS: u64 = 8;
    let Some(cluster) = cluster("galera limit behind") else {
        return;
    };
    let db = cluster.database("limit_behind").unwrap();
    let near = connect(&db.url(0)).await;
    near.migrate().await.unwrap();
    let setter = connect(&db.url(1)).await;
    let far = connect(&db.url(2)).await;
    let mut filler = Filler::on(&db.url(0), 200000).await;
    let pool = sqlx::MySqlPool::connect(&db.url(0)).await.unwrap();
    let processing = |queue: String| {
        let pool = pool.clone();
        async move {
            let (n,): (i64,) = sqlx::query_as(
                "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT COUNT(*) FROM jobq_jobs \
                 WHERE queue = ? AND status = 'processing'",
            )
            .bind(queue)
            .fetch_one(&pool)
            .await
            .unwrap();
            n
        }
    };
    let mut over = Vec::new();
    for round in 0..ROUNDS {
        let queue = jobq_tests::unique_queue("galera-limit-behind");
        near.enqueue_many_with((0..8).map(|n| (Long::new(n), Enqueue::new().queue(&queue))))
            .await
            .unwrap();
        wait_until("node 2 has the jobs", Duration::from_secs(10), || async {
            far.counts(&queue).await.unwrap().pending == 8
        })
        .await;
        filler.commit_large().await;
        setter.set_queue_limit(&queue, Some(1)).await.unwrap();
        let worker = Worker::builder(far.clone())
            .queue_unchecked(&queue, 4)
            .poll_interval(Duration::from_millis(20))
            .build()
            .unwrap()
            .start();
        wait_until("the worker claims", Duration::from_secs(10), || {
            processing(queue.clone()).then(|n| async move { n > 0 })
        })
        .await;
        // A claim's rows turn `processing` together: this is at least its first.
        let seen = processing(queue.clone()).await;
        if seen > 1 {
            over.push((round, seen));
        }
        jobq_tests::stop(worker).await;
    }
    assert!(
        over.is_empty(),
        "a worker claimed past a limit of 1 set through another node (round, rows processing): {over:?}"
    );
}
