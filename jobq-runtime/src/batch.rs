//! Batches: a group of jobs with callbacks ([`Batch`],
//! [`Jobq::enqueue_batch`]).
//!
//! A batch is a set of jobs under an id, open to more jobs
//! ([`Jobq::add_to_batch`]) until it is closed, and callbacks: jobs that
//! run once, when the batch has **finished** (closed, and every job done,
//! failed for good, cancelled or deleted), has **succeeded** (closed, and
//! every job done), or sees its first **failure** (a job failed for good,
//! was cancelled or was deleted; open or closed). The callbacks are stored
//! with the batch, `blocked`, and made `pending` exactly once — by the
//! release that follows the last settle, by the close, or by the sweep when
//! a worker died in between; one that can no longer run (success after a
//! failure, failure after a success) is cancelled with a `last_error` that
//! says why. A callback reads its batch's id from its metadata
//! (`jobq.callback_of`) and the batch's state with [`Jobq::batch`].

use crate::connection::EnqueueConnection;
use crate::error::{InvalidArgument, Result};
use crate::handle::Jobq;
use crate::store::contract::{BATCH_JOB, BATCH_KEY, CALLBACK_KEY, CALLBACK_OF_KEY, NewBatch};
use crate::types::{Enqueue, Enqueued, JobStatus};
use crate::workflow::Make;
use jobq_core::Job;

/// The most jobs (callbacks included) one call may store in a batch; a
/// batch grows past it by [`Jobq::add_to_batch`].
pub const MAX_BATCH_JOBS: usize = 20_000;
/// The longest batch id, in bytes.
pub const MAX_BATCH_NAME: usize = 100;

/// When a batch's callback runs (see [`Batch::on`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BatchCallback {
    /// Once the batch is closed and every job has ended, however.
    Finish,
    /// Once the batch is closed and every job has succeeded; cancelled at
    /// the first failure.
    Success,
    /// At the first job that fails for good, is cancelled or is deleted,
    /// whether the batch is closed or not; cancelled if the batch finishes
    /// with none.
    Failure,
}

impl BatchCallback {
    /// Its name as stored (`finish`, `success`, `failure`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Finish => "finish",
            Self::Success => "success",
            Self::Failure => "failure",
        }
    }

    fn parse(role: &str) -> Option<Self> {
        [Self::Finish, Self::Success, Self::Failure]
            .into_iter()
            .find(|c| c.as_str() == role)
    }
}

/// A batch of jobs with callbacks, stored with [`Jobq::enqueue_batch`]
/// (closed unless [`keep_open`](Self::keep_open)), or jobs to add to an
/// open one with [`Jobq::add_to_batch`].
///
/// ```
/// use jobq_runtime::{Batch, BatchCallback, Jobq, job};
///
/// #[job(name = "batch_doc_import")]
/// async fn import(row: u64) {}
/// #[job(name = "batch_doc_report")]
/// async fn report(file: String) {}
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobq_runtime::Result<()> {
/// # let jobq = Jobq::connect("sqlite::memory:").await?;
/// # jobq.migrate().await?;
/// let mut batch = Batch::new("import-2026-12-06");
/// for row in 0..3 {
///     batch.add(Import::new(row));
/// }
/// batch.on(BatchCallback::Finish, Report::new("rows.csv".into()));
/// let stored = jobq.enqueue_batch(batch).await?;
/// assert_eq!(stored.jobs.len(), 3);
/// let state = jobq.batch("import-2026-12-06").await?.expect("stored");
/// assert_eq!((state.jobs, state.unfinished, state.state()), (3, 3, "running"));
/// # Ok(()) }
/// ```
pub struct Batch {
    id: String,
    jobs: Vec<Make>,
    callbacks: Vec<(BatchCallback, Make)>,
    open: bool,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("id", &self.id)
            .field("jobs", &self.jobs.len())
            .field(
                "callbacks",
                &self.callbacks.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            )
            .field("open", &self.open)
            .finish()
    }
}

impl Batch {
    /// An empty batch named `id` (1 to [`MAX_BATCH_NAME`] bytes, taken by
    /// one batch only): how [`Jobq::batch`], [`Jobq::add_to_batch`] and
    /// [`Jobq::close_batch`] find it.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            jobs: Vec::new(),
            callbacks: Vec::new(),
            open: false,
        }
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Adds `job`, with its own defaults.
    pub fn add<J: Job>(&mut self, job: J) -> &mut Self {
        self.add_with(job, Enqueue::new())
    }

    /// [`add`](Self::add) with enqueue options.
    pub fn add_with<J: Job>(&mut self, job: J, options: Enqueue) -> &mut Self {
        self.jobs
            .push(Box::new(move |jobq: &Jobq| jobq.row(&job, options)));
        self
    }

    /// Runs `job` when the batch does as `when` says (a batch may have
    /// any number of callbacks). Given with the batch only.
    pub fn on<J: Job>(&mut self, when: BatchCallback, job: J) -> &mut Self {
        self.on_with(when, job, Enqueue::new())
    }

    /// [`on`](Self::on) with enqueue options (a callback may not have a
    /// concurrency key).
    pub fn on_with<J: Job>(&mut self, when: BatchCallback, job: J, options: Enqueue) -> &mut Self {
        self.callbacks
            .push((when, Box::new(move |jobq: &Jobq| jobq.row(&job, options))));
        self
    }

    /// Leaves the batch open to [`Jobq::add_to_batch`] once stored: its
    /// finish and success callbacks wait for [`Jobq::close_batch`]. A
    /// batch never closed never finishes ([`Jobq::batch`] shows it open).
    pub fn keep_open(&mut self) -> &mut Self {
        self.open = true;
        self
    }

    /// Checks the batch and makes its rows: a new batch (`create`) or
    /// jobs for a stored one.
    fn rows(self, jobq: &Jobq, create: bool) -> Result<NewBatch> {
        let refuse = |why: String| -> crate::Error { InvalidArgument::Batch(why).into() };
        if self.id.is_empty() || self.id.len() > MAX_BATCH_NAME {
            return Err(refuse(format!(
                "its id must be 1 to {MAX_BATCH_NAME} bytes, not {}",
                self.id.len()
            )));
        }
        let count = self.jobs.len() + self.callbacks.len();
        if count > MAX_BATCH_JOBS {
            return Err(refuse(format!(
                "it has {count} jobs, over the {MAX_BATCH_JOBS} one call may store (add more with add_to_batch)"
            )));
        }
        if !create && !self.callbacks.is_empty() {
            return Err(refuse(
                "callbacks are given with the batch, not added to it".to_owned(),
            ));
        }
        if !create && self.jobs.is_empty() {
            return Err(refuse("there is no job to add".to_owned()));
        }
        let mut jobs = Vec::with_capacity(count);
        for make in self.jobs {
            let mut row = make(jobq)?;
            row.metadata
                .get_or_insert_with(Default::default)
                .insert(BATCH_KEY.to_owned(), self.id.clone().into());
            jobs.push((BATCH_JOB, row));
        }
        for (when, make) in self.callbacks {
            let mut row = make(jobq)?;
            if row.concurrency.is_some() {
                return Err(refuse(format!(
                    "its {} callback has a concurrency key: a job may wait on its batch or on a key, not both",
                    when.as_str()
                )));
            }
            let metadata = row.metadata.get_or_insert_with(Default::default);
            metadata.insert(CALLBACK_OF_KEY.to_owned(), self.id.clone().into());
            metadata.insert(CALLBACK_KEY.to_owned(), when.as_str().into());
            jobs.push((when.as_str(), row));
        }
        Ok(NewBatch {
            id: self.id,
            create,
            close: create && !self.open,
            jobs,
        })
    }
}

/// What [`Jobq::enqueue_batch`] or [`Jobq::add_to_batch`] stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchEnqueued {
    /// The batch's id.
    pub id: String,
    /// The ids of the jobs stored, in the order given.
    pub jobs: Vec<i64>,
    /// The callbacks' job ids, in the order given.
    pub callbacks: Vec<(BatchCallback, i64)>,
}

/// A batch as stored ([`Jobq::batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchInfo {
    /// The batch's id.
    pub id: String,
    /// Closed to more jobs.
    pub closed: bool,
    /// How many jobs it was given.
    pub jobs: u64,
    /// Of those, not ended yet (pending, running, blocked by a key).
    pub unfinished: u64,
    /// Done.
    pub succeeded: u64,
    /// Failed for good.
    pub failed: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Deleted before they ended.
    pub deleted: u64,
    /// Its callbacks.
    pub callbacks: Vec<BatchCallbackJob>,
}

impl BatchInfo {
    /// The whole in a few words: `open` (not closed), `running`,
    /// `succeeded`, or `finished with failures`.
    pub fn state(&self) -> &'static str {
        if !self.closed {
            "open"
        } else if self.unfinished > 0 {
            "running"
        } else if self.failed + self.cancelled + self.deleted == 0 {
            "succeeded"
        } else {
            "finished with failures"
        }
    }
}

/// A callback of a [`BatchInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchCallbackJob {
    /// When it runs.
    pub when: BatchCallback,
    /// Its job id.
    pub id: i64,
    /// Its status (`blocked` until its batch calls for it); `None` once
    /// its row was pruned.
    pub status: Option<JobStatus>,
}

impl Jobq {
    /// Stores `batch` in one transaction: every job and callback, or none
    /// (see [`Batch`]); closed unless it was [kept open](Batch::keep_open).
    ///
    /// # Errors
    /// [`InvalidArgument::Batch`] for a batch that cannot be stored (its
    /// id taken or not valid, too many jobs, a callback with a concurrency
    /// key, a job that is a duplicate of a stored one) — nothing is
    /// stored; what [`enqueue`](Self::enqueue) returns.
    ///
    /// # Cancel safety
    /// As [`enqueue_many`](Self::enqueue_many)'s: stored whole or not at all.
    pub async fn enqueue_batch(&self, batch: Batch) -> Result<BatchEnqueued> {
        let batch = batch.rows(self, true)?;
        let enqueued = self.store().enqueue_batch(&batch).await?;
        Ok(stored(&batch, &enqueued))
    }

    /// [`enqueue_batch`](Self::enqueue_batch) inside the caller's
    /// transaction (see [`enqueue_in`](Self::enqueue_in)). A batch stored
    /// closed and empty this way runs its callbacks at a worker's next
    /// sweep after the commit. On an error, roll the transaction back.
    pub async fn enqueue_batch_in<'c, C>(&self, conn: C, batch: Batch) -> Result<BatchEnqueued>
    where
        C: EnqueueConnection<'c>,
    {
        let batch = batch.rows(self, true)?;
        let enqueued = self
            .store()
            .enqueue_batch_in(conn.into_connection(), &batch)
            .await?;
        Ok(stored(&batch, &enqueued))
    }

    /// Adds the jobs of `more` to the stored open batch of the same id, in
    /// one transaction (a handler may add to its own batch). Callbacks are
    /// given with the batch, not here.
    ///
    /// # Errors
    /// [`InvalidArgument::Batch`] if the batch is closed or unknown, or
    /// `more` has callbacks or no job — nothing is stored.
    pub async fn add_to_batch(&self, more: Batch) -> Result<BatchEnqueued> {
        let batch = more.rows(self, false)?;
        let enqueued = self.store().enqueue_batch(&batch).await?;
        Ok(stored(&batch, &enqueued))
    }

    /// [`add_to_batch`](Self::add_to_batch) inside the caller's transaction.
    pub async fn add_to_batch_in<'c, C>(&self, conn: C, more: Batch) -> Result<BatchEnqueued>
    where
        C: EnqueueConnection<'c>,
    {
        let batch = more.rows(self, false)?;
        let enqueued = self
            .store()
            .enqueue_batch_in(conn.into_connection(), &batch)
            .await?;
        Ok(stored(&batch, &enqueued))
    }

    /// Closes batch `id` to more jobs: its finish and success callbacks
    /// run once every job has ended (at once if they all have). Whether
    /// this call closed it (`false`: it was closed already).
    ///
    /// # Errors
    /// [`InvalidArgument::Batch`] if there is no such batch.
    pub async fn close_batch(&self, id: &str) -> Result<bool> {
        match self.store().close_batch(id).await? {
            Some(closed) => Ok(closed),
            None => Err(InvalidArgument::Batch(format!("there is no batch {id:?}")).into()),
        }
    }

    /// Batch `id` as stored: how many of its jobs have ended and how, and
    /// its callbacks; `None` if there is no such batch (or it was
    /// forgotten once its jobs' rows were all pruned).
    pub async fn batch(&self, id: &str) -> Result<Option<BatchInfo>> {
        let Some(rows) = self.store().batch_read(id).await? else {
            return Ok(None);
        };
        let mut info = BatchInfo {
            id: id.to_owned(),
            closed: rows.closed,
            jobs: u64::try_from(rows.jobs).unwrap_or(0),
            unfinished: 0,
            succeeded: 0,
            failed: 0,
            cancelled: 0,
            deleted: 0,
            callbacks: Vec::new(),
        };
        for (outcome, status, n) in &rows.counts {
            let n = u64::try_from(*n).unwrap_or(0);
            let recorded = outcome.as_deref().filter(|o| *o != "open");
            let count = match recorded.or(status.as_deref()) {
                Some("done") => &mut info.succeeded,
                Some("failed") => &mut info.failed,
                Some("cancelled") => &mut info.cancelled,
                Some("deleted") | None => &mut info.deleted,
                Some(_) => &mut info.unfinished,
            };
            *count += n;
        }
        info.callbacks = rows
            .callbacks
            .iter()
            .filter_map(|(job, role, status)| {
                Some(BatchCallbackJob {
                    when: BatchCallback::parse(role)?,
                    id: *job,
                    status: status.as_deref().and_then(|s| s.parse().ok()),
                })
            })
            .collect();
        Ok(Some(info))
    }

    /// Closes batch `id` and cancels its jobs that have not ended (a
    /// running one is told to stop, as [`cancel`](Self::cancel) does); its
    /// callbacks then run as for any cancelled job (failure, then finish).
    /// How many it cancelled.
    ///
    /// # Errors
    /// [`InvalidArgument::Batch`] if there is no such batch.
    pub async fn cancel_batch(&self, id: &str) -> Result<u64> {
        self.close_batch(id).await?;
        let mut cancelled = 0;
        for job in self.store().batch_unfinished(id).await? {
            if self.cancel(job).await? {
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }
}

/// The ids `enqueued` gave `batch`'s jobs and callbacks.
fn stored(batch: &NewBatch, enqueued: &[Enqueued]) -> BatchEnqueued {
    let mut out = BatchEnqueued {
        id: batch.id.clone(),
        jobs: Vec::new(),
        callbacks: Vec::new(),
    };
    for ((role, _), e) in batch.jobs.iter().zip(enqueued) {
        match BatchCallback::parse(role) {
            Some(when) => out.callbacks.push((when, e.id)),
            None => out.jobs.push(e.id),
        }
    }
    out
}
