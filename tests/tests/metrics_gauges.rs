//! The stats gauges: a worker built with `stats_gauges_every` sets the
//! per-queue gauges from `Jobq::stats` at that interval. In a test binary
//! of its own (one global recorder per process).

use std::time::Duration;

use jobq_runtime::metrics::{
    QUEUE_AVAILABLE, QUEUE_EXPIRED_LEASES, QUEUE_OLDEST_AVAILABLE_AGE_SECONDS, QUEUE_PAUSED,
    QUEUE_PROCESSING, QUEUE_SCHEDULED,
};
use jobq_runtime::{Worker, job};
use jobq_tests::metrics::{gauge, install};
use jobq_tests::{TestDb, fixture, on, stop, unique_queue, wait_until};

/// Never runs: the worker serves another queue.
#[job(name = "metrics_gauged")]
async fn gauged(n: u64) {
    let _ = n;
}

async fn the_worker_sets_each_queues_gauges_from_the_stats_at_its_interval(db: TestDb) {
    install();
    let (jobq, queue, _) = fixture(&db, "metrics_gauges").await;
    let due = chrono::Utc::now() - chrono::Duration::seconds(30);
    jobq.enqueue_with(Gauged::new(1), on(&queue).run_at(due))
        .await
        .unwrap();
    jobq.enqueue_with(Gauged::new(2), on(&queue)).await.unwrap();
    jobq.enqueue_with(Gauged::new(3), on(&queue).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(unique_queue("metrics_gauges_idle"), 1)
        .stats_gauges_every(Duration::from_millis(50))
        .build()
        .unwrap()
        .start();
    let labels = [("queue", queue.as_str())];
    wait_until(
        "the gauges of the queue are set",
        Duration::from_secs(20),
        || async {
            gauge(QUEUE_AVAILABLE, &labels) == Some(2.0)
                && gauge(QUEUE_SCHEDULED, &labels) == Some(1.0)
        },
    )
    .await;
    stop(worker).await;
    assert_eq!(gauge(QUEUE_PROCESSING, &labels), Some(0.0));
    assert_eq!(gauge(QUEUE_EXPIRED_LEASES, &labels), Some(0.0));
    assert_eq!(gauge(QUEUE_PAUSED, &labels), Some(0.0));
    let lag = gauge(QUEUE_OLDEST_AVAILABLE_AGE_SECONDS, &labels).unwrap();
    assert!((29.0..120.0).contains(&lag), "queue lag {lag}");
}

jobq_tests::on_every_backend!(the_worker_sets_each_queues_gauges_from_the_stats_at_its_interval);
