//! Claims of any size the worker may ask for, and claims that fail half-way:
//! whatever a claim committed is handed to its worker.

use std::time::Duration;

use jobq_runtime::{Enqueue, JobContext, JobStatus, job};
use jobq_tests::{TestDb, unique_queue};

#[job(name = "claims_noop")]
async fn noop(ctx: &JobContext, n: u64) {
    let _ = (ctx, n);
}

async fn seed(jobq: &jobq_runtime::Jobq, queue: &str, n: u64) -> Vec<i64> {
    let mut ids = Vec::new();
    let rows: Vec<_> = (0..n)
        .map(|i| (Noop::new(i), Enqueue::new().queue(queue)))
        .collect();
    for chunk in rows.chunks(10_000) {
        let done = jobq.enqueue_many_with(chunk.iter().cloned()).await.unwrap();
        ids.extend(done.into_iter().map(|e| e.id));
    }
    ids
}

const LEASE: Duration = Duration::from_secs(60);

/// One store claim of up to `limit` rows of `queue`; the ids it claimed.
async fn claim_ids(
    jobq: &jobq_runtime::Jobq,
    queue: &str,
    limit: u32,
    lease: Duration,
    worker: &str,
) -> jobq_runtime::Result<Vec<i64>> {
    let claimed = jobq_runtime::__store::claim(jobq, queue, limit, lease, worker).await?;
    Ok(claimed.into_iter().map(|c| c.id).collect())
}

/// A worker of concurrency 10,000 (the most `build()` accepts) claims up to
/// 9 × that many rows at once (free slots and jobs claimed ahead): beyond
/// 32,768 rows MySQL's limit of 65,535 placeholders per statement is reached.
async fn a_claim_of_forty_thousand_rows_claims_them_all(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("claims-big");
    let mut ids = seed(&jobq, &queue, 40_000).await;
    let mut claimed = claim_ids(&jobq, &queue, 40_000, LEASE, "big")
        .await
        .unwrap();
    ids.sort_unstable();
    claimed.sort_unstable();
    assert_eq!(claimed.len(), ids.len());
    assert_eq!(claimed, ids);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.processing, 40_000, "{counts:?}");
    // Leave nothing for a reaper to work through.
    jobq_tests::sql::Db::of(&jobq)
        .execute(
            "DELETE FROM jobq_jobs WHERE queue = ?",
            &[jobq_tests::sql::Arg::from(queue.as_str())],
        )
        .await
        .unwrap();
}

jobq_tests::on_every_backend!(a_claim_of_forty_thousand_rows_claims_them_all);

/// On MySQL/MariaDB a claim that goes on from where the last one ended and
/// comes up short tops itself up from the start, in a second transaction.
/// When that one fails, the rows the first committed are held by this
/// worker's claim: they are returned, not dropped with the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_failed_top_up_returns_the_rows_already_claimed() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await;
    let queue = unique_queue("claims-topup");
    let ids = seed(&jobq, &queue, 10).await;
    let first = claim_ids(&jobq, &queue, 4, LEASE, "w").await.unwrap();
    assert_eq!(first, ids[..4]);
    // The next claim goes on after the fourth row, finds six of the ten it
    // asks for, and tops up from the start: that part fails.
    jobq_runtime::__store::fail_next_mysql_top_up(&queue);
    let second = claim_ids(&jobq, &queue, 10, LEASE, "w").await;
    assert!(
        !jobq_runtime::__store::mysql_top_up_failure_armed(&queue),
        "the claim topped up (it ran within 200 ms of the first)"
    );
    let second = second.expect("the rows the first part claimed are returned");
    assert_eq!(second, ids[4..]);
    for id in &ids {
        let row = jobq.job(*id).await.unwrap().unwrap();
        assert_eq!(row.status, JobStatus::Processing);
        assert_eq!(row.attempts, 1);
    }
}
