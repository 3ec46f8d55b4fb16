//! Settle: `complete` and `transition` apply only through the claim that
//! holds the row now — its exact `(id, token)` — and write the outcome
//! they are given: done, back to `pending` after a delay (the attempt
//! counted or refunded, the error kept or replaced), or failed for good.

use super::*;

/// A batch of successes marks `done` the rows its claims still hold, and
/// says how many: not a row whose token is another's, not a row settled
/// already.
async fn complete_marks_the_held_rows_done_and_counts_them(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("settle-complete");
    for n in 0..3 {
        enqueue(&jobq, &queue, n).await;
    }
    let claimed = claim(&jobq, &queue, 3, "w").await;
    let [a, b, c] = [claimed[0], claimed[1], claimed[2]];
    let wrong = (c.id, c.token + 1);
    let settled = __store::complete(&jobq, &[fence(&a), fence(&b), wrong]).await;
    assert_eq!(settled.unwrap(), 2);
    for held in [a, b] {
        let row = assert_finished(&jobq, held.id, JobStatus::Done).await;
        assert_eq!((row.attempts, row.last_error), (1, None));
        assert_eq!(row.claimed_by.as_deref(), Some("w"));
    }
    assert_held(&jobq, &c, "w", LEASE).await;
    let again = __store::complete(&jobq, &[fence(&a)]).await.unwrap();
    assert_eq!(again, 0, "a settled claim settles nothing");
    assert_eq!(__store::complete(&jobq, &[fence(&c)]).await.unwrap(), 1);
    assert_finished(&jobq, c.id, JobStatus::Done).await;
}

/// A transition back to `pending` makes the row due after its delay, with
/// its error (or the last one kept), the attempt counted or refunded.
async fn a_transition_to_pending_keeps_or_refunds_the_attempt_and_the_last_error(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("settle-retry");
    let id = enqueue(&jobq, &queue, 1).await;
    let first = claim_only(&jobq, &queue, id, "w").await;
    let retry = __store::transition(
        &jobq,
        fence(&first),
        false,
        Duration::ZERO,
        false,
        Some("first failure".into()),
    );
    assert!(retry.await.unwrap());
    let (row, token) = stored(&jobq, id).await;
    assert_eq!(
        (row.status, row.attempts, token),
        (JobStatus::Pending, 1, None)
    );
    assert_eq!(row.last_error.as_deref(), Some("first failure"));
    assert_eq!(row.finished_at, None);

    let second = claim_only(&jobq, &queue, id, "w").await;
    assert_eq!(second.attempt, 2);
    let snooze = __store::transition(
        &jobq,
        fence(&second),
        false,
        Duration::from_secs(3600),
        true,
        None,
    );
    assert!(snooze.await.unwrap());
    let (row, token) = stored(&jobq, id).await;
    assert_eq!(
        (row.status, row.attempts, token),
        (JobStatus::Pending, 1, None)
    );
    assert_eq!(row.last_error.as_deref(), Some("first failure"));
    assert_eq!(row.finished_at, None);
    let waited = row.run_at - row.claimed_at.unwrap();
    assert!(
        waited >= chrono::TimeDelta::hours(1) && waited < chrono::TimeDelta::minutes(61),
        "due {waited} after the claim"
    );
    assert!(claim(&jobq, &queue, 1, "w").await.is_empty(), "not due yet");
    let again = __store::transition(&jobq, fence(&second), false, Duration::ZERO, true, None);
    assert!(!again.await.unwrap(), "a settled claim settles nothing");
}

/// A transition to `failed` finishes the row at once, whatever delay it
/// asks for (every finished row's `run_at` is when it finished).
async fn a_transition_to_failed_finishes_the_row_whatever_delay_it_asks(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("settle-fail");
    let id = enqueue(&jobq, &queue, 1).await;
    let held = claim_only(&jobq, &queue, id, "w").await;
    let fail = __store::transition(
        &jobq,
        fence(&held),
        true,
        Duration::from_secs(3600),
        false,
        Some("no such user".into()),
    );
    assert!(fail.await.unwrap());
    let row = assert_finished(&jobq, id, JobStatus::Failed).await;
    assert_eq!(
        (row.attempts, row.last_error.as_deref()),
        (1, Some("no such user"))
    );
    assert!(row.finished_at.unwrap() >= row.claimed_at.unwrap());
}

/// How the row left its first claim for the second.
#[derive(Debug, Clone, Copy)]
enum Reclaim {
    /// Its lease ran out, the reaper returned it, another worker claimed it.
    Reaped,
    /// It was cancelled and retried while attempt 1 ran, and the same
    /// worker claimed it again.
    CancelledAndRetried,
}

/// What the current attempt settles.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Done,
    Retry,
    Snooze,
    Fail,
}

/// One call of the interleaving: the stale attempt's, or the current one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    StaleComplete,
    StaleFail,
    StaleHeartbeat,
    Heartbeat,
    Settle,
}

/// What a row must be: status, attempts, token, last error, claimed by, finished.
type Expected = (
    JobStatus,
    u32,
    Option<i64>,
    Option<String>,
    Option<String>,
    bool,
);

async fn state(jobq: &Jobq, id: i64) -> Expected {
    let (row, token) = stored(jobq, id).await;
    (
        row.status,
        row.attempts,
        token,
        row.last_error,
        row.claimed_by,
        row.finished_at.is_some(),
    )
}

/// Every way of placing the current attempt's heartbeat and settle (in
/// that order) among the stale attempt's complete, fail and heartbeat (in
/// one of three rotations).
fn interleavings() -> Vec<Vec<Step>> {
    let stale = [Step::StaleComplete, Step::StaleFail, Step::StaleHeartbeat];
    let mut out = Vec::new();
    for first in 0..5 {
        for second in first + 1..5 {
            let mut s = stale.iter().cycle().skip(out.len() % 3);
            let steps = (0..5)
                .map(|at| match at {
                    _ if at == first => Step::Heartbeat,
                    _ if at == second => Step::Settle,
                    _ => *s.next().unwrap(),
                })
                .collect();
            out.push(steps);
        }
    }
    out
}

/// One scenario: attempt 1 of a row goes stale, attempt 2 holds it; the
/// steps run in order, and after each the row is what attempt 2 alone
/// made it.
async fn stale_attempt_scenario(jobq: &Jobq, reclaim: Reclaim, outcome: Outcome, steps: &[Step]) {
    let queue = unique_queue("settle-stale");
    let id = enqueue(jobq, &queue, 1).await;
    let stale = claim_only(jobq, &queue, id, "first").await;
    let (fresh, by, error) = match reclaim {
        Reclaim::Reaped => {
            expire(jobq, id).await;
            assert_eq!(__store::reap(jobq, &queue, 10).await.unwrap(), 1);
            let error = "lease expired during attempt 1: worker first stopped renewing it \
                         (crashed, killed or stalled)";
            let fresh = claim_only(jobq, &queue, id, "second").await;
            (fresh, "second", Some(error.to_owned()))
        }
        Reclaim::CancelledAndRetried => {
            let cancelled = __store::cancel(jobq, id).await.unwrap();
            assert_eq!(cancelled, (true, vec![fence(&stale)]));
            assert!(jobq.retry(id).await.unwrap());
            (claim_only(jobq, &queue, id, "first").await, "first", None)
        }
    };
    assert_eq!(fresh.attempt, 2);
    assert_ne!(fresh.token, stale.token);
    let what = || format!("{reclaim:?}, {outcome:?}, {steps:?}");
    let mut expected: Expected = (
        JobStatus::Processing,
        2,
        Some(fresh.token),
        error.clone(),
        Some(by.to_owned()),
        false,
    );
    for step in steps {
        match step {
            Step::StaleComplete => {
                let n = __store::complete(jobq, &[fence(&stale)]).await.unwrap();
                assert_eq!(n, 0, "{}", what());
            }
            Step::StaleFail => {
                let error = Some("stale failure".to_owned());
                let applied =
                    __store::transition(jobq, fence(&stale), true, Duration::ZERO, false, error);
                assert!(!applied.await.unwrap(), "{}", what());
            }
            Step::StaleHeartbeat => {
                // In one batch with the current claim, as a worker that
                // claimed the row again renews both.
                let both = [fence(&stale), fence(&fresh)];
                let mut lost = __store::heartbeat(jobq, &both, LEASE).await.unwrap();
                lost.sort_unstable();
                let mut expected_lost = vec![fence(&stale)];
                if expected.2.is_none() {
                    expected_lost.push(fence(&fresh));
                }
                expected_lost.sort_unstable();
                assert_eq!(lost, expected_lost, "{}", what());
            }
            Step::Heartbeat => {
                let lost = __store::heartbeat(jobq, &[fence(&fresh)], LEASE)
                    .await
                    .unwrap();
                assert!(lost.is_empty(), "{}", what());
            }
            Step::Settle => {
                let failure = Some("attempt 2 failed".to_owned());
                let (applied, status, attempts, error, finished) = match outcome {
                    Outcome::Done => {
                        let n = __store::complete(jobq, &[fence(&fresh)]).await.unwrap();
                        (n == 1, JobStatus::Done, 2, error.clone(), true)
                    }
                    Outcome::Retry => {
                        let t = __store::transition(
                            jobq,
                            fence(&fresh),
                            false,
                            Duration::ZERO,
                            false,
                            failure.clone(),
                        );
                        (t.await.unwrap(), JobStatus::Pending, 2, failure, false)
                    }
                    Outcome::Snooze => {
                        let t = __store::transition(
                            jobq,
                            fence(&fresh),
                            false,
                            Duration::from_secs(3600),
                            true,
                            None,
                        );
                        (
                            t.await.unwrap(),
                            JobStatus::Pending,
                            1,
                            error.clone(),
                            false,
                        )
                    }
                    Outcome::Fail => {
                        let t = __store::transition(
                            jobq,
                            fence(&fresh),
                            true,
                            Duration::ZERO,
                            false,
                            failure.clone(),
                        );
                        (t.await.unwrap(), JobStatus::Failed, 2, failure, true)
                    }
                };
                assert!(applied, "{}", what());
                expected = (status, attempts, None, error, Some(by.to_owned()), finished);
            }
        }
        assert_eq!(
            state(jobq, id).await,
            expected,
            "after {step:?}: {}",
            what()
        );
    }
}

/// A stale attempt — its row reaped and claimed by another worker, or
/// cancelled, retried and claimed again by the same worker — cannot
/// complete, fail or renew the row, in any order with the current
/// attempt's heartbeat and settle, whatever that settles (done, a retry, a
/// snooze, a failure): after every step the row is what the current
/// attempt alone made it.
async fn a_stale_attempt_cannot_settle_a_reclaimed_job_in_any_interleaving(db: TestDb) {
    let jobq = db.jobq().await;
    let mut runs = Vec::new();
    for reclaim in [Reclaim::Reaped, Reclaim::CancelledAndRetried] {
        for outcome in [
            Outcome::Done,
            Outcome::Retry,
            Outcome::Snooze,
            Outcome::Fail,
        ] {
            let jobq = jobq.clone();
            runs.push(async move {
                for steps in interleavings() {
                    stale_attempt_scenario(&jobq, reclaim, outcome, &steps).await;
                }
            });
        }
    }
    futures_util::future::join_all(runs).await;
}

contract!(
    complete_marks_the_held_rows_done_and_counts_them,
    a_transition_to_pending_keeps_or_refunds_the_attempt_and_the_last_error,
    a_transition_to_failed_finishes_the_row_whatever_delay_it_asks,
    a_stale_attempt_cannot_settle_a_reclaimed_job_in_any_interleaving,
);
