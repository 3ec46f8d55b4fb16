//! Batches in the store: a group of jobs with callbacks that run once the
//! group has finished, has succeeded, or sees its first failure.
//!
//! A batch is a row in `jobq_batches` (closed to additions or not) and a
//! row in `jobq_batch_jobs` per job, with its role: one of the batch's own
//! jobs, or a callback. The callbacks are inserted with the batch, as jobs
//! stored `blocked` (outside the claim's range), so firing one is making it
//! `pending` — an update guarded by `status = 'blocked'` that moves a job
//! once however many releases try (on Galera too: two nodes' updates of one
//! row do not both certify) — and a callback that will not fire is
//! cancelled, with a `last_error` that says why.
//!
//! **The release.** After one of a batch's jobs settles for good (done,
//! failed, cancelled) and that has committed, its worker (or the process
//! that cancelled it) records the job's final status on its batch row
//! (`outcome`, `open` until then, set once) and counts it on the batch's
//! row (ended, and not done) — one short transaction, committed — then
//! reads the `blocked` callbacks of its batch with the batch's state from
//! that row — closed, fewer ended than it was given (`open`), one not done
//! (`failed`) — and moves them as [`decide`] says. Two jobs settling at
//! once cannot both miss the callback: each records before it reads, so
//! the read of the later one sees both. A close does the same read after
//! its commit, so a batch whose jobs all ended before it was closed fires
//! on the close. A worker that dies between a settle and its release
//! leaves the outcome unrecorded: the sweep (run with the reaper) records
//! every finished job's outcome, or `deleted` for one whose row is gone,
//! and moves the callbacks a release should have moved.
//!
//! **Counted once.** The record locks the batch rows of the jobs still
//! `open` among those it is given, records their outcomes and counts what
//! it recorded, in one transaction: two records of one job (a release and
//! the sweep) wait on each other's lock, and the later finds it recorded;
//! on Galera the later's write of the same row does not certify, and its
//! retry finds it recorded.

use super::contract::{BackendStore, Callback, CallbacksOf};
use super::flow::Released;
use super::policy::retried;
use crate::error::Result;
use crate::metrics::statement;

/// The `last_error` of a success callback cancelled because a job of its
/// batch did not succeed.
pub(crate) const NOT_SUCCEEDED: &str = "cancelled: a job of its batch failed, was cancelled or was deleted, and a success callback runs only when every job succeeded";

/// The `last_error` of a failure callback cancelled because its batch
/// finished with no failure.
pub(crate) const NO_FAILURE: &str = "cancelled: its batch finished with every job succeeded, and a failure callback runs only on a failure";

/// What [`decide`] does with a batch's `blocked` callbacks.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Moves {
    /// To make `pending` (id, queue).
    pub(crate) fire: Vec<(i64, String)>,
    /// Success callbacks to cancel: a job failed.
    pub(crate) not_succeeded: Vec<i64>,
    /// Failure callbacks to cancel: every job succeeded.
    pub(crate) no_failure: Vec<i64>,
}

/// What to do with `callbacks`: a failure callback fires on the first
/// failure, open or closed; a finish callback once the batch is closed
/// and every job has ended; a success callback then too if none failed.
/// One that can no longer fire is cancelled; the rest wait.
pub(crate) fn decide(callbacks: &[Callback]) -> Moves {
    let mut moves = Moves::default();
    for c in callbacks {
        let ended = c.closed && !c.open;
        match c.role.as_str() {
            "failure" if c.failed => moves.fire.push((c.id, c.queue.clone())),
            "failure" if ended => moves.no_failure.push(c.id),
            "success" if c.failed => moves.not_succeeded.push(c.id),
            "success" | "finish" if ended => moves.fire.push((c.id, c.queue.clone())),
            _ => {}
        }
    }
    moves
}

/// Moves `callbacks` as [`decide`] says.
async fn apply<S: BackendStore>(store: &S, callbacks: &[Callback]) -> Result<Released> {
    let moves = decide(callbacks);
    if !moves.fire.is_empty() || !moves.not_succeeded.is_empty() {
        retried(store, statement::FLOW, || {
            store.flow_move(&moves.fire, &moves.not_succeeded, NOT_SUCCEEDED)
        })
        .await?;
    }
    if !moves.no_failure.is_empty() {
        retried(store, statement::FLOW, || {
            store.flow_move(&[], &moves.no_failure, NO_FAILURE)
        })
        .await?;
    }
    let mut cancelled = moves.not_succeeded;
    cancelled.extend(moves.no_failure);
    Ok(Released {
        unblocked: moves.fire,
        cancelled,
    })
}

/// The release of the batch jobs among `settled` (see the module docs),
/// each statement [`retried`]: nothing past the first statement for jobs
/// of no batch.
pub(crate) async fn release<S: BackendStore>(store: &S, settled: &[i64]) -> Result<Released> {
    if settled.is_empty() {
        return Ok(Released::default());
    }
    let recorded = retried(store, statement::FLOW, || store.batch_settle(settled)).await?;
    if recorded == 0 {
        return Ok(Released::default());
    }
    let callbacks = retried(store, statement::FLOW, || {
        store.batch_callbacks(CallbacksOf::Jobs(settled))
    })
    .await?;
    apply(store, &callbacks).await
}

/// Moves batch `id`'s callbacks as its state calls for (after a close).
pub(crate) async fn evaluate<S: BackendStore>(store: &S, id: &str) -> Result<Released> {
    let callbacks = retried(store, statement::FLOW, || {
        store.batch_callbacks(CallbacksOf::Batch(id))
    })
    .await?;
    apply(store, &callbacks).await
}

/// The sweep (see the module docs): what releases missed, at most 500
/// callbacks a call; and forgets batches whose jobs are all gone.
pub(crate) async fn sweep<S: BackendStore>(store: &S) -> Result<Released> {
    retried(store, statement::FLOW, || store.batch_forget()).await?;
    let stuck = retried(store, statement::FLOW, || store.batch_stuck()).await?;
    if stuck.is_empty() {
        return Ok(Released::default());
    }
    let callbacks = retried(store, statement::FLOW, || {
        store.batch_callbacks(CallbacksOf::Callbacks(&stuck))
    })
    .await?;
    apply(store, &callbacks).await
}

/// The contract's batch methods every backend writes alike, expanded in
/// its `impl BackendStore` beside [`flow_methods`](super::flow::flow_methods)
/// (whose helpers they use: `flow_write`, `flow_sql`, `flow_bind`,
/// `causal`, `run`).
macro_rules! batch_methods {
    ($begin:path) => {
        async fn enqueue_batch(
            &self,
            batch: &$crate::store::contract::NewBatch,
        ) -> Result<$crate::store::contract::BatchInsert> {
            use $crate::store::contract::BatchInsert;
            let done = self
                .flow_write(async |conn| {
                    let mut tx = $begin(conn).await?;
                    let done = batch_insert(&mut tx, batch).await?;
                    match &done {
                        BatchInsert::Stored(e) if !e.iter().any(|e| e.duplicate) => {
                            tx.commit().await?
                        }
                        _ => tx.rollback().await?,
                    }
                    Ok(done)
                })
                .await?;
            if let BatchInsert::Stored(enqueued) = &done {
                batch.check(enqueued)?;
                self.ringer.announce(
                    self.deadline,
                    batch.jobs.iter().map(|(_, job)| job.queue.as_str()),
                );
            }
            Ok(done)
        }

        async fn enqueue_batch_in(
            conn: &mut Self::Connection,
            batch: &$crate::store::contract::NewBatch,
        ) -> Result<$crate::store::contract::BatchInsert> {
            let done = batch_insert(conn, batch).await?;
            if let $crate::store::contract::BatchInsert::Stored(enqueued) = &done {
                batch.check(enqueued)?;
            }
            Ok(done)
        }

        async fn batch_close(&self, id: &str) -> Result<Option<bool>> {
            let changed = self
                .flow_write(async |conn| {
                    Ok(sqlx::query(BATCH_CLOSE)
                        .bind(id)
                        .execute(conn)
                        .await?
                        .rows_affected())
                })
                .await?;
            if changed > 0 {
                return Ok(Some(true));
            }
            let sql = self.causal(BATCH_READ);
            let found = self
                .run(statement::READ, async |conn| {
                    sqlx::query(&sql).bind(id).fetch_optional(conn).await
                })
                .await?;
            Ok(found.map(|_| false))
        }

        async fn batch_settle(&self, ids: &[i64]) -> Result<u64> {
            use $crate::store::shared::Columns;
            // Only jobs of batches come here (`ClaimedJob::releases`), so
            // the rows are nearly always open: they are locked at once.
            let lock = flow_sql(BATCH_LOCK, ids.len());
            self.flow_write(async |conn| {
                let mut tx = $begin(conn).await?;
                let locked = flow_bind(sqlx::query(&lock), ids)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|row| row.int("id"))
                    .collect::<Result<Vec<i64>, sqlx::Error>>()?;
                if locked.is_empty() {
                    tx.rollback().await?;
                    return Ok(0);
                }
                let record = flow_sql(BATCH_RECORD, locked.len());
                flow_bind(sqlx::query(&record), &locked)
                    .execute(&mut *tx)
                    .await?;
                let recorded = flow_sql(BATCH_RECORDED, locked.len());
                let rows = flow_bind(sqlx::query(&recorded), &locked)
                    .fetch_all(&mut *tx)
                    .await?;
                // Per batch: how many ended, how many of those not done.
                let mut counts = std::collections::BTreeMap::<String, (i64, i64)>::new();
                for row in &rows {
                    let count = counts.entry(row.text("batch")?).or_default();
                    count.0 += 1;
                    if row.text("outcome")? != "done" {
                        count.1 += 1;
                    }
                }
                for (batch, (ended, failed)) in &counts {
                    sqlx::query(BATCH_COUNT)
                        .bind(ended)
                        .bind(failed)
                        .bind(batch)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(rows.len() as u64)
            })
            .await
        }

        async fn batch_callbacks(
            &self,
            of: $crate::store::contract::CallbacksOf<'_>,
        ) -> Result<Vec<$crate::store::contract::Callback>> {
            use $crate::store::contract::CallbacksOf;
            use $crate::store::shared::Columns;
            let text = match of {
                CallbacksOf::Jobs(ids) => String::from(flow_sql(BATCH_CALLBACKS_OF, ids.len())),
                CallbacksOf::Callbacks(ids) => String::from(flow_sql(BATCH_EVALUATE, ids.len())),
                CallbacksOf::Batch(_) => String::from(BATCH_CALLBACKS_IN),
            };
            // On Galera behind a sync wait: the outcome another node's
            // release recorded first is seen here.
            let sql = self.causal(&text);
            let rows = self
                .run(statement::FLOW, async |conn| {
                    let query = sqlx::query(&sql);
                    match of {
                        CallbacksOf::Jobs(ids) | CallbacksOf::Callbacks(ids) => {
                            flow_bind(query, ids).fetch_all(conn).await
                        }
                        CallbacksOf::Batch(id) => query.bind(id).fetch_all(conn).await,
                    }
                })
                .await?;
            Ok(rows
                .iter()
                .map(|row| {
                    Ok($crate::store::contract::Callback {
                        id: row.int("id")?,
                        queue: row.text("queue")?,
                        role: row.text("role")?,
                        closed: row.small("closed")? != 0,
                        open: row.count("open")? != 0,
                        failed: row.count("failed")? != 0,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?)
        }

        async fn batch_stuck(&self) -> Result<Vec<i64>> {
            use $crate::store::shared::Columns;
            let ended = self
                .run(statement::FLOW, async |conn| {
                    sqlx::query($crate::store::sql::BATCH_ENDED_PICK)
                        .fetch_all(conn)
                        .await
                })
                .await?
                .iter()
                .map(|row| row.int("id"))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            if !ended.is_empty() {
                BackendStore::batch_settle(self, &ended).await?;
            }
            let rows = self
                .run(statement::FLOW, async |conn| {
                    sqlx::query($crate::store::sql::BATCH_STUCK)
                        .fetch_all(conn)
                        .await
                })
                .await?;
            Ok(rows
                .iter()
                .map(|row| row.int("id"))
                .collect::<Result<Vec<_>, sqlx::Error>>()?)
        }

        async fn batch_forget(&self) -> Result<u64> {
            use $crate::store::shared::Columns;
            let ids = self
                .run(statement::FLOW, async |conn| {
                    sqlx::query($crate::store::sql::BATCH_FORGET_PICK)
                        .fetch_all(conn)
                        .await
                })
                .await?
                .iter()
                .map(|row| row.text("id"))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            for id in &ids {
                self.flow_write(async |conn| {
                    let mut tx = $begin(conn).await?;
                    sqlx::query(BATCH_FORGET_JOBS)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(BATCH_FORGET).bind(id).execute(&mut *tx).await?;
                    tx.commit().await
                })
                .await?;
            }
            Ok(ids.len() as u64)
        }

        async fn batch_read(&self, id: &str) -> Result<Option<$crate::store::contract::BatchRows>> {
            use $crate::store::shared::Columns;
            let (sql, jobs_sql, callbacks_sql) = (
                self.causal(BATCH_READ),
                self.causal(BATCH_READ_JOBS),
                self.causal(BATCH_READ_CALLBACKS),
            );
            let read = self
                .run(statement::READ, async |conn| {
                    let Some(batch) = sqlx::query(&sql)
                        .bind(id)
                        .fetch_optional(&mut *conn)
                        .await?
                    else {
                        return Ok(None);
                    };
                    let jobs = sqlx::query(&jobs_sql)
                        .bind(id)
                        .fetch_all(&mut *conn)
                        .await?;
                    let callbacks = sqlx::query(&callbacks_sql)
                        .bind(id)
                        .fetch_all(&mut *conn)
                        .await?;
                    Ok(Some((batch, jobs, callbacks)))
                })
                .await?;
            let Some((batch, jobs, callbacks)) = read else {
                return Ok(None);
            };
            Ok(Some($crate::store::contract::BatchRows {
                closed: batch.small("closed")? != 0,
                jobs: batch.int("jobs")?,
                counts: jobs
                    .iter()
                    .map(|row| {
                        Ok((
                            row.opt_text("outcome")?,
                            row.opt_text("status")?,
                            row.int("n")?,
                        ))
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>()?,
                callbacks: callbacks
                    .iter()
                    .map(|row| Ok((row.int("id")?, row.text("role")?, row.opt_text("status")?)))
                    .collect::<Result<Vec<_>, sqlx::Error>>()?,
            }))
        }

        async fn batch_unfinished(&self, id: &str) -> Result<Vec<i64>> {
            use $crate::store::shared::Columns;
            let sql = self.causal(BATCH_UNFINISHED);
            let rows = self
                .run(statement::READ, async |conn| {
                    sqlx::query(&sql).bind(id).fetch_all(conn).await
                })
                .await?;
            Ok(rows
                .iter()
                .map(|row| row.int("id"))
                .collect::<Result<Vec<_>, sqlx::Error>>()?)
        }
    };
}
pub(crate) use batch_methods;

/// Inserts `batch`'s rows on `conn` (the caller's transaction, or one of
/// the store's): creates the batch or counts the jobs added to it
/// (refused unless it is open), inserts the jobs with `$insert`, their
/// batch rows, holds the callbacks, and closes the batch if asked.
/// Expanded in each backend's module.
macro_rules! batch_insert {
    ($conn:ty, $insert:path) => {
        async fn batch_insert(
            conn: &mut $conn,
            batch: &$crate::store::contract::NewBatch,
        ) -> Result<$crate::store::contract::BatchInsert, sqlx::Error> {
            use $crate::store::contract::BatchInsert;
            if batch.create {
                let created = sqlx::query(BATCH_CREATE)
                    .bind(&batch.id)
                    .bind(batch.members())
                    .execute(&mut *conn)
                    .await;
                match created {
                    Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                        return Ok(BatchInsert::Refused(format!(
                            "batch {:?} exists: choose an id no other batch has",
                            batch.id
                        )));
                    }
                    other => {
                        other?;
                    }
                }
            } else {
                let added = sqlx::query(BATCH_ADD)
                    .bind(batch.members())
                    .bind(&batch.id)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
                if added == 0 {
                    let found = sqlx::query(BATCH_READ)
                        .bind(&batch.id)
                        .fetch_optional(&mut *conn)
                        .await?;
                    return Ok(BatchInsert::Refused(match found {
                        Some(_) => format!(
                            "batch {:?} is closed: a closed batch takes no more jobs",
                            batch.id
                        ),
                        None => format!("there is no batch {:?}", batch.id),
                    }));
                }
            }
            let mut enqueued = Vec::with_capacity(batch.jobs.len());
            for (_, job) in &batch.jobs {
                enqueued.push($insert(&mut *conn, job).await?);
            }
            if enqueued.iter().any(|e| e.duplicate) {
                return Ok(BatchInsert::Stored(enqueued));
            }
            let (rows, hold) = batch.rows(&enqueued);
            if !batch.jobs.is_empty() {
                sqlx::query(BATCH_JOBS_INSERT)
                    .bind(rows)
                    .execute(&mut *conn)
                    .await?;
            }
            if !hold.is_empty() {
                flow_bind(sqlx::query(&flow_sql(FLOW_HOLD, hold.len())), &hold)
                    .execute(&mut *conn)
                    .await?;
            }
            if batch.close {
                sqlx::query(BATCH_CLOSE)
                    .bind(&batch.id)
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(BatchInsert::Stored(enqueued))
        }
    };
}
pub(crate) use batch_insert;

#[cfg(test)]
mod tests {
    use super::*;

    fn callback(id: i64, role: &str, closed: bool, open: bool, failed: bool) -> Callback {
        Callback {
            id,
            queue: "q".to_owned(),
            role: role.to_owned(),
            closed,
            open,
            failed,
        }
    }

    #[test]
    fn callbacks_fire_wait_or_are_cancelled_as_the_batch_stands() {
        let q = |id: i64| (id, "q".to_owned());
        // Open, nothing failed: every callback waits.
        let open = [
            callback(1, "finish", false, false, false),
            callback(2, "success", false, false, false),
            callback(3, "failure", false, false, false),
        ];
        assert_eq!(decide(&open), Moves::default());
        // Closed with a job still running: still waiting.
        let running = [callback(1, "finish", true, true, false)];
        assert_eq!(decide(&running), Moves::default());
        // A first failure while open: the failure callback fires, the
        // success callback can no longer, the finish callback waits.
        let failed = [
            callback(1, "finish", false, true, true),
            callback(2, "success", false, true, true),
            callback(3, "failure", false, true, true),
        ];
        assert_eq!(
            decide(&failed),
            Moves {
                fire: vec![q(3)],
                not_succeeded: vec![2],
                no_failure: vec![],
            }
        );
        // Closed, every job ended, none failed: finish and success fire,
        // failure is cancelled.
        let succeeded = [
            callback(1, "finish", true, false, false),
            callback(2, "success", true, false, false),
            callback(3, "failure", true, false, false),
        ];
        assert_eq!(
            decide(&succeeded),
            Moves {
                fire: vec![q(1), q(2)],
                not_succeeded: vec![],
                no_failure: vec![3],
            }
        );
        // Closed, ended with a failure: finish fires.
        let ended = [callback(1, "finish", true, false, true)];
        assert_eq!(decide(&ended).fire, vec![q(1)]);
    }
}
