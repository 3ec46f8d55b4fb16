//! A handler that completes its own job in its transaction
//! ([`CompleteIn`]): its writes and the job's `done` commit together or not
//! at all.

use std::future::Future;

use jobq_core::JobContext;

use crate::connection::EnqueueConnection;
use crate::error::{Error, Result};
use crate::store::{Fence, Store};

/// Completes the running attempt's job in the caller's transaction, on a
/// connection to the job's own database: the handler's writes and the
/// job's `done` (with its output) commit together, or neither does.
///
/// Fenced like every settle: the statement matches the job's row only
/// while this attempt holds it, so an attempt whose lease expired (the job
/// was reaped and claimed again), a cancelled job, or a second call, gets
/// [`Error::CompleteIn`] before the caller commits. The worker does not
/// complete the job again. If the transaction rolls back (or has not
/// committed when the handler returns `Ok`), the job is not done: the
/// worker settles the attempt as failed — retried on the job's schedule,
/// its message saying the completion did not commit — as it would a
/// returned error. A handler that returns an error after completing in a
/// transaction that committed changes nothing: the job is done (one that
/// rolled back is settled as that error says).
///
/// On SQLite the transaction holds the database's one write lock until it
/// ends: jobq's own writes (other jobs' settles, heartbeats) wait for it,
/// so keep it short.
///
/// ```no_run
/// use jobq_runtime::{job, CompleteIn, JobContext, JobError, Jobq, State};
///
/// #[job]
/// async fn charge(ctx: JobContext, db: State<Jobq>, order: u64) -> Result<(), JobError> {
///     let pool = db.sqlite_pool().expect("SQLite");
///     let mut tx = pool.begin().await.map_err(JobError::retry)?;
///     sqlx::query("UPDATE orders SET paid = 1 WHERE id = ?")
///         .bind(order as i64)
///         .execute(&mut *tx)
///         .await
///         .map_err(JobError::retry)?;
///     ctx.complete_in_with(&mut *tx, &"paid").await.map_err(JobError::retry)?;
///     tx.commit().await.map_err(JobError::retry)?;
///     Ok(())
/// }
/// # use jobq_runtime::sqlx;
/// # fn main() {}
/// ```
pub trait CompleteIn {
    /// Marks this attempt's job `done` in `conn`'s transaction.
    ///
    /// # Errors
    /// [`Error::CompleteIn`] when the attempt no longer holds the job (or
    /// the context has no worker behind it); a database error (the
    /// transaction is then the caller's to roll back).
    fn complete_in<'c>(
        &self,
        conn: impl EnqueueConnection<'c>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// [`complete_in`](Self::complete_in) with `output` as the job's output
    /// (as a `#[job]` fn's return value would be).
    ///
    /// # Errors
    /// As `complete_in`, and [`Error::CompleteIn`] when `output` does not
    /// serialize or is over [`MAX_OUTPUT_BYTES`](crate::MAX_OUTPUT_BYTES).
    fn complete_in_with<'c, T: serde::Serialize + Sync + ?Sized>(
        &self,
        conn: impl EnqueueConnection<'c>,
        output: &T,
    ) -> impl Future<Output = Result<()>> + Send;
}

impl CompleteIn for JobContext {
    fn complete_in<'c>(
        &self,
        conn: impl EnqueueConnection<'c>,
    ) -> impl Future<Output = Result<()>> + Send {
        let conn = conn.into_connection();
        async move { complete(self, conn, None).await }
    }

    fn complete_in_with<'c, T: serde::Serialize + Sync + ?Sized>(
        &self,
        conn: impl EnqueueConnection<'c>,
        output: &T,
    ) -> impl Future<Output = Result<()>> + Send {
        let conn = conn.into_connection();
        let output = jobq_core::__private::output_json(output);
        async move {
            let output = output.map_err(|error| Error::CompleteIn {
                id: self.id(),
                why: error.message().to_owned(),
            })?;
            complete(self, conn, output).await
        }
    }
}

async fn complete(
    ctx: &JobContext,
    conn: crate::connection::AnyConnection<'_>,
    output: Option<String>,
) -> Result<()> {
    let id = ctx.id();
    let Some(token) = ctx.lease_token() else {
        return Err(Error::CompleteIn {
            id,
            why: "this context has no worker behind it".to_owned(),
        });
    };
    if Store::complete_in(conn, Fence { id, token }, output.as_deref()).await? {
        ctx.mark_completed_in();
        Ok(())
    } else {
        Err(Error::CompleteIn {
            id,
            why: "this attempt no longer holds it (its lease expired and it was claimed again, it was cancelled, or it was completed already); nothing was written".to_owned(),
        })
    }
}
