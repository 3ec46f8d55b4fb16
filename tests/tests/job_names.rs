//! Job names have a length limit that every periodic job's key fits in:
//! a name over it is refused at enqueue and at `build()` (and by `#[job]`
//! at compile time, see jobq-macros' UI tests), on every backend alike.

use std::time::Duration;

use jobq_runtime::{Enqueue, Error, Job, JobContext, Worker, job};
use jobq_tests::{TestDb, unique_queue};
use serde::{Deserialize, Serialize};

/// A job whose name is 229 bytes: its cron key would be 255 + 1 characters.
/// (`#[job]` refuses such a name, so the impl is written by hand.)
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LongName;

impl Job for LongName {
    const NAME: &'static str = "lllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllll";
}

#[job(name = "names_ok")]
async fn short_name(ctx: &JobContext, n: u64) {
    let _ = (ctx, n);
}

async fn a_job_name_over_the_limit_is_refused_at_enqueue(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("names");
    let error = jobq
        .enqueue_with(LongName, Enqueue::new().queue(&queue))
        .await
        .expect_err("a 229-byte job name is refused");
    let Error::Invalid(message) = &error else {
        panic!("expected Error::Invalid, got {error:?}");
    };
    assert!(
        message
            .to_string()
            .contains("is 229 bytes long; it must be 1 to 200 bytes"),
        "{message}"
    );
    let error = jobq
        .enqueue_many_with([(LongName, Enqueue::new().queue(&queue))])
        .await
        .expect_err("in a batch too");
    assert!(matches!(error, Error::Invalid(_)), "{error:?}");
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 0);
    // The handle goes on.
    jobq.enqueue_with(ShortName::new(1), Enqueue::new().queue(&queue))
        .await
        .unwrap();
}

async fn a_cron_job_whose_tick_key_cannot_fit_is_refused_at_build(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("names-cron");
    let error = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .cron("* * * * * *", LongName)
        .build()
        .expect_err("build() refuses a cron job whose keys cannot be stored");
    let Error::Config(message) = &error else {
        panic!("expected Error::Config, got {error:?}");
    };
    assert!(message.to_string().contains("229 bytes long"), "{message}");
    // A short name builds.
    let handle = Worker::builder(jobq)
        .queue_unchecked(&queue, 1)
        .cron("0 0 1 1 *", ShortName::new(2))
        .build()
        .unwrap()
        .start();
    handle.shutdown(Duration::from_secs(5)).await.unwrap();
}

jobq_tests::on_every_backend!(
    a_job_name_over_the_limit_is_refused_at_enqueue,
    a_cron_job_whose_tick_key_cannot_fit_is_refused_at_build,
);
