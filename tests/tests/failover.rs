//! A connect list (`mysql://user@node1,node2/app`) on MySQL/MariaDB: the
//! pool starts on the first node that is ready, moves to the next when its
//! node is lost mid-drain (nothing lost, nothing run twice), and moves back
//! when the first node is ready again. The "nodes" here are the local
//! server and a TCP forwarder to it that the test kills
//! (`jobq_tests::proxy`); `galera_nodes.rs` does the same with real Galera
//! nodes killed with SIGKILL.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use jobq_runtime::{Error, JobContext, Jobq, State, Worker, job};
use jobq_tests::proxy::Proxy;
use jobq_tests::{Recorder, TestDb, assert_contains, eventually, on, unique_queue, wait_until};

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

/// The server's address, to forward to.
async fn server_addr(url: &str) -> SocketAddr {
    tokio::net::lookup_host(host_of(url))
        .await
        .expect("resolve the server")
        .next()
        .expect("an address")
}

/// A loopback port nothing listens on.
async fn refusing_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("127.0.0.1:{port}")
}

#[job(name = "failover_record")]
async fn record(ctx: &JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
    tokio::time::sleep(Duration::from_millis(2)).await;
}

/// How many jobs of `queue` are done; `None` while the call fails.
async fn done(jobq: &Jobq, queue: &str) -> Option<u64> {
    jobq.counts(queue).await.ok().map(|c| c.done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_list_starts_on_the_first_node_that_takes_a_connection() {
    let Some(db) = TestDb::mysql() else { return };
    db.jobq().await;
    let server = host_of(db.url());
    let dead = refusing_port().await;
    let url = with_hosts(db.url(), &[dead.clone(), server.clone()]);
    let jobq = Jobq::connect(&url)
        .await
        .expect("connect past a dead first node");
    assert_eq!(jobq.current_node().as_deref(), Some(server.as_str()));
    let queue = unique_queue("failover-first");
    let id = jobq
        .enqueue_with(Record::new(1), on(&queue))
        .await
        .expect("enqueue")
        .id;
    assert!(jobq.job(id).await.expect("read").is_some());
    // A URL of one host has no list.
    assert_eq!(db.jobq().await.current_node(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_node_reachable_connect_names_each_and_never_the_password() {
    let Some(db) = TestDb::mysql() else { return };
    let (a, b) = (refusing_port().await, refusing_port().await);
    let url = with_hosts(db.url(), &[a.clone(), b.clone()]);
    let url = match url.split_once("://") {
        // A password of our own, to look for in the message.
        Some((scheme, rest)) => {
            let tail = &rest[rest.rfind('@').map_or(0, |at| at + 1)..];
            format!("{scheme}://jobq:s3cret-pw@{tail}")
        }
        None => unreachable!(),
    };
    let started = Instant::now();
    let error = Jobq::connect(&url).await.expect_err("no node is up");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refusals are reported at once, took {:?}",
        started.elapsed()
    );
    assert!(matches!(error, Error::NoNodeReachable { .. }), "{error:?}");
    let message = error.to_string();
    assert_contains(&message, &[&a, &b, "refused", "jobq:***@"]);
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert!(!format!("{error:?}").contains("s3cret-pw"), "{error:?}");
}

/// The drain runs through the forwarder (the list's first node) until the
/// forwarder is killed with a third of the jobs done; the pool moves to the
/// server itself, the drain finishes, every job ran once. Once the
/// forwarder listens again the pool moves back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lost_mid_drain_moves_the_pool_and_every_job_runs_once() {
    let Some(db) = TestDb::mysql() else { return };
    db.jobq().await;
    let server = host_of(db.url());
    let mut proxy = Proxy::start(server_addr(db.url()).await).await;
    let url = with_hosts(db.url(), &[proxy.host(), server.clone()]);
    let jobq = Jobq::connect(&url).await.expect("connect");
    assert_eq!(jobq.current_node(), Some(proxy.host()));

    let queue = unique_queue("failover-drain");
    let n = 3_000u64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        jobq.enqueue_many_with(chunk.iter().map(|&i| (Record::new(i), on(&queue))))
            .await
            .expect("enqueue");
    }
    let recorder = Recorder::default();
    // Leases far above the move (milliseconds here): a lost node must not
    // make healthy jobs orphans.
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 8)
        .state(recorder.clone())
        .lease(Duration::from_secs(5))
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();

    wait_until(
        "a third of the jobs are done",
        Duration::from_secs(60),
        || async { done(&jobq, &queue).await.unwrap_or(0) >= n / 3 },
    )
    .await;
    proxy.kill();
    let killed = Instant::now();
    wait_until(
        "the pool moved to the server",
        Duration::from_secs(10),
        || async { jobq.current_node().as_deref() == Some(server.as_str()) },
    )
    .await;
    let moved = killed.elapsed();
    wait_until("every job is done", Duration::from_secs(60), || async {
        done(&jobq, &queue).await == Some(n)
    })
    .await;
    let (jobs, runs) = recorder.totals();
    assert_eq!(jobs as u64, n, "every job ran");
    assert_eq!(
        recorder.repeated(),
        Vec::<i64>::new(),
        "no job ran twice ({runs} runs of {jobs} jobs)"
    );

    proxy.restart().await;
    let back = eventually(Duration::from_secs(15), || async {
        jobq.current_node() == Some(proxy.host())
    })
    .await;
    assert!(back, "the pool moved back to the first node within 15 s");
    // And works there.
    let id = jobq
        .enqueue_with(Record::new(n), on(&queue))
        .await
        .expect("enqueue")
        .id;
    wait_until("the last job is done", Duration::from_secs(20), || async {
        done(&jobq, &queue).await == Some(n + 1)
    })
    .await;
    assert_eq!(recorder.runs(id).len(), 1);
    worker
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
    let counts = jobq.counts(&queue).await.expect("counts");
    assert_eq!(
        counts.processing + counts.pending + counts.failed,
        0,
        "{counts:?}"
    );
    println!("failover: the pool moved {moved:?} after the node was lost");
}

/// The list's first node is down when the handle connects, so the pool
/// starts on the second; once the first listens again the pool moves back
/// to it by itself (no error needed to start looking) and its statements
/// run there: the second node can go away without a call failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_starts_on_a_later_node_moves_back_when_the_first_is_ready() {
    let Some(db) = TestDb::mysql() else { return };
    db.jobq().await;
    let target = server_addr(db.url()).await;
    let mut first = Proxy::start(target).await;
    let mut second = Proxy::start(target).await;
    first.kill();
    let url = with_hosts(db.url(), &[first.host(), second.host()]);
    let jobq = Jobq::connect(&url)
        .await
        .expect("connect past a down first node");
    assert_eq!(jobq.current_node(), Some(second.host()));
    let queue = unique_queue("failover-start-late");
    jobq.enqueue_with(Record::new(0), on(&queue))
        .await
        .expect("enqueue on the second node");
    sqlx::query("SELECT 1")
        .execute(jobq.mysql_pool().expect("a MySQL handle"))
        .await
        .expect("the application's pool on the second node");

    first.restart().await;
    let back = eventually(Duration::from_secs(15), || async {
        jobq.current_node() == Some(first.host())
    })
    .await;
    assert!(
        back,
        "the pool moved back to the first node within 15 s of it listening again (it stayed on {:?})",
        jobq.current_node()
    );
    // Its connections are there now: losing the second node fails nothing.
    second.kill();
    let started = Instant::now();
    let id = jobq
        .enqueue_with(Record::new(1), on(&queue))
        .await
        .expect("enqueue on the first node")
        .id;
    assert!(jobq.job(id).await.expect("read").is_some());
    assert_eq!(jobq.counts(&queue).await.expect("counts").pending, 2);
    // The application's pool (`Jobq::mysql_pool`) moved with jobq's.
    sqlx::query("SELECT 1")
        .execute(jobq.mysql_pool().expect("a MySQL handle"))
        .await
        .expect("the application's pool on the first node");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the calls ran on the first node at once, took {:?}",
        started.elapsed()
    );
}
