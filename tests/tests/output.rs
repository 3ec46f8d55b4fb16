//! A job's output, on every backend (and Galera): what a `#[job]` fn
//! returns on success is stored with the job by the statement that marks
//! it `done` — read back typed (`Jobq::output`) and as JSON
//! (`JobInfo::output`); an output over `MAX_OUTPUT_BYTES` fails the attempt
//! with a message naming the cap and stores nothing; only the attempt that
//! holds the row can complete it with an output; jobs that return nothing
//! keep the batched completion, beside jobs that return something.

use std::time::Duration;

use jobq_runtime::__store;
use jobq_runtime::{Error, JobContext, JobStatus, Jobq, MAX_OUTPUT_BYTES, Worker, job};
use jobq_tests::{TestDb, fixture, on, stop, wait_for_status};
use serde::{Deserialize, Serialize};

const LONG: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Bill {
    order: u64,
    lines: Vec<String>,
    note: String,
}

/// Returns a struct, in a `Result`.
#[job(name = "output_receipt")]
async fn receipt(order: u64) -> Result<Bill, String> {
    Ok(Bill {
        order,
        lines: vec!["1 × tea".into(), "2 × 🍰".into()],
        // A NUL and a quote: JSON escapes them, every backend stores them.
        note: "thanks\u{0} \"again\"".into(),
    })
}

/// Returns a bare value, taking its context by value.
#[job(name = "output_square")]
async fn square(ctx: JobContext, n: u64) -> u64 {
    let _ = ctx.id();
    n * n
}

/// Returns an `Option`, taking its context by reference: `None` stores nothing.
#[job(name = "output_maybe")]
async fn maybe(ctx: &JobContext, n: u64) -> Result<Option<u64>, String> {
    let _ = ctx.attempt();
    Ok((n % 2 == 0).then_some(n))
}

/// Returns nothing.
#[job(name = "output_none")]
async fn nothing(n: u64) -> Result<(), String> {
    let _ = n;
    Ok(())
}

/// Returns more than the cap allows.
#[job(name = "output_huge", max_attempts = 1)]
async fn huge() -> String {
    "x".repeat(MAX_OUTPUT_BYTES)
}

fn worker(jobq: &Jobq, queue: &str) -> jobq_runtime::WorkerHandle {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 8)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start()
}

async fn an_output_round_trips_typed_and_as_json(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "output").await;
    let handle = worker(&jobq, &queue);
    let a = jobq
        .enqueue_with(Receipt::new(7), on(&queue))
        .await
        .unwrap()
        .id;
    let b = jobq
        .enqueue_with(Square::new(12), on(&queue))
        .await
        .unwrap()
        .id;
    let a_info = wait_for_status(&jobq, a, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, b, JobStatus::Done, LONG).await;
    stop(handle).await;
    let expected = Bill {
        order: 7,
        lines: vec!["1 × tea".into(), "2 × 🍰".into()],
        note: "thanks\u{0} \"again\"".into(),
    };
    assert_eq!(
        jobq.output::<Receipt>(a).await.unwrap(),
        Some(expected.clone())
    );
    assert_eq!(
        a_info.output.as_deref(),
        Some(serde_json::to_string(&expected).unwrap().as_str()),
        "as the handler's serializer wrote it"
    );
    assert_eq!(jobq.output::<Square>(b).await.unwrap(), Some(144));
    // Asked as another type: a clear error naming the job and the type.
    let wrong = jobq.output::<Square>(a).await.unwrap_err();
    assert!(
        matches!(&wrong, Error::Output { id, .. } if *id == a),
        "{wrong:?}"
    );
    assert!(
        wrong.to_string().contains("output_receipt") && wrong.to_string().contains("u64"),
        "{wrong}"
    );
    // No such job: none.
    assert_eq!(jobq.output::<Square>(i64::MAX).await.unwrap(), None);
}

/// Many jobs, some with an output and some without, settled together: each
/// done, each with its own output or none.
async fn jobs_with_and_without_output_settle_together(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "output_mixed").await;
    let mut maybes = Vec::new();
    let mut nothings = Vec::new();
    for n in 0..60u64 {
        maybes.push((
            n,
            jobq.enqueue_with(Maybe::new(n), on(&queue))
                .await
                .unwrap()
                .id,
        ));
        nothings.push(
            jobq.enqueue_with(Nothing::new(n), on(&queue))
                .await
                .unwrap()
                .id,
        );
    }
    let handle = worker(&jobq, &queue);
    jobq_tests::wait_for_done(&jobq, &queue, 120, LONG).await;
    stop(handle).await;
    for (n, id) in maybes {
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Done);
        let want = (n % 2 == 0).then(|| n.to_string());
        assert_eq!(info.output, want, "job {id} (n = {n})");
        assert_eq!(
            jobq.output::<Maybe>(id).await.unwrap(),
            (n % 2 == 0).then_some(Some(n))
        );
    }
    for id in nothings {
        assert_eq!(jobq.job(id).await.unwrap().unwrap().output, None);
    }
}

async fn an_output_over_the_cap_fails_the_attempt_and_says_so(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "output_cap").await;
    let handle = worker(&jobq, &queue);
    let id = jobq.enqueue_with(Huge::new(), on(&queue)).await.unwrap().id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(handle).await;
    let error = info.last_error.unwrap_or_default();
    assert!(
        error.contains(&format!(
            "the job's output is {} bytes of JSON, over the cap of {MAX_OUTPUT_BYTES} bytes",
            MAX_OUTPUT_BYTES + 2
        )),
        "{error}"
    );
    assert_eq!(info.output, None);
}

/// Only the attempt that holds the row completes it with its output: an
/// attempt whose lease expired (reaped, claimed again) completes nothing,
/// and the holder's output is the one kept.
async fn a_stale_attempt_cannot_complete_with_its_output(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "output_fence").await;
    let id = jobq
        .enqueue_with(Square::new(3), on(&queue))
        .await
        .unwrap()
        .id;
    let stale = __store::claim(&jobq, &queue, 1, Duration::ZERO, "stale")
        .await
        .unwrap();
    assert_eq!(stale.len(), 1);
    jobq_tests::wait_until(
        "the stale claim's lease ended and it was reaped",
        LONG,
        async || __store::reap(&jobq, &queue, 10).await.unwrap() == 1,
    )
    .await;
    let holder = __store::claim(&jobq, &queue, 1, LONG, "holder")
        .await
        .unwrap();
    assert_eq!(holder.len(), 1);
    assert!(
        !__store::complete_with_output(&jobq, (id, stale[0].token), "1")
            .await
            .unwrap()
    );
    assert_eq!(
        jobq.job(id).await.unwrap().unwrap().status,
        JobStatus::Processing
    );
    assert!(
        __store::complete_with_output(&jobq, (id, holder[0].token), "9")
            .await
            .unwrap()
    );
    // Done: a late try of either changes nothing.
    assert!(
        !__store::complete_with_output(&jobq, (id, stale[0].token), "1")
            .await
            .unwrap()
    );
    assert!(
        !__store::complete_with_output(&jobq, (id, holder[0].token), "2")
            .await
            .unwrap()
    );
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        (info.status, info.output.as_deref()),
        (JobStatus::Done, Some("9"))
    );
    assert_eq!(jobq.output::<Square>(id).await.unwrap(), Some(9));
}

jobq_tests::on_every_backend!(
    an_output_round_trips_typed_and_as_json,
    jobs_with_and_without_output_settle_together,
    an_output_over_the_cap_fails_the_attempt_and_says_so,
    a_stale_attempt_cannot_complete_with_its_output
);
jobq_tests::on_every_backend!(@backend galera, [tokio {}],
    an_output_round_trips_typed_and_as_json,
    a_stale_attempt_cannot_complete_with_its_output
);
