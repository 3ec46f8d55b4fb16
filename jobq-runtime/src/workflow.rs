//! Workflows: jobs that run after others ([`Workflow`],
//! [`Jobq::enqueue_workflow`]).
//!
//! A workflow is a set of jobs, each named by a task name, with
//! dependencies between them (a graph without cycles: fan-out, fan-in,
//! diamonds), stored in one call. A job with dependencies is stored
//! `blocked` and becomes `pending` once every job it depends on has
//! succeeded; it reads their outputs with
//! [`JobContext::dependency_output`](crate::JobContext::dependency_output).
//! What a dependency that fails for good, is cancelled or is deleted does
//! to the jobs after it is chosen per workflow or per dependency
//! ([`OnFailure`]): by default they are cancelled (with a `last_error`
//! that says why), and so, in turn, are the jobs after them.

use std::collections::{BTreeMap, HashMap};

use crate::connection::EnqueueConnection;
use crate::error::{InvalidArgument, Result};
use crate::handle::Jobq;
use crate::store::contract::NewJob;
use crate::store::contract::{DEPENDENTS_KEY, NewFlow, TASK_KEY, WORKFLOW_KEY};
use crate::types::{Enqueue, JobStatus};
use jobq_core::Job;

/// The most jobs one workflow may have.
pub const MAX_WORKFLOW_JOBS: usize = 20_000;
/// The most dependencies one workflow may have.
pub const MAX_WORKFLOW_DEPENDENCIES: usize = 100_000;
/// The longest workflow id or task name, in bytes.
pub const MAX_WORKFLOW_NAME: usize = 100;

/// What a job does when a job it depends on ends without succeeding
/// (failed for good, cancelled, or its row deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnFailure {
    /// It is cancelled (the default: a job after another assumes what that
    /// one did, and running it anyway is a choice to state), and so are
    /// the jobs after it that would be cancelled by it.
    #[default]
    Cancel,
    /// It runs once that dependency has ended, however it ended (a
    /// clean-up, a report): its output reads as `None`.
    Run,
}

/// A job to make from the workflow's handle at enqueue.
pub(crate) type Make = Box<dyn FnOnce(&Jobq) -> Result<NewJob> + Send>;

/// One task of a [`Workflow`]: a job and what it waits for.
pub struct Task {
    name: String,
    make: Option<Make>,
    after: Vec<(String, Option<OnFailure>)>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.name)
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

impl Task {
    /// Runs after the tasks `tasks` have succeeded (what the workflow's
    /// [`on_failure`](Workflow::on_failure) says if one does not).
    pub fn after<I, S>(&mut self, tasks: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.after
            .extend(tasks.into_iter().map(|t| (t.into(), None)));
        self
    }

    /// Runs after the tasks `tasks` have ended, doing as `policy` says if
    /// one does not succeed.
    pub fn after_with<I, S>(&mut self, tasks: I, policy: OnFailure) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.after
            .extend(tasks.into_iter().map(|t| (t.into(), Some(policy))));
        self
    }
}

/// A set of jobs with dependencies between them, stored in one call
/// ([`Jobq::enqueue_workflow`], or [`Jobq::enqueue_workflow_in`] in the
/// caller's transaction).
///
/// ```
/// use jobq_runtime::{Jobq, Workflow, job};
///
/// #[job(name = "workflow_doc_charge")]
/// async fn charge(order: u64) -> Result<u64, jobq_runtime::JobError> {
///     Ok(order * 100)
/// }
/// #[job(name = "workflow_doc_ship")]
/// async fn ship(order: u64) {}
/// #[job(name = "workflow_doc_mail")]
/// async fn mail(order: u64) {}
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobq_runtime::Result<()> {
/// # let jobq = Jobq::connect("sqlite::memory:").await?;
/// # jobq.migrate().await?;
/// let mut flow = Workflow::new("order-42");
/// flow.add("charge", Charge::new(42));
/// flow.add("ship", Ship::new(42)).after(["charge"]);
/// flow.add("mail", Mail::new(42)).after(["charge", "ship"]);
/// let stored = jobq.enqueue_workflow(flow).await?;
/// assert_eq!(stored.jobs.len(), 3);
/// let state = jobq.workflow("order-42").await?.expect("stored");
/// assert_eq!(state.job("mail").unwrap().waiting_on, ["charge", "ship"]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Workflow {
    id: String,
    on_failure: OnFailure,
    tasks: Vec<Task>,
}

impl Workflow {
    /// An empty workflow named `id` (at most [`MAX_WORKFLOW_NAME`] bytes):
    /// how [`Jobq::workflow`] and [`Jobq::cancel_workflow`] find it.
    /// Choose ids that do not repeat (an order's, a run's); two workflows
    /// stored under one id read and cancel as one.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            on_failure: OnFailure::default(),
            tasks: Vec::new(),
        }
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What a job does when a dependency given with [`Task::after`] ends
    /// without succeeding ([`OnFailure::Cancel`] unless set).
    pub fn on_failure(mut self, policy: OnFailure) -> Self {
        self.on_failure = policy;
        self
    }

    /// Adds `job` as task `name` (unique in the workflow, at most
    /// [`MAX_WORKFLOW_NAME`] bytes), with its own defaults; say what it
    /// waits for on the returned task.
    pub fn add<J: Job>(&mut self, name: impl Into<String>, job: J) -> &mut Task {
        self.add_with(name, job, Enqueue::new())
    }

    /// [`add`](Self::add) with enqueue options (queue, priority, delay,
    /// attempts, metadata, tags). A job with dependencies may not have a
    /// concurrency key.
    pub fn add_with<J: Job>(
        &mut self,
        name: impl Into<String>,
        job: J,
        options: Enqueue,
    ) -> &mut Task {
        let make: Make = Box::new(move |jobq: &Jobq| jobq.row(&job, options));
        self.tasks.push(Task {
            name: name.into(),
            make: Some(make),
            after: Vec::new(),
        });
        let last = self.tasks.len() - 1;
        &mut self.tasks[last]
    }

    /// Checks the workflow and makes its rows (see [`InvalidArgument::Workflow`]).
    fn rows(self, jobq: &Jobq) -> Result<NewFlow> {
        let refuse = |why: String| -> crate::Error { InvalidArgument::Workflow(why).into() };
        if self.id.is_empty() || self.id.len() > MAX_WORKFLOW_NAME {
            return Err(refuse(format!(
                "its id must be 1 to {MAX_WORKFLOW_NAME} bytes, not {}",
                self.id.len()
            )));
        }
        if self.tasks.is_empty() {
            return Err(refuse("it has no task".to_owned()));
        }
        if self.tasks.len() > MAX_WORKFLOW_JOBS {
            return Err(refuse(format!(
                "it has {} tasks, over the {MAX_WORKFLOW_JOBS} a workflow may have",
                self.tasks.len()
            )));
        }
        let mut places: HashMap<&str, usize> = HashMap::with_capacity(self.tasks.len());
        for (place, task) in self.tasks.iter().enumerate() {
            if task.name.is_empty() || task.name.len() > MAX_WORKFLOW_NAME {
                return Err(refuse(format!(
                    "task name {:?} must be 1 to {MAX_WORKFLOW_NAME} bytes",
                    task.name
                )));
            }
            if places.insert(&task.name, place).is_some() {
                return Err(refuse(format!("task {:?} is added twice", task.name)));
            }
        }
        let mut edges = Vec::new();
        for (place, task) in self.tasks.iter().enumerate() {
            for (on, policy) in &task.after {
                let Some(&dependency) = places.get(on.as_str()) else {
                    return Err(refuse(format!(
                        "task {:?} depends on {on:?}, which is not a task of the workflow",
                        task.name
                    )));
                };
                if dependency == place {
                    return Err(refuse(format!("task {:?} depends on itself", task.name)));
                }
                let policy = policy.unwrap_or(self.on_failure);
                edges.push((place, dependency, policy == OnFailure::Run));
            }
        }
        edges.sort_unstable();
        edges.dedup_by_key(|&mut (job, on, _)| (job, on));
        if edges.len() > MAX_WORKFLOW_DEPENDENCIES {
            return Err(refuse(format!(
                "it has {} dependencies, over the {MAX_WORKFLOW_DEPENDENCIES} a workflow may have",
                edges.len()
            )));
        }
        if let Some(cycle) = cycle(self.tasks.len(), &edges) {
            let names: Vec<&str> = cycle.iter().map(|&p| self.tasks[p].name.as_str()).collect();
            return Err(refuse(format!(
                "its dependencies form a cycle: {}",
                names.join(" → ")
            )));
        }
        let mut dependents = vec![0u32; self.tasks.len()];
        let mut held = vec![false; self.tasks.len()];
        for &(job, on, _) in &edges {
            dependents[on] += 1;
            held[job] = true;
        }
        let id = self.id;
        let mut jobs = Vec::with_capacity(self.tasks.len());
        for (place, mut task) in self.tasks.into_iter().enumerate() {
            let make = task.make.take().expect("made once");
            let mut row = make(jobq)?;
            if held[place] && row.concurrency.is_some() {
                return Err(refuse(format!(
                    "task {:?} has dependencies and a concurrency key: a job may wait on one or the other",
                    task.name
                )));
            }
            let metadata = row.metadata.get_or_insert_with(Default::default);
            metadata.insert(WORKFLOW_KEY.to_owned(), id.clone().into());
            metadata.insert(TASK_KEY.to_owned(), task.name.clone().into());
            if dependents[place] > 0 {
                metadata.insert(DEPENDENTS_KEY.to_owned(), dependents[place].into());
            }
            jobs.push((task.name, row));
        }
        Ok(NewFlow { id, jobs, edges })
    }
}

/// A cycle among `edges` (`(job, on, _)`: `job` after `on`) of `n` tasks,
/// as the tasks along it, first one repeated last; `None` if there is none.
fn cycle(n: usize, edges: &[(usize, usize, bool)]) -> Option<Vec<usize>> {
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(job, on, _) in edges {
        after[on].push(job);
    }
    // Depth-first, without recursion: 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; n];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        path.push((start, 0));
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            if let Some(&child) = after[node].get(*next) {
                *next += 1;
                match state[child] {
                    0 => {
                        state[child] = 1;
                        path.push((child, 0));
                    }
                    1 => {
                        let from = path.iter().position(|&(p, _)| p == child).unwrap_or(0);
                        let mut cycle: Vec<usize> = path[from..].iter().map(|&(p, _)| p).collect();
                        cycle.push(child);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                state[node] = 2;
                path.pop();
            }
        }
    }
    None
}

/// What [`Jobq::enqueue_workflow`] stored: the workflow's id and each
/// task's job id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkflowEnqueued {
    /// The workflow's id.
    pub id: String,
    /// Each task's job id, by task name.
    pub jobs: BTreeMap<String, i64>,
}

/// A workflow as stored ([`Jobq::workflow`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkflowInfo {
    /// The workflow's id.
    pub id: String,
    /// Its jobs, in enqueue order.
    pub jobs: Vec<WorkflowJob>,
}

impl WorkflowInfo {
    /// The job of task `task`.
    pub fn job(&self, task: &str) -> Option<&WorkflowJob> {
        self.jobs.iter().find(|j| j.task == task)
    }

    /// Whether every job has ended (done, failed, cancelled, or pruned).
    pub fn finished(&self) -> bool {
        self.jobs.iter().all(|j| {
            !matches!(
                j.status,
                Some(JobStatus::Pending | JobStatus::Processing | JobStatus::Blocked)
            )
        })
    }

    /// Whether every job has succeeded.
    pub fn succeeded(&self) -> bool {
        self.jobs.iter().all(|j| j.status == Some(JobStatus::Done))
    }

    /// The whole in a few words: `succeeded`, `finished, not every job
    /// succeeded`, or `running`.
    pub fn state(&self) -> &'static str {
        if self.succeeded() {
            "succeeded"
        } else if self.finished() {
            "finished, not every job succeeded"
        } else {
            "running"
        }
    }
}

/// One job of a [`WorkflowInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkflowJob {
    /// Its task name.
    pub task: String,
    /// Its job id.
    pub id: i64,
    /// Its status; `None` once its row was pruned.
    pub status: Option<JobStatus>,
    /// The tasks it runs after.
    pub depends_on: Vec<String>,
    /// The tasks among those that have not ended yet (what a `blocked`
    /// job waits on).
    pub waiting_on: Vec<String>,
}

impl Jobq {
    /// Stores `flow` in one transaction: every job, or none (see
    /// [`Workflow`]). Jobs with dependencies are stored `blocked` and
    /// become `pending` when their dependencies have succeeded.
    ///
    /// # Errors
    /// [`InvalidArgument::Workflow`] for a workflow that cannot run (see
    /// there) — nothing is stored; what [`enqueue`](Self::enqueue) returns.
    ///
    /// # Cancel safety
    /// As [`enqueue_many`](Self::enqueue_many)'s: stored whole or not at all.
    pub async fn enqueue_workflow(&self, flow: Workflow) -> Result<WorkflowEnqueued> {
        let flow = flow.rows(self)?;
        let enqueued = self.store().enqueue_flow(&flow).await?;
        Ok(stored(&flow, &enqueued))
    }

    /// [`enqueue_workflow`](Self::enqueue_workflow) inside the caller's
    /// transaction (see [`enqueue_in`](Self::enqueue_in)): rolled back, no
    /// job. On an error, roll the transaction back: part of the workflow
    /// may be in it.
    pub async fn enqueue_workflow_in<'c, C>(
        &self,
        conn: C,
        flow: Workflow,
    ) -> Result<WorkflowEnqueued>
    where
        C: EnqueueConnection<'c>,
    {
        let flow = flow.rows(self)?;
        let enqueued = self
            .store()
            .enqueue_flow_in(conn.into_connection(), &flow)
            .await?;
        Ok(stored(&flow, &enqueued))
    }

    /// Workflow `id` as stored: each job's status, what it depends on and
    /// what it still waits on; `None` if no job has that workflow id.
    pub async fn workflow(&self, id: &str) -> Result<Option<WorkflowInfo>> {
        let rows = self.store().flow_read(id).await?;
        if rows.jobs.is_empty() {
            return Ok(None);
        }
        let tasks: HashMap<i64, (&str, Option<JobStatus>)> = rows
            .jobs
            .iter()
            .map(|(job, task, status)| {
                (
                    *job,
                    (
                        task.as_str(),
                        status.as_deref().and_then(|s| s.parse().ok()),
                    ),
                )
            })
            .collect();
        let ended = |status: Option<JobStatus>| {
            !matches!(
                status,
                Some(JobStatus::Pending | JobStatus::Processing | JobStatus::Blocked)
            )
        };
        let jobs = rows
            .jobs
            .iter()
            .map(|(job, task, status)| {
                let mut depends_on = Vec::new();
                let mut waiting_on = Vec::new();
                for (_, on, _) in rows.edges.iter().filter(|(j, _, _)| j == job) {
                    if let Some(&(name, status)) = tasks.get(on) {
                        depends_on.push(name.to_owned());
                        if !ended(status) {
                            waiting_on.push(name.to_owned());
                        }
                    }
                }
                WorkflowJob {
                    task: task.clone(),
                    id: *job,
                    status: status.as_deref().and_then(|s| s.parse().ok()),
                    depends_on,
                    waiting_on,
                }
            })
            .collect();
        Ok(Some(WorkflowInfo {
            id: id.to_owned(),
            jobs,
        }))
    }

    /// Cancels every job of workflow `id` that has not ended (a running one
    /// is told to stop, as [`cancel`](Self::cancel) does); how many.
    pub async fn cancel_workflow(&self, id: &str) -> Result<u64> {
        let rows = self.store().flow_read(id).await?;
        let mut cancelled = 0;
        // Last first: a dependent is cancelled before its dependency, so
        // no release runs it in between.
        for (job, _, _) in rows.jobs.iter().rev() {
            if self.cancel(*job).await? {
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }
}

/// The ids `enqueued` gave `flow`'s tasks.
fn stored(flow: &NewFlow, enqueued: &[crate::types::Enqueued]) -> WorkflowEnqueued {
    WorkflowEnqueued {
        id: flow.id.clone(),
        jobs: flow
            .jobs
            .iter()
            .zip(enqueued)
            .map(|((task, _), e)| (task.clone(), e.id))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::cycle;

    #[test]
    fn a_cycle_is_found_and_named_and_a_diamond_is_none() {
        // 0 → 1 → 2 → 0 (each `(job, on)`: job after on).
        let found = cycle(3, &[(1, 0, false), (2, 1, false), (0, 2, false)]).expect("a cycle");
        assert_eq!(found.first(), found.last());
        assert_eq!(found.len(), 4);
        // A diamond: 1 and 2 after 0, 3 after both.
        assert_eq!(
            cycle(
                4,
                &[(1, 0, false), (2, 0, false), (3, 1, false), (3, 2, false)]
            ),
            None
        );
    }
}
