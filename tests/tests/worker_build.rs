//! `Worker::build` refuses configurations that could not work, with a message
//! that says what is wrong and what to do.

use std::time::Duration;

use jobq_runtime::{Error, Jobq, State, Worker, job};
use jobq_tests::assert_contains;

/// Something a handler needs from the service.
#[derive(Debug)]
struct Mailer;

#[job(name = "build_needs_mailer", queue = "build-mail")]
async fn needs_mailer(mailer: State<Mailer>, to: String) {
    let _ = (mailer, to);
}

async fn jobq() -> Jobq {
    Jobq::connect("sqlite::memory:").await.unwrap()
}

fn message(result: Result<Worker, Error>) -> String {
    let error = result.expect_err("build must fail");
    assert!(matches!(error, Error::Config(_)), "{error:?}");
    error.to_string()
}

#[tokio::test]
async fn a_missing_state_names_the_job_and_the_type() {
    let m = message(Worker::builder(jobq().await).queue("build-mail", 2).build());
    assert_contains(
        &m,
        &[
            "job `build_needs_mailer`",
            "State<worker_build::Mailer>",
            ".state(value)",
        ],
    );
}

#[job(name = "build_needs_arc_mailer", queue = "build-arc-mail")]
async fn needs_arc_mailer(mailer: State<std::sync::Arc<Mailer>>, to: String) {
    let _ = (mailer, to);
}

#[tokio::test]
async fn a_state_given_without_its_arc_lists_what_was_given_as_written() {
    let m = message(
        Worker::builder(jobq().await)
            .queue("build-arc-mail", 2)
            .state(Mailer)
            .state(7_u32)
            .build(),
    );
    assert_contains(
        &m,
        &[
            "the worker cannot be built: job `build_needs_arc_mailer` (`worker_build::needs_arc_mailer` at tests/tests/worker_build.rs:",
            ") takes `State<std::sync::Arc<worker_build::Mailer>>`, but the worker was given states of type `u32`, `worker_build::Mailer`; add .state(value) (a `worker_build::Mailer` was given: take `State<worker_build::Mailer>`, which shares it in an Arc already, or give .state(Arc::new(value)))",
        ],
    );
    let m = message(
        Worker::builder(jobq().await)
            .queue("build-mail", 2)
            .state(std::sync::Arc::new(Mailer))
            .build(),
    );
    assert!(!m.contains("alloc::"), "{m}");
    assert_contains(
        &m,
        &[
            "but the worker was given only a `std::sync::Arc<worker_build::Mailer>`",
            "give the `worker_build::Mailer` itself",
        ],
    );
}

#[tokio::test]
async fn given_the_state_the_worker_builds() {
    Worker::builder(jobq().await)
        .queue("build-mail", 2)
        .state(Mailer)
        .build()
        .unwrap();
}

#[tokio::test]
async fn a_queue_without_registered_jobs_is_refused_unless_unchecked() {
    let m = message(Worker::builder(jobq().await).queue("build-mial", 2).build());
    assert_contains(
        &m,
        &["queue `build-mial` has no registered job", "`build-mail`"],
    );
    Worker::builder(jobq().await)
        .queue_unchecked("build-mial", 2)
        .build()
        .unwrap();
}

#[tokio::test]
async fn concurrency_zero_and_bad_queues_are_refused() {
    let m = message(
        Worker::builder(jobq().await)
            .queue_unchecked("q", 0)
            .build(),
    );
    assert!(m.contains("concurrency 0"), "{m}");
    let m = message(Worker::builder(jobq().await).queue_unchecked("", 1).build());
    assert!(m.contains("must be 1 to 128 bytes"), "{m}");
    let m = message(Worker::builder(jobq().await).build());
    assert!(m.contains("serves no queue"), "{m}");
    let m = message(
        Worker::builder(jobq().await)
            .queue_unchecked("q", 1)
            .queue_unchecked("q", 1)
            .build(),
    );
    assert!(m.contains("served twice"), "{m}");
}

#[tokio::test]
async fn a_heartbeat_must_be_shorter_than_the_lease() {
    let m = message(
        Worker::builder(jobq().await)
            .queue_unchecked("q", 1)
            .lease(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_secs(2))
            .build(),
    );
    assert!(m.contains("heartbeat interval"), "{m}");
}

#[job(name = "build_cron_report", queue = "build-mail")]
async fn cron_report() {}

#[tokio::test]
async fn a_cron_schedule_that_does_not_parse_is_refused_with_the_job_named() {
    let m = message(
        Worker::builder(jobq().await)
            .queue("build-mail", 2)
            .state(Mailer)
            .cron("every tuesday", CronReport::new())
            .build(),
    );
    assert_contains(
        &m,
        &["cron schedule `every tuesday`", "job `build_cron_report`"],
    );
}

#[tokio::test]
async fn a_cron_time_zone_that_does_not_exist_is_refused_with_the_job_named() {
    let m = message(
        Worker::builder(jobq().await)
            .queue("build-mail", 2)
            .state(Mailer)
            .cron_in("Europe/Atlantis", "0 3 * * *", CronReport::new())
            .build(),
    );
    assert_contains(
        &m,
        &[
            "time zone `Europe/Atlantis`",
            "job `build_cron_report`",
            "IANA",
        ],
    );
}

#[tokio::test]
async fn a_job_scheduled_twice_is_refused() {
    let m = message(
        Worker::builder(jobq().await)
            .queue("build-mail", 2)
            .state(Mailer)
            .cron("0 3 * * *", CronReport::new())
            .cron("0 15 * * *", CronReport::new())
            .build(),
    );
    assert!(
        m.contains("job `build_cron_report` is scheduled twice"),
        "{m}"
    );
}

#[tokio::test]
async fn five_and_six_field_schedules_and_nicknames_build() {
    for schedule in ["0 3 * * *", "*/10 * * * * *", "0 0 * * MON-FRI", "@daily"] {
        Worker::builder(jobq().await)
            .queue("build-mail", 2)
            .state(Mailer)
            .cron(schedule, CronReport::new())
            .build()
            .unwrap_or_else(|e| panic!("{schedule}: {e}"));
    }
}
