//! Live workers (`jobq_workers`): a worker registers itself when it starts
//! (host, pid, version, queues and concurrency, the jobs it can run),
//! refreshes its row with its running count, leaves at a clean shutdown,
//! and drops out within its expiry when its process is killed (its row
//! then deleted by another worker); each queue is paused, served by N
//! workers or served by none; a job enqueued by name and JSON takes the
//! defaults its live workers publish, its payload checked against the
//! published fields, and an unknown name is refused unless a queue is
//! given. On MariaDB, PostgreSQL and SQLite.

use std::time::{Duration, Instant};

use jobq_runtime::{
    Enqueue, JobContext, JobFilter, JobStatus, Jobq, QueueState, State, Worker, WorkerHandle,
    WorkerInfo, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{Gates, TestDb, WorkerProcess, invalid, on, stop, unique_queue, wait_until};
use tokio::process::Command;

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-presence-worker");
/// The presence interval of every worker here: rows expire after three.
const PRESENCE: Duration = Duration::from_millis(200);
const LONG: Duration = Duration::from_secs(30);

/// Waits on the test's gate for its own id.
#[job(
    name = "workers_gated",
    queue = "workers-gated",
    max_attempts = 7,
    key = "gated:{n}"
)]
async fn gated(ctx: JobContext, gates: State<Gates<i64>>, n: u64) {
    let _ = n;
    gates.wait(ctx.id()).await;
}

fn start(jobq: &Jobq, queues: &[&str], gates: &Gates<i64>) -> WorkerHandle {
    let mut builder = Worker::builder(jobq.clone())
        .state(gates.clone())
        .presence_interval(PRESENCE)
        .poll_interval(Duration::from_millis(50));
    for queue in queues {
        builder = builder.queue_unchecked(*queue, 3);
    }
    builder.build().expect("build").start()
}

/// The live worker `id`, if it is one.
async fn live(jobq: &Jobq, id: &str) -> Option<WorkerInfo> {
    jobq.workers()
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.worker_id == id)
}

/// A `jobq-presence-worker` process.
struct Process {
    process: WorkerProcess,
    worker_id: String,
}

impl Process {
    /// Starts one serving `queue` and waits until its worker runs.
    async fn start(db: &TestDb, queue: &str) -> Self {
        let mut command = Command::new(WORKER);
        command
            .env("JOBQ_PRESENCE_URL", db.url())
            .env("JOBQ_PRESENCE_QUEUE", queue)
            .env("JOBQ_PRESENCE_MS", PRESENCE.as_millis().to_string());
        let process = WorkerProcess::start(command, LONG).await;
        let worker_id = process.started_line().expect("its started line");
        Self { process, worker_id }
    }

    fn pid(&self) -> i64 {
        i64::from(self.process.pid().expect("running"))
    }

    /// Closes its stdin (it shuts down gracefully) and waits for it to exit.
    async fn stop(self) {
        self.process.stop(LONG).await;
    }
}

/// How many rows of `jobq_workers` are worker `id`'s, expired or not.
async fn rows_of(jobq: &Jobq, id: &str) -> i64 {
    let rows: Vec<(i64,)> = Db::of(jobq)
        .fetch_all(
            "SELECT COUNT(*) FROM jobq_workers WHERE worker_id = ?",
            &[Arg::from(id)],
        )
        .await
        .unwrap();
    rows[0].0
}

/// A worker is listed from its start with where it runs, what it serves
/// and the jobs it can run; its running count follows its jobs; it is
/// gone as soon as its shutdown returns.
async fn a_worker_registers_itself_reports_its_running_jobs_and_leaves_at_shutdown(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("workers");
    let gates = Gates::default();
    let worker = start(&jobq, &[&queue], &gates);
    let id = worker.id().to_owned();
    wait_until("the worker is listed", LONG, || async {
        live(&jobq, &id).await.is_some()
    })
    .await;
    let info = live(&jobq, &id).await.unwrap();
    assert_eq!(info.pid, i64::from(std::process::id()));
    assert!(!info.host.is_empty());
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let queues: Vec<(&str, u64)> = info
        .queues
        .iter()
        .map(|q| (q.name.as_str(), q.concurrency))
        .collect();
    assert_eq!(queues, [(queue.as_str(), 3)]);
    assert_eq!(info.running, 0);
    assert!(info.started_at <= info.last_seen && info.last_seen < info.expires_at);
    let kind = info
        .jobs
        .iter()
        .find(|k| k.name == "workers_gated")
        .expect("the worker publishes the jobs of its registry");
    assert_eq!(
        (
            kind.queue.as_str(),
            kind.max_attempts,
            kind.key_template.as_deref()
        ),
        ("workers-gated", 7, Some("gated:{n}"))
    );
    assert_eq!(kind.fields_text(), "n: u64");

    // Its running count follows its jobs, at the next refresh.
    let n = u64::from(rand::random::<u32>());
    let job = jobq.enqueue_with(Gated::new(n), on(&queue)).await.unwrap();
    wait_until("the worker reports 1 running job", LONG, || async {
        live(&jobq, &id).await.is_some_and(|w| w.running == 1)
    })
    .await;
    let seen = live(&jobq, &id).await.unwrap().last_seen;
    gates.open(job.id);
    wait_until("the worker reports 0 running jobs", LONG, || async {
        live(&jobq, &id)
            .await
            .is_some_and(|w| w.running == 0 && w.last_seen > seen)
    })
    .await;

    stop(worker).await;
    assert!(
        live(&jobq, &id).await.is_none(),
        "listed after its shutdown"
    );
    assert_eq!(rows_of(&jobq, &id).await, 0, "its row is deleted");
}

/// A queue's state: no worker, served by each worker serving it (a served
/// queue with no job is listed too), paused whatever serves it.
async fn a_queue_is_served_by_as_many_workers_as_serve_it_or_paused_or_by_none(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("served");
    let empty = unique_queue("served-empty");
    let gates = Gates::default();
    let later = on(&queue).delay(Duration::from_secs(3600));
    let n = u64::from(rand::random::<u32>());
    jobq.enqueue_with(Gated::new(n), later).await.unwrap();
    let state = |jobq: Jobq, queue: String| async move {
        let stats = jobq.stats().await.unwrap();
        stats.queue(&queue).map(|q| (q.workers, q.state()))
    };
    assert_eq!(
        state(jobq.clone(), queue.clone()).await,
        Some((0, QueueState::NoWorker))
    );
    assert_eq!(state(jobq.clone(), empty.clone()).await, None);

    let a = start(&jobq, &[&queue, &empty], &gates);
    let b = start(&jobq, &[&queue], &gates);
    wait_until("two workers serve the queue", LONG, || async {
        state(jobq.clone(), queue.clone()).await == Some((2, QueueState::Served(2)))
    })
    .await;
    let stats = jobq.stats().await.unwrap();
    assert_eq!(
        stats.queue(&queue).unwrap().state().to_string(),
        "served by 2 workers"
    );
    let served_empty = stats.queue(&empty).expect("a served queue is listed");
    assert_eq!(served_empty.state().to_string(), "served by 1 worker");
    assert_eq!(served_empty.pending(), 0);

    jobq.pause(&queue).await.unwrap();
    assert_eq!(
        state(jobq.clone(), queue.clone()).await,
        Some((2, QueueState::Paused))
    );
    jobq.resume(&queue).await.unwrap();

    stop(b).await;
    assert_eq!(
        state(jobq.clone(), queue.clone()).await,
        Some((1, QueueState::Served(1)))
    );
    stop(a).await;
    assert_eq!(
        state(jobq.clone(), queue.clone()).await,
        Some((0, QueueState::NoWorker))
    );
    assert_eq!(
        state(jobq.clone(), empty.clone()).await,
        None,
        "a queue with no job and no worker is not listed"
    );
    jobq.cancel_where(&JobFilter::new().queue(&queue))
        .await
        .unwrap();
}

/// A worker process killed with SIGKILL (no shutdown) is listed until its
/// row expires (three presence intervals after its last refresh) and not
/// after; a live worker then deletes its row.
async fn a_killed_worker_process_drops_out_within_its_expiry(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("killed");
    let gates = Gates::default();
    // Deletes expired rows at every tenth of its refreshes.
    let survivor = start(&jobq, &[&unique_queue("survivor")], &gates);
    let mut process = Process::start(&db, &queue).await;
    let id = process.worker_id.clone();
    wait_until("the worker process is listed", LONG, || async {
        live(&jobq, &id).await.is_some()
    })
    .await;
    let info = live(&jobq, &id).await.unwrap();
    assert_eq!(info.pid, process.pid());
    assert_eq!(
        jobq.stats().await.unwrap().queue(&queue).map(|q| q.workers),
        Some(1)
    );

    process.process.kill().await;
    let killed = Instant::now();
    wait_until("the killed worker drops out", LONG, || async {
        live(&jobq, &id).await.is_none()
    })
    .await;
    let took = killed.elapsed();
    // Its last refresh was before the kill: its row expired at most three
    // intervals after it. The rest is this loaded machine's reads.
    let expiry = PRESENCE * 3;
    assert!(
        took <= expiry + Duration::from_secs(2),
        "listed {took:?} after the kill; the expiry is {expiry:?}"
    );
    assert_eq!(
        jobq.stats().await.unwrap().queue(&queue).map(|q| q.workers),
        None,
        "its queue has no job and no worker left"
    );
    wait_until("a live worker deletes the expired row", LONG, || async {
        rows_of(&jobq, &id).await == 0
    })
    .await;
    stop(survivor).await;
}

/// A worker whose row was deleted while it could not refresh (as another
/// worker does once the row expired) registers again at its next refresh.
async fn a_worker_whose_row_was_deleted_registers_again(db: TestDb) {
    let jobq = db.jobq().await;
    let gates = Gates::default();
    let worker = start(&jobq, &[&unique_queue("again")], &gates);
    let id = worker.id().to_owned();
    wait_until("the worker is listed", LONG, || async {
        live(&jobq, &id).await.is_some()
    })
    .await;
    let deleted = Db::of(&jobq)
        .execute(
            "DELETE FROM jobq_workers WHERE worker_id = ?",
            &[Arg::from(id.as_str())],
        )
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    wait_until("the worker is listed again", LONG, || async {
        live(&jobq, &id).await.is_some()
    })
    .await;
    stop(worker).await;
}

/// `enqueue_json` of a job this process does not link takes what its live
/// workers publish: its queue, attempts and key template (options still
/// override), its fields checked; an unknown name is refused, naming the
/// known ones, unless a queue is given.
async fn a_job_enqueued_by_name_takes_the_defaults_its_workers_publish(db: TestDb) {
    const NAME: &str = "jobq_presence_welcome";
    let jobq = db.jobq().await;
    let queue = unique_queue("by-name");
    let process = Process::start(&db, &queue).await;
    wait_until("the worker process is listed", LONG, || async {
        live(&jobq, &process.worker_id).await.is_some()
    })
    .await;
    let own = live(&jobq, &process.worker_id).await.unwrap();
    let own = own.jobs.iter().find(|k| k.name == NAME).expect("published");
    // Other tests here run this worker process too: the same definition.
    let kinds = jobq.job_kinds().await.unwrap();
    let published = kinds.iter().find(|j| j.kind.name == NAME).unwrap();
    assert_eq!(&published.kind, own);
    assert!(published.disagreeing.is_empty());
    let kind = &published.kind;
    assert_eq!(
        (
            kind.queue.as_str(),
            kind.max_attempts,
            kind.timeout,
            kind.key_template.as_deref()
        ),
        (
            "presence-mail",
            5,
            Some(Duration::from_secs(30)),
            Some("welcome:{user_id}")
        )
    );
    assert_eq!(kind.fields_text(), "user_id: u64, locale?: Option<String>");

    // The job's own defaults, and its key from its template.
    let user = rand::random::<u32>();
    let payload = format!(r#"{{"user_id":{user}}}"#);
    let first = jobq
        .enqueue_json(NAME, &payload, Enqueue::new())
        .await
        .unwrap();
    let stored = jobq.job(first.id).await.unwrap().unwrap();
    assert_eq!(
        (
            stored.queue.as_str(),
            stored.max_attempts,
            stored.idempotency_key.clone()
        ),
        ("presence-mail", 5, Some(format!("welcome:{user}")))
    );
    let again = jobq
        .enqueue_json(NAME, &payload, Enqueue::new())
        .await
        .unwrap();
    assert_eq!((again.id, again.duplicate), (first.id, true));

    // Options override every default.
    let key = format!("{queue}:k");
    let options = Enqueue::new()
        .queue(&queue)
        .max_attempts(2)
        .idempotency_key(&key);
    let with_locale = format!(r#"{{"user_id":{user},"locale":"en"}}"#);
    let chosen = jobq
        .enqueue_json(NAME, &with_locale, options)
        .await
        .unwrap();
    let stored = jobq.job(chosen.id).await.unwrap().unwrap();
    assert_eq!(
        (
            stored.queue.as_str(),
            stored.max_attempts,
            stored.idempotency_key
        ),
        (queue.as_str(), 2, Some(key))
    );

    // The payload is checked against the published fields; nothing stored.
    let before = jobq
        .count_where(&JobFilter::new().job_name(NAME))
        .await
        .unwrap();
    for (bad, says) in [
        (r#"{"user_id":1,"usr":2}"#, "unknown field `usr`"),
        (r#"{"locale":"en"}"#, "missing field `user_id`"),
        ("[1]", "not a JSON object"),
    ] {
        let message = invalid(jobq.enqueue_json(NAME, bad, Enqueue::new()).await);
        assert!(message.contains(says), "{bad}: {message}");
        assert!(message.contains("user_id: u64"), "{message}");
    }
    let float_key = invalid(
        jobq.enqueue_json(NAME, r#"{"user_id":1.5}"#, Enqueue::new())
            .await,
    );
    assert!(float_key.contains("give the key"), "{float_key}");
    assert_eq!(
        jobq.count_where(&JobFilter::new().job_name(NAME))
            .await
            .unwrap(),
        before
    );

    // An unknown name: refused without a queue, naming the known jobs.
    let unknown = invalid(
        jobq.enqueue_json("workers_no_such_job", "{}", Enqueue::new())
            .await,
    );
    assert!(
        unknown.contains("no job named `workers_no_such_job`") && unknown.contains(NAME),
        "{unknown}"
    );
    let stored = jobq
        .enqueue_json("workers_no_such_job", "{}", on(&queue))
        .await
        .unwrap();
    let stored = jobq.job(stored.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.queue.as_str(), stored.max_attempts),
        (queue.as_str(), jobq_runtime::DEFAULT_MAX_ATTEMPTS)
    );

    process.stop().await;
    jobq.cancel_where(&JobFilter::new().job_name(NAME).status(JobStatus::Pending))
        .await
        .unwrap();
    jobq.cancel_where(&JobFilter::new().queue(&queue))
        .await
        .unwrap();
}

/// Two live workers that define a job differently (a rolling deploy): the
/// one that started last gives the defaults, the other is named; with
/// both gone, the job is unknown.
async fn the_newest_worker_wins_a_disagreement_and_the_other_is_named(db: TestDb) {
    let jobq = db.jobq().await;
    let name = format!("workers_kind_{:08x}", rand::random::<u32>());
    let tag = unique_queue("disagree");
    let sql = Db::of(&jobq);
    let insert = sql.pick(
        "INSERT INTO jobq_workers (id, worker_id, host, pid, version, queues, jobs, running, \
         started_at, last_seen, expires_at) VALUES (?, ?, 'h', 1, '0', '[]', ?, 0, \
         UTC_TIMESTAMP(6) - INTERVAL ? SECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)",
        "INSERT INTO jobq_workers (id, worker_id, host, pid, version, queues, jobs, running, \
         started_at, last_seen, expires_at) VALUES (?, ?, 'h', 1, '0', '[]', ?, 0, \
         now() - ? * interval '1 second', now(), now() + interval '1 hour')",
        "INSERT INTO jobq_workers (id, worker_id, host, pid, version, queues, jobs, running, \
         started_at, last_seen, expires_at) VALUES (?, ?, 'h', 1, '0', '[]', ?, 0, \
         CAST(strftime('%s','now') AS INTEGER) * 1000000 - ? * 1000000, \
         CAST(strftime('%s','now') AS INTEGER) * 1000000, \
         CAST(strftime('%s','now') AS INTEGER) * 1000000 + 3600000000)",
    );
    let old = format!("{tag}-old");
    let new = format!("{tag}-new");
    for (worker, queue, age) in [(&old, "old-queue", 600), (&new, "new-queue", 60)] {
        let jobs = format!(r#"[{{"name":"{name}","queue":"{queue}","max_attempts":3}}]"#);
        let id = i64::from(rand::random::<u32>()) + (1 << 40);
        let args = [
            Arg::Int(id),
            Arg::from(worker.as_str()),
            Arg::from(jobs),
            Arg::Int(age),
        ];
        assert_eq!(sql.execute(insert, &args).await.unwrap(), 1);
    }
    let kinds = jobq.job_kinds().await.unwrap();
    let job = kinds.iter().find(|j| j.kind.name == name).unwrap();
    assert_eq!(
        (
            job.kind.queue.as_str(),
            job.published_by.as_str(),
            job.workers
        ),
        ("new-queue", new.as_str(), 2)
    );
    assert_eq!(job.disagreeing, std::slice::from_ref(&old));
    // A minimal published kind: no fields published, nothing checked.
    assert!(job.kind.fields.is_none());
    let enqueued = jobq
        .enqueue_json(&name, "[1]", Enqueue::new())
        .await
        .unwrap();
    let stored = jobq.job(enqueued.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.queue.as_str(), stored.max_attempts),
        ("new-queue", 3)
    );
    jobq.cancel(enqueued.id).await.unwrap();
    // Its workers gone, the job is unknown again.
    for worker in [&old, &new] {
        sql.execute(
            "DELETE FROM jobq_workers WHERE worker_id = ?",
            &[Arg::from(worker.as_str())],
        )
        .await
        .unwrap();
    }
    let gone = invalid(jobq.enqueue_json(&name, "[1]", Enqueue::new()).await);
    assert!(gone.contains(&format!("no job named `{name}`")), "{gone}");
}

jobq_tests::on_every_backend!(
    a_worker_registers_itself_reports_its_running_jobs_and_leaves_at_shutdown,
    a_queue_is_served_by_as_many_workers_as_serve_it_or_paused_or_by_none,
    a_killed_worker_process_drops_out_within_its_expiry,
    a_worker_whose_row_was_deleted_registers_again,
    a_job_enqueued_by_name_takes_the_defaults_its_workers_publish,
    the_newest_worker_wins_a_disagreement_and_the_other_is_named,
);
