//! `Worker::build` refuses durations a claim or a settle could not write:
//! each interval is bounded, with a message naming the setting and its range.

use std::time::Duration;

use jobq_runtime::{Error, Jobq, Worker, WorkerBuilder, job};
use jobq_tests::assert_contains;

#[job(name = "bounds_noop", queue = "bounds")]
async fn noop() {}

async fn builder() -> WorkerBuilder {
    let jobq = Jobq::connect("sqlite::memory:").await.unwrap();
    Worker::builder(jobq).queue("bounds", 1)
}

fn refused(builder: WorkerBuilder) -> String {
    let error = builder.build().expect_err("build must fail");
    assert!(matches!(error, Error::Config(_)), "{error:?}");
    error.to_string()
}

const DAY: Duration = Duration::from_secs(24 * 3600);

/// A builder setting of one duration.
type Setting = fn(WorkerBuilder, Duration) -> WorkerBuilder;

/// Each of `values`, set with `set`, is refused with a message naming all
/// of `parts` (the setting and its range).
async fn refuses(set: Setting, values: &[Duration], parts: &[&str]) {
    for &value in values {
        assert_contains(&refused(set(builder().await, value)), parts);
    }
}

#[tokio::test]
async fn a_lease_over_a_day_is_refused() {
    let values = [DAY + Duration::from_millis(1), Duration::MAX];
    refuses(WorkerBuilder::lease, &values, &["lease", "100ms to 86400s"]).await;
    builder()
        .await
        .lease(DAY)
        .build()
        .expect("a day is allowed");
}

#[tokio::test]
async fn a_heartbeat_interval_of_zero_or_not_under_the_lease_is_refused() {
    let values = [Duration::ZERO, Duration::MAX];
    refuses(
        WorkerBuilder::heartbeat_interval,
        &values,
        &["heartbeat interval"],
    )
    .await;
}

#[tokio::test]
async fn a_poll_interval_of_zero_or_over_an_hour_is_refused() {
    let values = [Duration::ZERO, Duration::from_secs(3601), Duration::MAX];
    refuses(
        WorkerBuilder::poll_interval,
        &values,
        &["poll interval", "1ms to 3600s"],
    )
    .await;
}

#[tokio::test]
async fn a_presence_interval_under_10ms_or_over_an_hour_is_refused() {
    let values = [
        Duration::ZERO,
        Duration::from_millis(9),
        Duration::from_secs(3601),
        Duration::MAX,
    ];
    refuses(
        WorkerBuilder::presence_interval,
        &values,
        &["presence interval", "10ms to 3600s"],
    )
    .await;
    builder()
        .await
        .presence_interval(Duration::from_millis(10))
        .build()
        .expect("10 ms is allowed");
}

#[tokio::test]
async fn a_reap_interval_of_zero_or_over_a_day_is_refused() {
    let values = [Duration::ZERO, DAY + Duration::from_secs(1), Duration::MAX];
    refuses(
        WorkerBuilder::reap_interval,
        &values,
        &["reap interval", "1ms to 86400s"],
    )
    .await;
}

#[tokio::test]
async fn a_shutdown_timeout_over_a_day_is_refused() {
    let parts = ["shutdown timeout", "0ns to 86400s"];
    refuses(WorkerBuilder::shutdown_timeout, &[Duration::MAX], &parts).await;
    builder()
        .await
        .shutdown_timeout(Duration::ZERO)
        .build()
        .expect("no grace at all is allowed");
}

#[tokio::test]
async fn a_retention_over_100_years_is_refused() {
    for set in [
        WorkerBuilder::prune_finished_after as Setting,
        WorkerBuilder::prune_failed_after,
    ] {
        refuses(set, &[Duration::MAX], &["retention"]).await;
    }
}
