//! `Worker::build` refuses durations a claim or a settle could not write:
//! each interval is bounded, with a message naming the setting and its range.

use std::time::Duration;

use jobq_runtime::{Error, Jobq, Worker, WorkerBuilder, job};

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

#[tokio::test]
async fn a_lease_over_a_day_is_refused() {
    for lease in [DAY + Duration::from_millis(1), Duration::MAX] {
        let m = refused(builder().await.lease(lease));
        assert!(m.contains("lease") && m.contains("100ms to 86400s"), "{m}");
    }
    builder()
        .await
        .lease(DAY)
        .build()
        .expect("a day is allowed");
}

#[tokio::test]
async fn a_heartbeat_interval_of_zero_or_not_under_the_lease_is_refused() {
    let m = refused(builder().await.heartbeat_interval(Duration::ZERO));
    assert!(m.contains("heartbeat interval"), "{m}");
    let m = refused(builder().await.heartbeat_interval(Duration::MAX));
    assert!(m.contains("heartbeat interval"), "{m}");
}

#[tokio::test]
async fn a_poll_interval_of_zero_or_over_an_hour_is_refused() {
    for poll in [Duration::ZERO, Duration::from_secs(3601), Duration::MAX] {
        let m = refused(builder().await.poll_interval(poll));
        assert!(
            m.contains("poll interval") && m.contains("1ms to 3600s"),
            "{m}"
        );
    }
}

#[tokio::test]
async fn a_reap_interval_of_zero_or_over_a_day_is_refused() {
    for reap in [Duration::ZERO, DAY + Duration::from_secs(1), Duration::MAX] {
        let m = refused(builder().await.reap_interval(reap));
        assert!(
            m.contains("reap interval") && m.contains("1ms to 86400s"),
            "{m}"
        );
    }
}

#[tokio::test]
async fn a_shutdown_timeout_over_a_day_is_refused() {
    let m = refused(builder().await.shutdown_timeout(Duration::MAX));
    assert!(
        m.contains("shutdown timeout") && m.contains("0ns to 86400s"),
        "{m}"
    );
    builder()
        .await
        .shutdown_timeout(Duration::ZERO)
        .build()
        .expect("no grace at all is allowed");
}

#[tokio::test]
async fn a_retention_over_100_years_is_refused() {
    let m = refused(builder().await.prune_finished_after(Duration::MAX));
    assert!(m.contains("retention"), "{m}");
    let m = refused(builder().await.prune_failed_after(Duration::MAX));
    assert!(m.contains("retention"), "{m}");
}
