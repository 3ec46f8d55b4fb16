//! Heartbeat: a renewal extends only the leases its claims still hold,
//! and names the ones they lost; the renewal of a stuck settle's rows
//! skips the rows another transaction has locked, without waiting.

use super::*;

/// A heartbeat extends the lease of each row its claim holds — a lease
/// that had run out too, before a reaper came — and returns the claims
/// that hold nothing: another claim's token, a settled row.
async fn a_heartbeat_renews_only_the_leases_its_claims_still_hold(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("heartbeat");
    for n in 0..3 {
        enqueue(&jobq, &queue, n).await;
    }
    let claimed = claim(&jobq, &queue, 3, "w").await;
    let [a, b, c] = [claimed[0], claimed[1], claimed[2]];
    expire(&jobq, a.id).await;
    assert_eq!(__store::complete(&jobq, &[fence(&c)]).await.unwrap(), 1);
    let other = (b.id, b.token + 1);
    let hour = Duration::from_secs(3600);
    let fences = [fence(&a), other, fence(&c)];
    let mut lost = __store::heartbeat(&jobq, &fences, hour).await.unwrap();
    lost.sort_unstable();
    let mut expected = vec![other, fence(&c)];
    expected.sort_unstable();
    assert_eq!(lost, expected);

    let (row, token) = stored(&jobq, a.id).await;
    assert_eq!((row.status, token), (JobStatus::Processing, Some(a.token)));
    let lease = row.run_at - row.claimed_at.unwrap();
    assert!(
        lease >= chrono::TimeDelta::hours(1),
        "renewed to {lease} after the claim"
    );
    assert_eq!(
        __store::reap(&jobq, &queue, 10).await.unwrap(),
        0,
        "nothing expired"
    );
    assert_held(&jobq, &b, "w", LEASE).await;
    assert_finished(&jobq, c.id, JobStatus::Done).await;
}

/// The renewal beside a stuck settle renews the held rows no other
/// transaction has locked, at once, and returns them; a locked row is left
/// to its lock holder. SQLite has no row locks: there it renews every
/// held row.
async fn a_heartbeat_beside_a_stuck_settle_skips_locked_rows_without_waiting(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("heartbeat-unlocked");
    for n in 0..3 {
        enqueue(&jobq, &queue, n).await;
    }
    let claimed = claim(&jobq, &queue, 3, "w").await;
    let [a, b, c] = [claimed[0], claimed[1], claimed[2]];
    let stale = (c.id, c.token + 1);
    let fences = [fence(&a), fence(&b), stale];
    let hour = Duration::from_secs(3600);

    let mut holder = Db::of(&jobq).begin().await.unwrap();
    assert_eq!(holder.lock(&[a.id]).await.unwrap(), 1);
    let renewal = __store::heartbeat_unlocked(&jobq, &fences, hour);
    let mut renewed = without_waiting("the renewal", renewal).await.unwrap();
    renewed.sort_unstable();
    let lease = |row: JobInfo| row.run_at - row.claimed_at.unwrap();
    match db.backend() {
        Backend::Sqlite => assert_eq!(renewed, [fence(&a), fence(&b)]),
        _ => {
            assert_eq!(renewed, [fence(&b)]);
            assert_eq!(
                lease(info(&jobq, a.id).await),
                chrono_of(LEASE),
                "not renewed"
            );
        }
    }
    assert!(lease(info(&jobq, b.id).await) >= chrono::TimeDelta::hours(1));
    holder.rollback().await.unwrap();

    let mut renewed = __store::heartbeat_unlocked(&jobq, &fences, hour)
        .await
        .unwrap();
    renewed.sort_unstable();
    assert_eq!(
        renewed,
        [fence(&a), fence(&b)],
        "the stale claim renews nothing"
    );
    assert!(lease(info(&jobq, a.id).await) >= chrono::TimeDelta::hours(1));
    assert_held(&jobq, &c, "w", LEASE).await;
}

/// A worker can hold two claims of one job: an attempt that lost its lease
/// (not stopped yet) and the new attempt it claimed since. A renewal of
/// both renews the new one and names the old one lost, so the old attempt
/// is stopped — it is not kept alive by the other claim's row.
async fn a_renewal_tells_two_claims_of_one_job_apart(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("heartbeat-twice");
    enqueue(&jobq, &queue, 0).await;
    let claimed = claim(&jobq, &queue, 1, "w").await;
    let new = fence(&claimed[0]);
    let old = (new.0, new.1 - 1);
    let hour = Duration::from_secs(3600);
    let renewed = __store::heartbeat_unlocked(&jobq, &[old, new], hour)
        .await
        .unwrap();
    assert_eq!(renewed, [new], "only the claim that holds the row");
    let lost = __store::heartbeat(&jobq, &[old, new], hour).await.unwrap();
    assert_eq!(lost, [old], "the other claim is lost");
}

contract!(
    a_heartbeat_renews_only_the_leases_its_claims_still_hold,
    a_heartbeat_beside_a_stuck_settle_skips_locked_rows_without_waiting,
    a_renewal_tells_two_claims_of_one_job_apart,
);
