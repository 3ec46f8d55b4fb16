//! Workflows, on every backend: jobs run only after the jobs they depend
//! on have succeeded and read their outputs (a diamond; a fan-out of 1,000
//! and its fan-in, run by two workers whose settles race); a dependency
//! that fails for good cancels what follows it (the cascade) unless a job
//! runs anyway; a workflow that cannot run is refused whole and stores
//! nothing; cancelling a workflow cancels what has not run; a release a
//! dead worker never made is made by the sweep; a workflow enqueued in a
//! caller's transaction exists only once it commits.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::{
    Error, InvalidArgument, JobContext, JobError, JobStatus, Jobq, OnFailure, Worker, WorkerHandle,
    Workflow, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, fixture, on, stop, wait_for_status};

const LONG: Duration = Duration::from_secs(60);

/// What ran, per workflow: `(task, started)` events in order, `started`
/// false at the end of a run.
static RUNS: Mutex<Vec<(String, String, bool)>> = Mutex::new(Vec::new());

fn record(flow: &str, task: &str, started: bool) {
    RUNS.lock().unwrap_or_else(PoisonError::into_inner).push((
        flow.to_owned(),
        task.to_owned(),
        started,
    ));
}

/// The events of workflow `flow`, in order.
fn runs(flow: &str) -> Vec<(String, bool)> {
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(f, _, _)| f == flow)
        .map(|(_, t, s)| (t.clone(), *s))
        .collect()
}

/// A step of a workflow: its output is 1 plus the sum of the outputs of
/// `inputs` (its dependencies' task names); fails for good when `fail`.
#[job(name = "flow_step", max_attempts = 1)]
async fn step(
    ctx: JobContext,
    flow: String,
    task: String,
    inputs: Vec<String>,
    fail: bool,
) -> Result<u64, JobError> {
    record(&flow, &task, true);
    let mut sum = 1;
    for input in &inputs {
        let output: Option<u64> = ctx
            .dependency_output(input)
            .await
            .map_err(|e| JobError::permanent(e.to_string()))?;
        sum += output.unwrap_or(0);
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    record(&flow, &task, false);
    if fail {
        return Err(JobError::permanent("this step fails"));
    }
    Ok(sum)
}

fn step_of(flow: &str, task: &str, inputs: &[&str]) -> Step {
    Step::new(
        flow.to_owned(),
        task.to_owned(),
        inputs.iter().map(|s| (*s).to_owned()).collect(),
        false,
    )
}

fn worker(jobq: &Jobq, queue: &str, slots: usize) -> WorkerHandle {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, slots)
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(200))
        .build()
        .unwrap()
        .start()
}

/// A workflow id of this test's own.
fn flow_id(name: &str, queue: &str) -> String {
    format!("{name}-{queue}")
}

/// Asserts that in `events` every task of `edges` (`(job, on)`) started
/// after `on` ended, and that each task ran once.
fn assert_order(events: &[(String, bool)], edges: &[(&str, &str)]) {
    let position = |task: &str, started: bool| {
        let found: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, (t, s))| t == task && *s == started)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(found.len(), 1, "{task} ran once: {events:?}");
        found[0]
    };
    for (job, on) in edges {
        assert!(
            position(on, false) < position(job, true),
            "{job} started after {on} ended: {events:?}"
        );
    }
}

/// a → b, c → d: d runs after both, reads both outputs (b = c = 2, d = 5).
async fn a_diamond_runs_in_dependency_order_and_outputs_flow(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-diamond").await;
    let id = flow_id("diamond", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue));
    flow.add_with("b", step_of(&id, "b", &["a"]), on(&queue))
        .after(["a"]);
    flow.add_with("c", step_of(&id, "c", &["a"]), on(&queue))
        .after(["a"]);
    flow.add_with("d", step_of(&id, "d", &["b", "c"]), on(&queue))
        .after(["b", "c"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let state = jobq.workflow(&id).await.unwrap().expect("stored");
    assert_eq!(state.job("a").unwrap().status, Some(JobStatus::Pending));
    assert_eq!(state.job("d").unwrap().status, Some(JobStatus::Blocked));
    assert_eq!(state.job("d").unwrap().waiting_on, ["b", "c"]);
    let handle = worker(&jobq, &queue, 4);
    wait_for_status(&jobq, stored.jobs["d"], JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_order(
        &runs(&id),
        &[("b", "a"), ("c", "a"), ("d", "b"), ("d", "c")],
    );
    assert_eq!(
        jobq.output::<Step>(stored.jobs["d"]).await.unwrap(),
        Some(5)
    );
    let state = jobq.workflow(&id).await.unwrap().unwrap();
    assert!(state.finished() && state.succeeded(), "{state:?}");
    assert!(state.job("d").unwrap().waiting_on.is_empty());
}

/// One root, 1,000 jobs after it, one after all of them, run by two
/// workers of 8 slots each: the last runs once, after every other, and
/// reads 1,000 outputs.
async fn a_fan_out_of_1000_and_its_fan_in_run_in_order(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-fan").await;
    let id = flow_id("fan", &queue);
    let middle: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let names: Vec<&str> = middle.iter().map(String::as_str).collect();
    let mut flow = Workflow::new(&id);
    flow.add_with("root", step_of(&id, "root", &[]), on(&queue));
    for name in &names {
        flow.add_with(*name, step_of(&id, name, &[]), on(&queue))
            .after(["root"]);
    }
    flow.add_with("last", step_of(&id, "last", &names), on(&queue))
        .after(names.iter().copied());
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let (one, two) = (worker(&jobq, &queue, 8), worker(&jobq, &queue, 8));
    wait_for_status(&jobq, stored.jobs["last"], JobStatus::Done, LONG).await;
    stop(one).await;
    stop(two).await;
    let events = runs(&id);
    let mut edges: Vec<(&str, &str)> = names.iter().map(|n| (*n, "root")).collect();
    edges.extend(names.iter().map(|n| ("last", *n)));
    assert_order(&events, &edges);
    assert_eq!(
        jobq.output::<Step>(stored.jobs["last"]).await.unwrap(),
        Some(1 + 1000)
    );
}

/// a fails for good: b (after a) and c (after b) are cancelled, each
/// saying why; d (after a, run anyway) runs; e (after d) runs.
async fn a_failed_dependency_cancels_what_follows_unless_it_runs_anyway(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-fail").await;
    let id = flow_id("fail", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with(
        "a",
        Step::new(id.clone(), "a".into(), Vec::new(), true),
        on(&queue),
    );
    flow.add_with("b", step_of(&id, "b", &["a"]), on(&queue))
        .after(["a"]);
    flow.add_with("c", step_of(&id, "c", &["b"]), on(&queue))
        .after(["b"]);
    flow.add_with("d", step_of(&id, "d", &["a"]), on(&queue))
        .after_with(["a"], OnFailure::Run);
    flow.add_with("e", step_of(&id, "e", &["d"]), on(&queue))
        .after(["d"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let handle = worker(&jobq, &queue, 4);
    wait_for_status(&jobq, stored.jobs["e"], JobStatus::Done, LONG).await;
    for task in ["b", "c"] {
        let job = wait_for_status(&jobq, stored.jobs[task], JobStatus::Cancelled, LONG).await;
        assert!(
            job.last_error
                .as_deref()
                .is_some_and(|e| e.contains("depends on failed")),
            "{task}: {job:?}"
        );
    }
    stop(handle).await;
    let ran: Vec<String> = runs(&id).into_iter().map(|(t, _)| t).collect();
    assert!(!ran.iter().any(|t| t == "b" || t == "c"), "{ran:?}");
    // d ran with a's output missing (a failed): 1.
    assert_eq!(
        jobq.output::<Step>(stored.jobs["d"]).await.unwrap(),
        Some(1)
    );
    let state = jobq.workflow(&id).await.unwrap().unwrap();
    assert!(state.finished() && !state.succeeded(), "{state:?}");
}

/// A whole workflow with a run-anyway default: b runs after a failed.
async fn a_workflow_wide_policy_applies_to_every_dependency(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-policy").await;
    let id = flow_id("policy", &queue);
    let mut flow = Workflow::new(&id).on_failure(OnFailure::Run);
    flow.add_with(
        "a",
        Step::new(id.clone(), "a".into(), Vec::new(), true),
        on(&queue),
    );
    flow.add_with("b", step_of(&id, "b", &["a"]), on(&queue))
        .after(["a"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, stored.jobs["b"], JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(
        jobq.job(stored.jobs["a"]).await.unwrap().unwrap().status,
        JobStatus::Failed
    );
}

/// Each refused with a clear error, and nothing of it stored.
async fn a_workflow_that_cannot_run_is_refused_and_stores_nothing(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-bad").await;
    let refused = async |flow: Workflow, says: &str| {
        let id = flow.id().to_owned();
        match jobq.enqueue_workflow(flow).await {
            Err(Error::Invalid(InvalidArgument::Workflow(why))) => {
                assert!(why.contains(says), "{says:?} in {why:?}");
            }
            other => panic!("{id}: refused, not {other:?}"),
        }
        assert!(jobq.workflow(&id).await.unwrap().is_none());
    };
    let id = flow_id("cycle", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue))
        .after(["c"]);
    flow.add_with("b", step_of(&id, "b", &[]), on(&queue))
        .after(["a"]);
    flow.add_with("c", step_of(&id, "c", &[]), on(&queue))
        .after(["b"]);
    refused(flow, "cycle").await;

    let id = flow_id("self", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue))
        .after(["a"]);
    refused(flow, "depends on itself").await;

    let id = flow_id("unknown", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue))
        .after(["nobody"]);
    refused(flow, "not a task of the workflow").await;

    let id = flow_id("twice", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue));
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue));
    refused(flow, "added twice").await;

    refused(Workflow::new(flow_id("empty", &queue)), "no task").await;

    let id = flow_id("huge", &queue);
    let mut flow = Workflow::new(&id);
    for i in 0..=jobq_runtime::MAX_WORKFLOW_JOBS {
        flow.add_with(format!("t{i}"), step_of(&id, "t", &[]), on(&queue));
    }
    refused(flow, "over the").await;

    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts, Default::default(), "nothing stored");
}

/// A workflow cancelled after its first job ran: the rest are cancelled
/// and never run.
async fn cancelling_a_workflow_cancels_what_has_not_run(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-cancel").await;
    let id = flow_id("cancel", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue));
    flow.add_with("b", step_of(&id, "b", &[]), on(&queue))
        .after(["a"]);
    flow.add_with("c", step_of(&id, "c", &[]), on(&queue))
        .after(["b"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    assert_eq!(jobq.cancel_workflow(&id).await.unwrap(), 3);
    let handle = worker(&jobq, &queue, 2);
    // Long enough for a worker to have run a job it was free to.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop(handle).await;
    for task in ["a", "b", "c"] {
        let job = jobq.job(stored.jobs[task]).await.unwrap().unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "{task}");
    }
    assert!(runs(&id).is_empty());
    assert_eq!(jobq.cancel_workflow(&id).await.unwrap(), 0);
}

/// A dependency marked done behind jobq's back (as a worker that died
/// between its settle and its release leaves it): the sweep runs what
/// follows; one whose row is gone cancels what follows.
async fn a_release_a_dead_worker_never_made_is_made_by_the_sweep(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-sweep").await;
    let id = flow_id("sweep", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on("flow-sweep-nobody"));
    flow.add_with("b", step_of(&id, "b", &[]), on(&queue))
        .after(["a"]);
    flow.add_with("x", step_of(&id, "x", &[]), on("flow-sweep-nobody"));
    flow.add_with("y", step_of(&id, "y", &[]), on(&queue))
        .after(["x"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let db_ = Db::of(&jobq);
    db_.execute(
        "UPDATE jobq_jobs SET status = 'done' WHERE id = ?",
        &[Arg::Int(stored.jobs["a"])],
    )
    .await
    .unwrap();
    db_.execute(
        "DELETE FROM jobq_jobs WHERE id = ?",
        &[Arg::Int(stored.jobs["x"])],
    )
    .await
    .unwrap();
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, stored.jobs["b"], JobStatus::Done, LONG).await;
    wait_for_status(&jobq, stored.jobs["y"], JobStatus::Cancelled, LONG).await;
    stop(handle).await;
}

/// Once a workflow's job rows are gone (pruned), its names and
/// dependencies go too, by the sweep.
async fn a_pruned_workflow_leaves_no_rows_behind(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-forget").await;
    let id = flow_id("forget", &queue);
    let mut flow = Workflow::new(&id);
    flow.add_with("a", step_of(&id, "a", &[]), on(&queue));
    flow.add_with("b", step_of(&id, "b", &["a"]), on(&queue))
        .after(["a"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, stored.jobs["b"], JobStatus::Done, LONG).await;
    let db_ = Db::of(&jobq);
    let edges = async || {
        db_.count(
            "SELECT COUNT(*) FROM jobq_deps WHERE job_id = ?",
            &[Arg::Int(stored.jobs["b"])],
        )
        .await
        .unwrap()
    };
    // The edge is there while the job rows are (asked before the prune:
    // the running worker's sweep may forget it the moment they go).
    assert_eq!(edges().await, 1);
    // Pruned (this test's rows only: the database is shared).
    let pruned = db_
        .execute(
            "DELETE FROM jobq_jobs WHERE queue = ?",
            &[Arg::Text(queue.clone())],
        )
        .await
        .unwrap();
    assert_eq!(pruned, 2);
    jobq_tests::wait_until("the workflow's rows are forgotten", LONG, async || {
        jobq.workflow(&id).await.unwrap().is_none() && edges().await == 0
    })
    .await;
    stop(handle).await;
}

/// Many diamonds at once, two workers on handles of their own (on
/// Galera, on two nodes): each last job runs once, after both of its
/// dependencies, whichever settles last (the releases race).
async fn diamonds_whose_dependencies_finish_together_each_run_once(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-race").await;
    let mut lasts = HashMap::new();
    for n in 0..40 {
        let id = flow_id(&format!("race{n}"), &queue);
        let mut flow = Workflow::new(&id);
        flow.add_with("a", step_of(&id, "a", &[]), on(&queue));
        flow.add_with("b", step_of(&id, "b", &[]), on(&queue));
        flow.add_with("d", step_of(&id, "d", &["a", "b"]), on(&queue))
            .after(["a", "b"]);
        let stored = jobq.enqueue_workflow(flow).await.unwrap();
        lasts.insert(id, stored.jobs["d"]);
    }
    // The second worker on a handle of its own (on Galera, another node).
    let other = Jobq::connect(db.url()).await.unwrap();
    let (one, two) = (worker(&jobq, &queue, 8), worker(&other, &queue, 8));
    for (id, last) in &lasts {
        wait_for_status(&jobq, *last, JobStatus::Done, LONG).await;
        assert_order(&runs(id), &[("d", "a"), ("d", "b")]);
        assert_eq!(jobq.output::<Step>(*last).await.unwrap(), Some(3));
    }
    stop(one).await;
    stop(two).await;
}

/// The step `jobq-workflow-worker` runs (its `step`).
#[job(name = "workflow_process_step", max_attempts = 1)]
async fn process_step(task: String, inputs: Vec<String>) -> u64 {
    let _ = (task, inputs);
    0
}

/// Two worker processes with the default poll interval run a workflow: a
/// root, 200 jobs after it, a job after all of them and one after that:
/// each starts after its dependencies ended (by the processes' clocks),
/// the last reads the 200 outputs through its dependency, and both
/// processes ran some.
async fn worker_processes_run_a_workflow_in_order(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-procs").await;
    let start = || {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_jobq-workflow-worker"));
        command
            .env("JOBQ_WORKFLOW_URL", db.url())
            .env("JOBQ_WORKFLOW_QUEUE", &queue);
        jobq_tests::WorkerProcess::start(command, LONG)
    };
    let (one, two) = (start().await, start().await);
    // Both workers up and woken by a release's ring: plain steps until
    // each process ran one (a process just started may not listen yet).
    let warm =
        |p: &jobq_tests::WorkerProcess| p.printed().iter().any(|l| l.starts_with("ran warm"));
    for round in 0..50 {
        if warm(&one) && warm(&two) {
            break;
        }
        assert!(round < 49, "both worker processes run jobs");
        let batch = (0..8).map(|_| (ProcessStep::new("warm".into(), Vec::new()), on(&queue)));
        jobq.enqueue_many_with(batch).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = flow_id("procs", &queue);
    let middle: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let names: Vec<&str> = middle.iter().map(String::as_str).collect();
    let step = |task: &str, inputs: &[&str]| {
        ProcessStep::new(
            task.to_owned(),
            inputs.iter().map(|s| (*s).to_owned()).collect(),
        )
    };
    let mut flow = Workflow::new(&id);
    flow.add_with("root", step("root", &[]), on(&queue));
    for name in &names {
        flow.add_with(*name, step(name, &["root"]), on(&queue))
            .after(["root"]);
    }
    flow.add_with("join", step("join", &names), on(&queue))
        .after(names.iter().copied());
    flow.add_with("last", step("last", &["join"]), on(&queue))
        .after(["join"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    wait_for_status(&jobq, stored.jobs["last"], JobStatus::Done, LONG).await;
    // root 1, each middle 2, join 1 + 400, last 402.
    assert_eq!(
        jobq.output::<ProcessStep>(stored.jobs["last"])
            .await
            .unwrap(),
        Some(402)
    );
    let mut times: HashMap<String, (u128, u128)> = HashMap::new();
    let mut ran_by = [0usize; 2];
    for (n, process) in [&one, &two].into_iter().enumerate() {
        for line in process.printed() {
            let parts: Vec<&str> = line.split(' ').collect();
            if let ["ran", task, started, ended] = parts[..] {
                if task == "warm" {
                    continue;
                }
                let previous = times.insert(
                    task.to_owned(),
                    (started.parse().unwrap(), ended.parse().unwrap()),
                );
                assert!(previous.is_none(), "{task} ran twice");
                ran_by[n] += 1;
            }
        }
    }
    assert_eq!(times.len(), 203, "every job ran once");
    assert!(
        ran_by.iter().all(|&n| n > 0),
        "both processes ran jobs: {ran_by:?}"
    );
    let after = |job: &str, on: &str| {
        assert!(
            times[on].1 <= times[job].0,
            "{job} started after {on} ended: {:?} {:?}",
            times[on],
            times[job]
        );
    };
    for name in &names {
        after(name, "root");
        after("join", name);
    }
    after("last", "join");
    one.stop(LONG).await;
    two.stop(LONG).await;
}

/// Rolled back, no job of it; committed, it runs.
async fn a_workflow_enqueued_in_a_transaction_exists_once_it_commits(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "flow-tx").await;
    let build = |id: &str| {
        let mut flow = Workflow::new(id);
        flow.add_with("a", step_of(id, "a", &[]), on(&queue));
        flow.add_with("b", step_of(id, "b", &["a"]), on(&queue))
            .after(["a"]);
        flow
    };
    let rolled = flow_id("rolled", &queue);
    let kept = flow_id("kept", &queue);
    macro_rules! twice {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            jobq.enqueue_workflow_in(&mut *tx, build(&rolled))
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            let mut tx = $pool.begin().await.unwrap();
            let stored = jobq
                .enqueue_workflow_in(&mut *tx, build(&kept))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            stored.jobs["b"]
        }};
    }
    let last = match jobq.backend() {
        jobq_runtime::Backend::MySql => twice!(jobq.mysql_pool().unwrap()),
        jobq_runtime::Backend::Postgres => twice!(jobq.pg_pool().unwrap()),
        jobq_runtime::Backend::Sqlite => twice!(jobq.sqlite_pool().unwrap()),
        other => panic!("no pool for {other:?}"),
    };
    assert!(jobq.workflow(&rolled).await.unwrap().is_none());
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, last, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert!(runs(&rolled).is_empty());
}

jobq_tests::on_every_backend!(
    a_diamond_runs_in_dependency_order_and_outputs_flow,
    a_fan_out_of_1000_and_its_fan_in_run_in_order,
    a_failed_dependency_cancels_what_follows_unless_it_runs_anyway,
    a_workflow_wide_policy_applies_to_every_dependency,
    a_workflow_that_cannot_run_is_refused_and_stores_nothing,
    cancelling_a_workflow_cancels_what_has_not_run,
    a_release_a_dead_worker_never_made_is_made_by_the_sweep,
    a_pruned_workflow_leaves_no_rows_behind,
    diamonds_whose_dependencies_finish_together_each_run_once,
    a_workflow_enqueued_in_a_transaction_exists_once_it_commits,
    worker_processes_run_a_workflow_in_order
);
jobq_tests::on_every_backend!(@backend galera, [tokio {}],
    a_diamond_runs_in_dependency_order_and_outputs_flow,
    a_failed_dependency_cancels_what_follows_unless_it_runs_anyway,
    diamonds_whose_dependencies_finish_together_each_run_once
);
