//! Middleware (`jobq_runtime::middleware`), on every backend: a layer
//! around the handler call sees each attempt before it runs and its
//! outcome after, layers nest in the order they were added, one can fail
//! the attempt without calling the handler and one can change the outcome;
//! a layer on enqueue sees each row before it is stored, can change it, and
//! can refuse it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::middleware::{
    Attempt, BoxError, EnqueueLayer, JobLayer, LayerFuture, NewRow, Next,
};
use jobq_runtime::{Error, JobContext, JobError, JobStatus, Jobq, State, Worker, job};
use jobq_tests::{TestDb, fixture, on, stop, wait_for_status};

const LONG: Duration = Duration::from_secs(20);

/// What the layers and the handlers did, in order, by job id.
#[derive(Debug, Clone, Default)]
struct Log(Arc<Mutex<Vec<(i64, String)>>>);

impl Log {
    fn push(&self, id: i64, entry: impl Into<String>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, entry.into()));
    }

    /// What was logged for the job `id`.
    fn of(&self, id: i64) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(logged, _)| *logged == id)
            .map(|(_, entry)| entry.clone())
            .collect()
    }
}

#[job(name = "seam_flaky", max_attempts = 3, retry = ["10ms"])]
async fn flaky(ctx: JobContext, log: State<Log>, fail_until: u32) -> Result<(), String> {
    log.push(ctx.id(), format!("handler {}", ctx.attempt()));
    if ctx.attempt() <= fail_until {
        return Err(format!("failed on attempt {}", ctx.attempt()));
    }
    Ok(())
}

#[job(name = "seam_plain")]
async fn plain(ctx: JobContext, log: State<Log>, n: u64) {
    log.push(ctx.id(), format!("handler n={n}"));
}

/// Logs what it sees of each attempt before the handler and its outcome after.
struct Watching {
    label: &'static str,
    log: Log,
}

impl JobLayer for Watching {
    fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a> {
        Box::pin(async move {
            let ctx = attempt.context();
            self.log.push(
                ctx.id(),
                format!(
                    "{} before: {} on {}, attempt {}, {}",
                    self.label,
                    ctx.name(),
                    ctx.queue(),
                    ctx.attempt(),
                    attempt.payload()
                ),
            );
            let outcome = next.run().await;
            let seen = match &outcome {
                Ok(()) => "ok".to_owned(),
                Err(error) => format!("error: {}", error.message()),
            };
            self.log
                .push(ctx.id(), format!("{} after: {seen}", self.label));
            outcome
        })
    }
}

/// Fails the attempts of payloads with `"n":13` without calling the handler.
struct Refusing {
    log: Log,
}

impl JobLayer for Refusing {
    fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a> {
        Box::pin(async move {
            if attempt.payload().contains(r#""n":13"#) {
                self.log.push(attempt.context().id(), "refused");
                return Err(JobError::permanent("refused by a layer"));
            }
            next.run().await
        })
    }
}

/// Panics in the first attempt of every job, before calling the handler.
struct PanickingFirst;

impl JobLayer for PanickingFirst {
    fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a> {
        Box::pin(async move {
            assert!(attempt.context().attempt() > 1, "the layer's own bug");
            next.run().await
        })
    }
}

/// Turns a failed attempt into a success ("errors of this job are fine").
struct Forgiving {
    log: Log,
}

impl JobLayer for Forgiving {
    fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a> {
        Box::pin(async move {
            match next.run().await {
                Err(error) => {
                    let id = attempt.context().id();
                    self.log.push(id, format!("forgiven: {}", error.message()));
                    Ok(())
                }
                ok => ok,
            }
        })
    }
}

/// A worker on `queue` with the log its jobs need.
fn worker(jobq: &Jobq, queue: &str, log: &Log) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 2)
        .state(log.clone())
        .poll_interval(Duration::from_millis(50))
}

async fn a_job_layer_sees_each_attempt_before_its_handler_and_its_outcome_after(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "seam-attempt").await;
    let log = Log::default();
    let watching = Watching {
        label: "layer",
        log: log.clone(),
    };
    let handle = worker(&jobq, &queue, &log)
        .job_layer(watching)
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Flaky::new(1), on(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    let before = |attempt| {
        format!("layer before: seam_flaky on {queue}, attempt {attempt}, {{\"fail_until\":1}}")
    };
    assert_eq!(
        log.of(id),
        [
            before(1),
            "handler 1".to_owned(),
            "layer after: error: failed on attempt 1".to_owned(),
            before(2),
            "handler 2".to_owned(),
            "layer after: ok".to_owned(),
        ]
    );
}

async fn job_layers_nest_in_order_and_one_may_fail_the_attempt_without_the_handler(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "seam-refuse").await;
    let log = Log::default();
    let handle = worker(&jobq, &queue, &log)
        .job_layer(Watching {
            label: "outer",
            log: log.clone(),
        })
        .job_layer(Refusing { log: log.clone() })
        .build()
        .unwrap()
        .start();
    let refused = jobq
        .enqueue_with(Plain::new(13), on(&queue))
        .await
        .unwrap()
        .id;
    let passed = jobq
        .enqueue_with(Plain::new(1), on(&queue))
        .await
        .unwrap()
        .id;
    let refused_row = wait_for_status(&jobq, refused, JobStatus::Failed, LONG).await;
    wait_for_status(&jobq, passed, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(
        refused_row.last_error.as_deref(),
        Some("refused by a layer")
    );
    assert_eq!(refused_row.attempts, 1);
    assert_eq!(
        log.of(refused),
        [
            format!("outer before: seam_plain on {queue}, attempt 1, {{\"n\":13}}"),
            "refused".to_owned(),
            "outer after: error: refused by a layer".to_owned(),
        ],
        "the handler never ran"
    );
    assert_eq!(
        log.of(passed),
        [
            format!("outer before: seam_plain on {queue}, attempt 1, {{\"n\":1}}"),
            "handler n=1".to_owned(),
            "outer after: ok".to_owned(),
        ]
    );
}

async fn a_job_layer_that_panics_fails_the_attempt_to_be_retried(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "seam-panic").await;
    let log = Log::default();
    let handle = worker(&jobq, &queue, &log)
        .job_layer(PanickingFirst)
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Flaky::new(0), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(info.attempts, 2);
    let error = info.last_error.unwrap_or_default();
    assert!(
        error.starts_with("a job layer panicked at tests/tests/seams.rs:")
            && error.contains(": the layer's own bug"),
        "{error}"
    );
    assert_eq!(
        log.of(id),
        ["handler 2"],
        "the first attempt never ran its handler"
    );
}

/// Notes each row it sees and gives it priority 7; refuses `"n":13`.
struct Stamping {
    seen: Arc<Mutex<Vec<String>>>,
}

impl EnqueueLayer for Stamping {
    fn enqueue(&self, row: &mut NewRow<'_>) -> Result<(), BoxError> {
        if row.payload().contains(r#""n":13"#) {
            return Err("unlucky number".into());
        }
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!(
                "{} on {}: {} (priority {})",
                row.job_name(),
                row.queue(),
                row.payload(),
                row.priority()
            ));
        row.set_priority(7);
        Ok(())
    }
}

async fn an_enqueue_layer_sees_each_row_before_it_is_stored_and_may_change_it(db: TestDb) {
    let (plain, queue, _) = fixture(&db, "seam-enqueue").await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let jobq = plain.clone().with_enqueue_layer(Stamping {
        seen: Arc::clone(&seen),
    });
    let one = jobq.enqueue_with(Plain::new(1), on(&queue)).await.unwrap();
    let many = jobq
        .enqueue_many_with([(Plain::new(2), on(&queue)), (Plain::new(3), on(&queue))])
        .await
        .unwrap();
    macro_rules! in_tx {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let enqueued = jobq
                .enqueue_in_with(&mut *tx, Plain::new(4), on(&queue))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            enqueued
        }};
    }
    let in_tx = match db.backend() {
        jobq_runtime::Backend::MySql => in_tx!(jobq.mysql_pool().unwrap()),
        jobq_runtime::Backend::Postgres => in_tx!(jobq.pg_pool().unwrap()),
        _ => in_tx!(jobq.sqlite_pool().unwrap()),
    };
    // The handle it was made from has no layer.
    let unstamped = plain.enqueue_with(Plain::new(5), on(&queue)).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        (1..=4)
            .map(|n| format!("seam_plain on {queue}: {{\"n\":{n}}} (priority 0)"))
            .collect::<Vec<_>>()
    );
    for enqueued in [one, many[0], many[1], in_tx] {
        let info = jobq.job(enqueued.id).await.unwrap().unwrap();
        assert_eq!(info.priority, 7, "{info:?}");
    }
    let info = jobq.job(unstamped.id).await.unwrap().unwrap();
    assert_eq!(info.priority, 0, "{info:?}");
}

async fn an_enqueue_layer_may_refuse_a_row_and_nothing_is_stored(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "seam-enqueue-refuse").await;
    let jobq = jobq.with_enqueue_layer(Stamping {
        seen: Arc::default(),
    });
    let refused = jobq.enqueue_with(Plain::new(13), on(&queue)).await;
    match refused {
        Err(Error::Refused { job, source }) => {
            assert_eq!(job, "seam_plain");
            assert_eq!(source.to_string(), "unlucky number");
        }
        other => panic!("expected Error::Refused, got {other:?}"),
    }
    let batch = jobq
        .enqueue_many_with([(Plain::new(1), on(&queue)), (Plain::new(13), on(&queue))])
        .await;
    assert!(matches!(batch, Err(Error::Refused { .. })), "{batch:?}");
    assert_eq!(
        jobq.counts(&queue).await.unwrap().total(),
        0,
        "none of the batch is stored"
    );
}

/// A layer may change the outcome: an error the handler returned becomes a
/// success, settled as one (no retry, no history entry), and the built-in
/// `Logging` layer around it sees the changed outcome.
async fn a_job_layer_may_change_the_outcome(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "seam-forgive").await;
    let log = Log::default();
    let handle = worker(&jobq, &queue, &log)
        .job_layer(jobq_runtime::middleware::Logging)
        .job_layer(Forgiving { log: log.clone() })
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Flaky::new(3), on(&queue))
        .await
        .unwrap()
        .id;
    let row = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!((row.attempts, row.last_error), (1, None));
    assert!(row.history.is_empty(), "{:?}", row.history);
    assert_eq!(
        log.of(id),
        ["handler 1", "forgiven: failed on attempt 1"],
        "the handler ran once"
    );
}

jobq_tests::on_every_backend!(
    a_job_layer_may_change_the_outcome,
    a_job_layer_sees_each_attempt_before_its_handler_and_its_outcome_after,
    job_layers_nest_in_order_and_one_may_fail_the_attempt_without_the_handler,
    a_job_layer_that_panics_fails_the_attempt_to_be_retried,
    an_enqueue_layer_sees_each_row_before_it_is_stored_and_may_change_it,
    an_enqueue_layer_may_refuse_a_row_and_nothing_is_stored,
);
