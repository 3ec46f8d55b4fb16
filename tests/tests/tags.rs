//! A job's metadata and tags, on every backend (and Galera): stored with
//! the job by `enqueue`, `enqueue_many` and `enqueue_in` (a rolled-back
//! transaction leaves neither the job nor its tags), from `Enqueue`, from
//! `#[job(tags = [...])]` and from enqueue middleware; read back by
//! `Jobq::job` and by the handler's context; found by a listing's tag
//! filter; kept by a duplicate's existing job; gone with a pruned job (the
//! tags' index rows cascade). Bad tags and metadata are refused with a
//! clear error and store nothing. (The tag filter's plan at 1,000,000 rows
//! is in `list_plans.rs`.)

use std::time::Duration;

use jobq_runtime::middleware::{BoxError, EnqueueLayer, NewRow};
use jobq_runtime::{
    Backend, Enqueue, Error, JobContext, JobError, JobFilter, JobStatus, Jobq, Page, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, fixture, invalid, on, start_worker, stop, wait_for_status};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);

/// What the handler saw of its job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Seen {
    metadata: Option<Value>,
    tags: Vec<String>,
    key: String,
}

/// Returns what its context says of the job's metadata and tags; fails for
/// good when asked to.
#[job(name = "tags_import", tags = ["import"], max_attempts = 1)]
async fn import(ctx: &JobContext, fail: bool) -> Result<Seen, JobError> {
    if fail {
        return Err(JobError::permanent("asked to fail"));
    }
    Ok(Seen {
        metadata: ctx.metadata().cloned(),
        tags: ctx.tags().to_vec(),
        key: ctx.idempotency_key(),
    })
}

/// The ids of `filter`'s jobs, oldest first.
async fn listed(jobq: &Jobq, filter: JobFilter) -> Vec<i64> {
    let page = jobq
        .list(
            &filter,
            Page::first(100).order(jobq_runtime::Order::OldestFirst),
        )
        .await
        .unwrap();
    page.jobs.iter().map(|j| j.id).collect()
}

/// Rows of the tags' index with `tag`.
async fn index_rows(jobq: &Jobq, tag: &str) -> i64 {
    let db = Db::of(jobq);
    let sql = db.pick(
        "SELECT COUNT(*) FROM jobq_job_tags WHERE tag = ?",
        "SELECT COUNT(*) FROM jobq_job_tags WHERE tag = $1",
        "SELECT COUNT(*) FROM jobq_job_tags WHERE tag = ?1",
    );
    let rows: Vec<(i64,)> = db.fetch_all(sql, &[Arg::Text(tag.into())]).await.unwrap();
    rows[0].0
}

/// `enqueue_in_with` on a transaction of the handle's own pool, committed
/// or rolled back.
async fn enqueue_in(jobq: &Jobq, options: Enqueue, commit: bool) -> i64 {
    macro_rules! in_tx {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = jobq
                .enqueue_in_with(&mut *tx, Import::new(false), options)
                .await
                .unwrap();
            if commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            e.id
        }};
    }
    match jobq.backend() {
        Backend::MySql => in_tx!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => in_tx!(jobq.pg_pool().unwrap()),
        _ => in_tx!(jobq.sqlite_pool().unwrap()),
    }
}

async fn metadata_and_tags_round_trip_and_filter(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "tags").await;
    // Tags of this test's own (tests of every backend share a tag space).
    let tag = |t: &str| format!("{queue}:{t}");
    let with = |tags: &[&str]| on(&queue).tags(tags.iter().map(|t| tag(t)));
    let a = jobq
        .enqueue_with(
            Import::new(false),
            with(&["blue", "x"]).metadata(json!({"who": "a", "n": [1, 2]})),
        )
        .await
        .unwrap()
        .id;
    let b = jobq
        .enqueue_with(Import::new(false), with(&["blue", "blue"]))
        .await
        .unwrap()
        .id;
    let plain = jobq
        .enqueue_with(Import::new(false), on(&queue))
        .await
        .unwrap()
        .id;
    let batch = jobq
        .enqueue_many_with([
            (Import::new(false), with(&["blue"])),
            (Import::new(false), on(&queue)),
            (
                Import::new(false),
                on(&queue).metadata(json!({"who": "batch"})),
            ),
        ])
        .await
        .unwrap();
    let committed = enqueue_in(&jobq, with(&["tx"]), true).await;
    let rolled_back = enqueue_in(&jobq, with(&["gone"]), false).await;
    // A duplicate key: the existing job keeps its own tags and metadata.
    let keyed = || with(&["first"]).idempotency_key(format!("{queue}-k"));
    let first = jobq
        .enqueue_with(Import::new(false), keyed())
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(
            Import::new(false),
            with(&["second"])
                .idempotency_key(format!("{queue}-k"))
                .metadata(json!({"who": "again"})),
        )
        .await
        .unwrap();
    assert_eq!((again.id, again.duplicate), (first.id, true));

    let info = jobq.job(a).await.unwrap().unwrap();
    assert_eq!(info.tags, ["import".to_owned(), tag("blue"), tag("x")]);
    assert_eq!(info.metadata, Some(json!({"who": "a", "n": [1, 2]})));
    let info = jobq.job(b).await.unwrap().unwrap();
    assert_eq!(info.tags, ["import".to_owned(), tag("blue")], "once each");
    assert_eq!(info.metadata, None);
    let info = jobq.job(plain).await.unwrap().unwrap();
    assert_eq!(
        (info.tags, info.metadata),
        (vec!["import".to_owned()], None)
    );
    let info = jobq.job(batch[2].id).await.unwrap().unwrap();
    assert_eq!(info.metadata, Some(json!({"who": "batch"})));
    let info = jobq.job(first.id).await.unwrap().unwrap();
    assert_eq!(info.tags, ["import".to_owned(), tag("first")]);
    assert_eq!(
        info.metadata, None,
        "the duplicate's metadata is not stored"
    );

    let blue = JobFilter::new().tag(tag("blue"));
    assert_eq!(listed(&jobq, blue.clone()).await, [a, b, batch[0].id]);
    assert_eq!(jobq.count_where(&blue).await.unwrap(), 3);
    assert_eq!(
        listed(&jobq, blue.clone().status(JobStatus::Pending).queue(&queue)).await,
        [a, b, batch[0].id],
        "with the other filters"
    );
    assert_eq!(
        listed(&jobq, JobFilter::new().tag(tag("tx"))).await,
        [committed]
    );
    assert!(
        listed(&jobq, JobFilter::new().tag(tag("second")))
            .await
            .is_empty()
    );
    // SQLite may hand the rolled-back id out again (to a later job here).
    let reused = jobq.job(rolled_back).await.unwrap();
    assert!(
        reused.is_none_or(|j| !j.tags.contains(&tag("gone"))),
        "the rolled-back job is gone"
    );
    assert_eq!(
        index_rows(&jobq, &tag("gone")).await,
        0,
        "rolled back with its job"
    );
    assert!(
        listed(&jobq, JobFilter::new().tag(tag("gone")))
            .await
            .is_empty()
    );
    // A list page carries the tags, not the metadata.
    let page = jobq.list(&blue, Page::first(1)).await.unwrap();
    assert!(!page.jobs[0].tags.is_empty() && page.jobs[0].metadata.is_none());

    // A key and metadata that need escaping, as MySQL's claim hands them
    // over in one JSON array.
    let odd_key = format!("{queue}-\"q\\ü\n'");
    let odd = jobq
        .enqueue_with(
            Import::new(false),
            with(&["odd \"tag\""])
                .idempotency_key(odd_key.clone())
                .metadata(json!({"q": "\"\\\u{1}ü", "null": null})),
        )
        .await
        .unwrap()
        .id;

    // The handler sees them as stored.
    let worker = start_worker(&jobq, &queue, 4);
    for id in [a, b, plain, committed, odd] {
        wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    }
    stop(worker).await;
    let seen = jobq.output::<Import>(a).await.unwrap().unwrap();
    assert_eq!(
        seen,
        Seen {
            metadata: Some(json!({"who": "a", "n": [1, 2]})),
            tags: vec!["import".to_owned(), tag("blue"), tag("x")],
            key: format!("jobq:tags_import:{a}"),
        }
    );
    let seen = jobq.output::<Import>(odd).await.unwrap().unwrap();
    assert_eq!(
        seen,
        Seen {
            metadata: Some(json!({"q": "\"\\\u{1}ü", "null": null})),
            tags: vec!["import".to_owned(), tag("odd \"tag\"")],
            key: odd_key,
        }
    );
    let seen = jobq.output::<Import>(plain).await.unwrap().unwrap();
    assert_eq!(
        (seen.metadata, seen.tags),
        (None, vec!["import".to_owned()])
    );
}

/// A pruned job's rows in the tags' index go with it (the foreign key
/// cascades the prune's delete).
async fn a_pruned_jobs_tags_go_with_it(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "tags_prune").await;
    let tag = format!("{queue}:pruned");
    let id = jobq
        .enqueue_with(Import::new(true), on(&queue).tag(&tag))
        .await
        .unwrap()
        .id;
    let worker = start_worker(&jobq, &queue, 1);
    wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(worker).await;
    assert_eq!(index_rows(&jobq, &tag).await, 1);
    assert!(jobq.prune_failed(Duration::ZERO).await.unwrap() >= 1);
    assert!(jobq.job(id).await.unwrap().is_none());
    assert_eq!(index_rows(&jobq, &tag).await, 0, "cascaded");
}

/// Adds the enqueuer's context to every row, as trace propagation does.
struct Stamp;

impl EnqueueLayer for Stamp {
    fn enqueue(&self, row: &mut NewRow<'_>) -> Result<(), BoxError> {
        row.insert_metadata(
            "traceparent",
            json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        let tag = format!("{}:stamped", row.queue());
        row.add_tag(tag);
        Ok(())
    }
}

async fn enqueue_middleware_adds_metadata_and_tags(db: TestDb) {
    let (plain, queue, _) = fixture(&db, "tags_layer").await;
    let jobq = plain.clone().with_enqueue_layer(Stamp);
    let id = jobq
        .enqueue_with(
            Import::new(false),
            on(&queue).metadata(json!({"who": "me"})),
        )
        .await
        .unwrap()
        .id;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        info.metadata,
        Some(json!({
            "who": "me",
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        }))
    );
    assert_eq!(info.tags, ["import".to_owned(), format!("{queue}:stamped")]);
    let found = listed(&jobq, JobFilter::new().tag(format!("{queue}:stamped"))).await;
    assert_eq!(found, [id]);
}

async fn bad_tags_and_metadata_are_refused_and_store_nothing(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "tags_bad").await;
    let too_many: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    let cases: Vec<(Enqueue, &str)> = vec![
        (on(&queue).tags(too_many), "at most 16 tags"),
        (on(&queue).tag(""), "at most 16 tags, each 1 to 100 bytes"),
        (on(&queue).tag("x".repeat(101)), "each 1 to 100 bytes"),
        (on(&queue).tag("a\0b"), "without NUL"),
        (on(&queue).metadata(json!([1, 2])), "is not a JSON object"),
        (
            on(&queue).metadata(json!({"big": "x".repeat(64 * 1024)})),
            "is too large",
        ),
    ];
    for (options, says) in cases {
        let message = invalid(jobq.enqueue_with(Import::new(false), options).await);
        assert!(
            message.contains(says) && message.contains("tags_import"),
            "{message}"
        );
    }
    // The type's own tag and 15 more is the most.
    let fifteen: Vec<String> = (0..15).map(|i| format!("{queue}:{i}")).collect();
    jobq.enqueue_with(Import::new(false), on(&queue).tags(fifteen))
        .await
        .unwrap();
    let sixteen: Vec<String> = (0..16).map(|i| format!("{queue}:{i}")).collect();
    let message = invalid(
        jobq.enqueue_with(Import::new(false), on(&queue).tags(sixteen))
            .await,
    );
    assert!(message.contains("at most 16 tags"), "{message}");
    // A batch with one bad row stores none of it.
    let batch = jobq
        .enqueue_many_with([
            (Import::new(false), on(&queue).tag(format!("{queue}:ok"))),
            (Import::new(false), on(&queue).tag("")),
        ])
        .await;
    assert!(matches!(batch, Err(Error::Invalid(_))), "{batch:?}");
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
    // A filter by a tag that cannot be one.
    let bad = jobq.list(&JobFilter::new().tag(""), Page::first(1)).await;
    assert!(matches!(bad, Err(Error::Invalid(_))), "{bad:?}");
}

jobq_tests::on_every_backend!(
    metadata_and_tags_round_trip_and_filter,
    a_pruned_jobs_tags_go_with_it,
    enqueue_middleware_adds_metadata_and_tags,
    bad_tags_and_metadata_are_refused_and_store_nothing
);
jobq_tests::on_every_backend!(@backend galera, [tokio {}],
    metadata_and_tags_round_trip_and_filter
);
