//! The claim-ahead buffer is bounded by payload bytes as well as rows: a
//! queue of large payloads does not buffer past `claim_ahead_bytes`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jobq_runtime::{Enqueue, JobContext, State, Worker, job};
use jobq_tests::{Recorder, TestDb, fixture, wait_until};

#[job(name = "ahead_large")]
async fn large(ctx: &JobContext, recorder: State<Recorder>, data: String) {
    let _ = data;
    recorder.record(ctx.id(), ctx.attempt());
}

const PAYLOAD: usize = 64 << 10;
const BUDGET: usize = 1 << 20;
const CONCURRENCY: usize = 16;
const JOBS: usize = 400;

async fn a_queue_of_large_payloads_buffers_no_more_than_the_byte_budget(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "ahead").await;
    let data = "x".repeat(PAYLOAD);
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(50) {
        let jobs = chunk
            .iter()
            .map(|_| (Large { data: data.clone() }, Enqueue::new().queue(&queue)));
        jobq.enqueue_many_with(jobs).await.expect("enqueue");
    }
    let handle = Arc::new(
        Worker::builder(jobq.clone())
            .queue_unchecked(&queue, CONCURRENCY)
            .state(recorder.clone())
            .poll_interval(Duration::from_millis(20))
            .claim_ahead_bytes(BUDGET)
            .build()
            .expect("build")
            .start(),
    );
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (handle, most) = (Arc::clone(&handle), Arc::clone(&most));
        tokio::spawn(async move {
            loop {
                most.fetch_max(handle.buffered_payload_bytes(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
    };
    wait_until("every job ran", Duration::from_secs(60), || async {
        recorder.totals().0 == JOBS
    })
    .await;
    sampler.abort();
    let _ = sampler.await;
    // The budget, plus the rows claimed for free slots, which start at once.
    let bound = BUDGET + CONCURRENCY * PAYLOAD;
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= bound,
        "buffered up to {most} payload bytes; bound {bound}"
    );
    let handle = Arc::into_inner(handle).expect("the only handle");
    handle
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}

jobq_tests::on_every_backend!(a_queue_of_large_payloads_buffers_no_more_than_the_byte_budget);
