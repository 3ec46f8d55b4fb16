//! A worker's settles and heartbeats both update many of its rows at once;
//! run side by side they could lock the same rows in opposite orders, and
//! PostgreSQL reports such a deadlock only after `deadlock_timeout` (1 s),
//! a second in which the worker's settles stall. A worker never runs the
//! two at once. Its own test binary: the retry counter is per process.

use std::time::Duration;

use jobq_runtime::{Enqueue, Worker, internal_retries, job};
use jobq_tests::{TestDb, unique_queue, wait_for_done};

#[job(name = "heartbeats_short")]
async fn short(n: u64) {
    let _ = n;
    tokio::time::sleep(Duration::from_millis(2)).await;
}

async fn drain_with_constant_heartbeats(db: &TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("heartbeats");
    jobq.enqueue_many_with((0..3_000).map(|n| (Short::new(n), Enqueue::new().queue(&queue))))
        .await
        .unwrap();
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 32)
        .lease(Duration::from_millis(500))
        .heartbeat_interval(Duration::from_millis(5))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    wait_for_done(&jobq, &queue, 3_000, Duration::from_secs(60)).await;
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settles_and_heartbeats_of_one_worker_never_deadlock() {
    for db in [TestDb::postgres(), TestDb::mysql(), TestDb::sqlite()]
        .into_iter()
        .flatten()
    {
        let before = internal_retries();
        drain_with_constant_heartbeats(&db).await;
        let retries = internal_retries() - before;
        assert_eq!(
            retries,
            0,
            "{:?}: a statement was retried (a deadlock or lock timeout) {retries} times",
            db.backend()
        );
    }
}
