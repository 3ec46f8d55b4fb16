//! Listing jobs: each filter selects exactly its jobs, pages run newest or
//! oldest first by id, and keyset paging neither repeats nor skips a job
//! that existed when paging began, whatever is enqueued between pages.

use std::collections::HashSet;
use std::time::Duration;

use jobq_runtime::__store;
use jobq_runtime::{JobFilter, JobStatus, Jobq, Order, Page, job};
use jobq_tests::{TestDb, invalid, on, unique_queue};

#[job(name = "list_a")]
async fn list_a(n: u64) {
    let _ = n;
}

#[job(name = "list_b")]
async fn list_b(n: u64) {
    let _ = n;
}

/// Jobs of one queue in every status, two job names, and keys whose
/// prefixes hold `%` and `_`.
struct Rows {
    jobq: Jobq,
    queue: String,
    /// The keys' common prefix (unique to this test run).
    prefix: String,
    done: i64,
    failed: i64,
    processing: i64,
    cancelled: i64,
    pending_a: i64,
    pending_b: i64,
}

impl Rows {
    fn all(&self) -> Vec<i64> {
        let mut ids = vec![
            self.done,
            self.failed,
            self.processing,
            self.cancelled,
            self.pending_a,
            self.pending_b,
        ];
        ids.sort_unstable();
        ids
    }

    fn in_queue(&self) -> JobFilter {
        JobFilter::new().queue(&self.queue)
    }

    /// The ids `filter` lists (one page), ascending; `count_where` agrees.
    ///
    /// An enqueue-time filter is a range of ids found by a binary search
    /// over every queue's rows, which other tests of this binary insert
    /// meanwhile; a row whose `created_at` is out of id order (two inserts
    /// that took their times and ids in opposite orders) may move the
    /// range's bound between the list and the count (the miss near a bound
    /// that `JobFilter::created` documents). So the two are read again, a
    /// few times, until they agree.
    async fn ids(&self, filter: &JobFilter) -> Vec<i64> {
        let mut tries = 0;
        loop {
            let page = self
                .jobq
                .list(filter, Page::first(100).order(Order::OldestFirst))
                .await
                .expect("list");
            assert_eq!(page.next, None, "all on one page");
            let ids: Vec<i64> = page.jobs.iter().map(|j| j.id).collect();
            let count = self.jobq.count_where(filter).await.expect("count_where");
            tries += 1;
            if count == ids.len() as u64 || tries == 5 {
                assert_eq!(count, ids.len() as u64, "count_where agrees with list");
                return ids;
            }
        }
    }
}

async fn rows(db: &TestDb) -> Rows {
    let jobq = db.jobq().await;
    let queue = unique_queue("list");
    let prefix = format!("{queue}/");
    let key = |k: &str| on(&queue).idempotency_key(format!("{prefix}{k}"));
    let done = jobq
        .enqueue_with(ListA::new(1), key("a%1"))
        .await
        .unwrap()
        .id;
    let failed = jobq
        .enqueue_with(ListB::new(2), key("a_2"))
        .await
        .unwrap()
        .id;
    let processing = jobq
        .enqueue_with(ListA::new(3), key("ab"))
        .await
        .unwrap()
        .id;
    // Claim the three above (claim order is id order here), settle two.
    let claims = __store::claim(&jobq, &queue, 3, Duration::from_secs(60), "list-test")
        .await
        .unwrap();
    assert_eq!(
        claims.iter().map(|c| c.id).collect::<Vec<_>>(),
        [done, failed, processing]
    );
    __store::complete(&jobq, &[(claims[0].id, claims[0].token)])
        .await
        .unwrap();
    assert!(
        __store::transition(
            &jobq,
            (claims[1].id, claims[1].token),
            true,
            Duration::ZERO,
            false,
            Some("for good".into()),
        )
        .await
        .unwrap()
    );
    let cancelled = jobq
        .enqueue_with(ListB::new(4), on(&queue))
        .await
        .unwrap()
        .id;
    assert!(jobq.cancel(cancelled).await.unwrap());
    let pending_a = jobq
        .enqueue_with(ListA::new(5), on(&queue))
        .await
        .unwrap()
        .id;
    let pending_b = jobq
        .enqueue_with(
            ListB::new(6),
            on(&queue).idempotency_key(format!("{queue}x")),
        )
        .await
        .unwrap()
        .id;
    Rows {
        jobq,
        queue,
        prefix,
        done,
        failed,
        processing,
        cancelled,
        pending_a,
        pending_b,
    }
}

async fn a_queue_filter_lists_that_queues_jobs_only(db: TestDb) {
    let rows = rows(&db).await;
    assert_eq!(rows.ids(&rows.in_queue()).await, rows.all());
    let other = JobFilter::new().queue(unique_queue("list-empty"));
    assert!(rows.ids(&other).await.is_empty());
}

async fn a_status_filter_lists_the_jobs_in_that_status(db: TestDb) {
    let rows = rows(&db).await;
    for (status, expected) in [
        (JobStatus::Pending, vec![rows.pending_a, rows.pending_b]),
        (JobStatus::Processing, vec![rows.processing]),
        (JobStatus::Done, vec![rows.done]),
        (JobStatus::Failed, vec![rows.failed]),
        (JobStatus::Cancelled, vec![rows.cancelled]),
    ] {
        assert_eq!(
            rows.ids(&rows.in_queue().status(status)).await,
            expected,
            "{status}"
        );
    }
}

async fn a_job_name_filter_lists_the_jobs_of_that_name(db: TestDb) {
    let rows = rows(&db).await;
    assert_eq!(
        rows.ids(&rows.in_queue().job_name("list_a")).await,
        [rows.done, rows.processing, rows.pending_a]
    );
    assert_eq!(
        rows.ids(
            &rows
                .in_queue()
                .job_name("list_b")
                .status(JobStatus::Pending)
        )
        .await,
        [rows.pending_b]
    );
}

/// `%` and `_` in a prefix are the characters themselves, not wildcards:
/// `…/a%` matches `…/a%1` only, `…/a_` matches `…/a_2` only.
async fn a_key_prefix_matches_byte_for_byte_without_wildcards(db: TestDb) {
    let rows = rows(&db).await;
    let by_prefix = |p: &str| JobFilter::new().key_prefix(format!("{}{p}", rows.prefix));
    assert_eq!(rows.ids(&by_prefix("a%")).await, [rows.done]);
    assert_eq!(rows.ids(&by_prefix("a_")).await, [rows.failed]);
    assert_eq!(
        rows.ids(&by_prefix("a")).await,
        [rows.done, rows.failed, rows.processing]
    );
    assert_eq!(rows.ids(&by_prefix("")).await.len(), 3, "the prefix itself");
    assert!(rows.ids(&by_prefix("b")).await.is_empty());
    // `{queue}x` does not start with `{queue}/`, though it sorts right after
    // `{queue}/…` keys' neighbours.
    let whole = JobFilter::new().key_prefix(format!("{}x", rows.queue));
    assert_eq!(rows.ids(&whole).await, [rows.pending_b]);
}

async fn a_created_range_lists_the_jobs_enqueued_in_it(db: TestDb) {
    let rows = rows(&db).await;
    let jobq = &rows.jobq;
    let last = jobq.job(rows.pending_b).await.unwrap().unwrap().created_at;
    let later = jobq
        .enqueue_with(ListA::new(7), on(&rows.queue))
        .await
        .unwrap()
        .id;
    let later_at = jobq.job(later).await.unwrap().unwrap().created_at;
    assert!(later_at > last, "{later_at} after {last}");
    let mut all = rows.all();
    all.push(later);
    assert_eq!(
        rows.ids(&rows.in_queue().created(None, Some(later_at)))
            .await,
        rows.all()
    );
    assert_eq!(
        rows.ids(&rows.in_queue().created(Some(later_at), None))
            .await,
        [later]
    );
    assert_eq!(
        rows.ids(&rows.in_queue().created(Some(last), Some(later_at)))
            .await,
        [rows.pending_b]
    );
    let far = chrono::DateTime::<chrono::Utc>::MIN_UTC;
    assert_eq!(
        rows.ids(&rows.in_queue().created(Some(far), None)).await,
        all
    );
    assert!(
        rows.ids(&rows.in_queue().created(None, Some(far)))
            .await
            .is_empty()
    );
    // A count reads the same range of ids.
    let count = |filter| async move { jobq.count_where(&filter).await.unwrap() };
    assert_eq!(
        count(rows.in_queue().created(Some(last), Some(later_at))).await,
        1
    );
    assert_eq!(
        count(rows.in_queue().created(Some(far), None)).await,
        all.len() as u64
    );
    assert_eq!(
        count(rows.in_queue().created(Some(later_at), None)).await,
        1
    );
}

async fn pages_run_newest_or_oldest_first(db: TestDb) {
    let rows = rows(&db).await;
    let newest = rows
        .jobq
        .list(&rows.in_queue(), Page::first(100))
        .await
        .unwrap();
    let ids: Vec<i64> = newest.jobs.iter().map(|j| j.id).collect();
    let mut expected = rows.all();
    expected.reverse();
    assert_eq!(ids, expected, "newest first is the default");
    let oldest = rows
        .jobq
        .list(&rows.in_queue(), Page::first(100).order(Order::OldestFirst))
        .await
        .unwrap();
    let ids: Vec<i64> = oldest.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, rows.all());
    let done = &oldest.jobs[0];
    assert_eq!(
        (done.status, done.queue.as_str(), done.job_name.as_str()),
        (JobStatus::Done, rows.queue.as_str(), "list_a")
    );
}

/// A limit of 0 is taken as 1; the cursor of a full page leads on.
async fn a_page_holds_at_least_one_job(db: TestDb) {
    let rows = rows(&db).await;
    let page = rows
        .jobq
        .list(&rows.in_queue(), Page::first(0))
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
    let next = page.next.expect("more after one");
    assert_eq!(next.last_id(), rows.pending_b);
    assert_eq!(
        next.to_string().parse::<jobq_runtime::Cursor>().unwrap(),
        next
    );
}

/// Pages of 10 over 25 jobs, 5 more enqueued between each two pages: newest
/// first, the later ones are not in the pages (they are newer than the
/// first); oldest first they come at the end; no job is repeated or left out.
async fn paging_neither_repeats_nor_skips_with_inserts_between_pages(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("list-paging");
    let enqueue = |n: u64| {
        let jobq = jobq.clone();
        let queue = queue.clone();
        async move {
            let jobs = (0..n).map(|i| (ListA::new(i), on(&queue)));
            jobq_tests::enqueue_ids(&jobq, jobs).await
        }
    };
    let original = enqueue(25).await;
    let filter = JobFilter::new().queue(&queue);
    for order in [Order::NewestFirst, Order::OldestFirst] {
        let mut seen = Vec::new();
        let mut added = Vec::new();
        let mut cursor = None;
        loop {
            let page = jobq
                .list(&filter, Page::first(10).order(order).after(cursor))
                .await
                .unwrap();
            assert!(page.jobs.len() <= 10);
            seen.extend(page.jobs.iter().map(|j| j.id));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
            added.extend(enqueue(5).await);
            assert!(added.len() < 200, "paging does not end");
        }
        let unique: HashSet<i64> = seen.iter().copied().collect();
        assert_eq!(
            unique.len(),
            seen.len(),
            "{order:?}: no job twice: {seen:?}"
        );
        let mut expected = original.clone();
        match order {
            Order::NewestFirst => {
                expected.reverse();
                assert_eq!(seen, expected, "{order:?}");
            }
            _ => {
                let before: Vec<i64> = seen
                    .iter()
                    .copied()
                    .filter(|id| original.contains(id))
                    .collect();
                assert_eq!(before, expected, "{order:?}: every original job, in order");
                let mut sorted = seen.clone();
                sorted.sort_unstable();
                assert_eq!(seen, sorted, "{order:?}: ascending");
            }
        }
    }
}

async fn filters_are_checked_like_the_jobs_they_name(db: TestDb) {
    let jobq = db.jobq().await;
    let cases = [
        (JobFilter::new().queue(""), "queue name"),
        (JobFilter::new().queue("a\0b"), "NUL"),
        (JobFilter::new().job_name("x".repeat(300)), "job name"),
        (JobFilter::new().key_prefix(""), "key prefix"),
        (JobFilter::new().key_prefix("k".repeat(256)), "key prefix"),
        (JobFilter::new().key_prefix("a\0"), "NUL"),
    ];
    for (filter, part) in cases {
        let message = invalid(jobq.list(&filter, Page::default()).await);
        assert!(message.contains(part), "{message}");
        invalid(jobq.count_where(&filter).await);
        invalid(jobq.retry_where(&filter).await);
        invalid(jobq.cancel_where(&filter).await);
    }
}

jobq_tests::on_every_backend!(
    a_queue_filter_lists_that_queues_jobs_only,
    a_status_filter_lists_the_jobs_in_that_status,
    a_job_name_filter_lists_the_jobs_of_that_name,
    a_key_prefix_matches_byte_for_byte_without_wildcards,
    a_created_range_lists_the_jobs_enqueued_in_it,
    pages_run_newest_or_oldest_first,
    a_page_holds_at_least_one_job,
    paging_neither_repeats_nor_skips_with_inserts_between_pages,
    filters_are_checked_like_the_jobs_they_name,
);
