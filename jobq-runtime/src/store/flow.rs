//! Workflows in the store: jobs that run only after others.
//!
//! A workflow's jobs are inserted in one transaction with a row each in
//! `jobq_flow_jobs` (workflow, task name) and a row per dependency in
//! `jobq_deps`; a job with dependencies is stored `blocked`, outside the
//! claim's range, so a job with none pays nothing anywhere.
//!
//! **The release.** After a job of a workflow settles for good (done,
//! failed, cancelled) and that has committed, its worker (or the process
//! that cancelled it) releases its dependents, in three steps each a
//! statement of its own: record the job's final status on the dependencies
//! on it (`outcome`, set once); read its `blocked` dependents with whether
//! one of their dependencies ended in a way they do not run after
//! (`doomed`) and whether all have ended (`ready`), each an index lookup on
//! `(job_id, outcome)`; then make the ready ones `pending` and cancel the
//! doomed ones, each guarded by `status = 'blocked'` so that two releases
//! move a job once. A cancel releases in turn (the cascade, level by level).
//!
//! Two dependencies settling at once cannot both miss their dependent: each
//! release's first statement commits before its read, so the read of the
//! later one sees both outcomes. A worker that dies between a settle and
//! its release leaves the outcome unrecorded: the sweep (run with the
//! reaper) records every finished dependency's outcome, or `deleted` for
//! one whose row is gone, and moves the `blocked` jobs a release should
//! have moved.

use super::contract::BackendStore;
use super::policy::retried;
use crate::error::Result;
use crate::metrics::statement;
use crate::store::contract::Dependent;

/// Levels of a cascade of cancels one release follows (deeper ones are
/// left to the sweep).
const CASCADE_LEVELS: usize = 64;

/// What a release moved: the jobs made `pending` (id, queue) and cancelled.
#[derive(Debug, Clone, Default)]
pub(crate) struct Released {
    pub(crate) unblocked: Vec<(i64, String)>,
    pub(crate) cancelled: Vec<i64>,
}

impl Released {
    /// Adds what `other` moved.
    pub(crate) fn absorb(&mut self, other: Released) {
        self.unblocked.extend(other.unblocked);
        self.cancelled.extend(other.cancelled);
    }
}

/// The `last_error` of a job cancelled because of a dependency.
pub(crate) const DOOMED: &str =
    "cancelled: a job it depends on failed, was cancelled or was deleted";

/// Which `dependents` to make `pending` and which to cancel: a doomed one
/// is cancelled even if it is otherwise ready (it would run without what
/// it needs); one neither doomed nor ready waits.
pub(crate) fn decide(dependents: &[Dependent]) -> (Vec<(i64, String)>, Vec<i64>) {
    let cancel = dependents
        .iter()
        .filter(|d| d.doomed)
        .map(|d| d.id)
        .collect();
    let unblock = dependents
        .iter()
        .filter(|d| d.ready && !d.doomed)
        .map(|d| (d.id, d.queue.clone()))
        .collect();
    (unblock, cancel)
}

/// Releases the dependents of the jobs `settled` (see the module docs),
/// each statement [`retried`].
pub(crate) async fn release<S: BackendStore>(store: &S, settled: &[i64]) -> Result<Released> {
    if settled.is_empty() {
        return Ok(Released::default());
    }
    // Nothing recorded: no job depends on these, or whoever recorded
    // (the sweep) moves what depends on them.
    let recorded = retried(store, statement::FLOW, || store.flow_settle(settled)).await?;
    if recorded == 0 {
        return Ok(Released::default());
    }
    let dependents = retried(store, statement::FLOW, || {
        store.flow_dependents(settled, true)
    })
    .await?;
    cascade(store, dependents).await
}

/// Rows [`forget`] reads a call (`FLOW_ORPHANS`' limit).
pub(crate) const FORGET_PAGE: usize = 500;

/// Where the last [`forget`] of this process stopped in `jobq_flow_jobs`.
static FORGET_CURSOR: std::sync::Mutex<i64> = std::sync::Mutex::new(0);

/// Forgets the workflow rows of one page of jobs whose rows are gone
/// (pruned, deleted), from where the last call of this process stopped,
/// wrapping around at the end: a workflow's names and dependencies go
/// some time after its jobs. How many jobs' rows it forgot.
pub(crate) async fn forget<S: BackendStore>(store: &S) -> Result<u64> {
    let after = *FORGET_CURSOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (last, forgotten) = retried(store, statement::FLOW, || store.flow_forget(after)).await?;
    *FORGET_CURSOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = last.unwrap_or(0);
    Ok(forgotten)
}

/// The sweep (see the module docs): what releases missed; at most 500
/// jobs a call.
pub(crate) async fn sweep<S: BackendStore>(store: &S) -> Result<Released> {
    forget(store).await?;
    let stuck = retried(store, statement::FLOW, || store.flow_stuck()).await?;
    if stuck.is_empty() {
        return Ok(Released::default());
    }
    let dependents = retried(store, statement::FLOW, || {
        store.flow_dependents(&stuck, false)
    })
    .await?;
    cascade(store, dependents).await
}

/// Moves `dependents` as [`decide`] says, then releases the dependents of
/// the ones it cancelled, level by level.
async fn cascade<S: BackendStore>(store: &S, mut dependents: Vec<Dependent>) -> Result<Released> {
    let mut released = Released::default();
    for _ in 0..CASCADE_LEVELS {
        let (unblock, cancel) = decide(&dependents);
        if unblock.is_empty() && cancel.is_empty() {
            break;
        }
        retried(store, statement::FLOW, || {
            store.flow_move(&unblock, &cancel, DOOMED)
        })
        .await?;
        released.unblocked.extend(unblock);
        if cancel.is_empty() {
            break;
        }
        released.cancelled.extend_from_slice(&cancel);
        retried(store, statement::FLOW, || store.flow_settle(&cancel)).await?;
        dependents = retried(store, statement::FLOW, || {
            store.flow_dependents(&cancel, true)
        })
        .await?;
    }
    Ok(released)
}

/// The JSON array of `ids`, as PostgreSQL's and SQLite's flow statements
/// take a list (MySQL's take IN-lists of placeholders).
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn id_list(ids: &[i64]) -> String {
    serde_json::Value::from(ids.to_vec()).to_string()
}

/// The contract's workflow methods every backend writes alike, expanded in
/// its `impl BackendStore`: `$insert` inserts one job on a connection
/// (`Result<Enqueued, sqlx::Error>`), `$begin` begins a transaction on one
/// (SQLite's `IMMEDIATE`), and `flow_now` binds a statement's leading time
/// where the backend takes one (SQLite); the backend's `flow_write` runs a write (on
/// SQLite in turn with the store's other writes) and its `causal` gives a
/// read that sees every write committed before it (on Galera, a sync wait).
macro_rules! flow_methods {
    ($begin:path) => {
        async fn enqueue_flow(
            &self,
            flow: &$crate::store::contract::NewFlow,
        ) -> Result<Vec<Enqueued>> {
            let enqueued = self
                .flow_write(async |conn| {
                    let mut tx = $begin(conn).await?;
                    let enqueued = flow_insert(&mut tx, flow).await?;
                    if enqueued.iter().any(|e| e.duplicate) {
                        tx.rollback().await?;
                    } else {
                        tx.commit().await?;
                    }
                    Ok(enqueued)
                })
                .await?;
            flow.check(&enqueued)?;
            self.ringer.announce(
                self.deadline,
                flow.jobs.iter().map(|(_, job)| job.queue.as_str()),
            );
            Ok(enqueued)
        }

        async fn enqueue_flow_in(
            conn: &mut Self::Connection,
            flow: &$crate::store::contract::NewFlow,
        ) -> Result<Vec<Enqueued>> {
            let enqueued = flow_insert(conn, flow).await?;
            flow.check(&enqueued)?;
            Ok(enqueued)
        }

        async fn flow_move(
            &self,
            unblock: &[(i64, String)],
            cancel: &[i64],
            why: &str,
        ) -> Result<()> {
            let ids: Vec<i64> = unblock.iter().map(|(id, _)| *id).collect();
            let unblock_sql = flow_sql(FLOW_UNBLOCK, ids.len());
            let cancel_sql = flow_sql(FLOW_CANCEL, cancel.len());
            self.flow_write(async |conn| {
                let mut tx = $begin(conn).await?;
                if !ids.is_empty() {
                    flow_bind(flow_now(sqlx::query(&unblock_sql)), &ids)
                        .execute(&mut *tx)
                        .await?;
                }
                if !cancel.is_empty() {
                    flow_bind(flow_now(sqlx::query(&cancel_sql)).bind(why), cancel)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await
            })
            .await?;
            self.ringer.announce(
                self.deadline,
                unblock.iter().map(|(_, queue)| queue.as_str()),
            );
            Ok(())
        }

        async fn flow_settle(&self, ids: &[i64]) -> Result<u64> {
            let sql = flow_sql(FLOW_SETTLE, ids.len());
            self.flow_write(async |conn| {
                Ok(flow_bind(sqlx::query(&sql), ids)
                    .execute(conn)
                    .await?
                    .rows_affected())
            })
            .await
        }

        async fn flow_dependents(
            &self,
            ids: &[i64],
            of: bool,
        ) -> Result<Vec<$crate::store::contract::Dependent>> {
            use $crate::store::shared::Columns;
            // On Galera behind a sync wait: the outcome another node's
            // release recorded first is seen here.
            let text = flow_sql(
                if of {
                    FLOW_DEPENDENTS_OF
                } else {
                    FLOW_EVALUATE
                },
                ids.len(),
            );
            let sql = self.causal(&text);
            let rows = self
                .run(statement::FLOW, async |conn| {
                    flow_bind(sqlx::query(&sql), ids).fetch_all(conn).await
                })
                .await?;
            Ok(rows
                .iter()
                .map(|row| {
                    Ok($crate::store::contract::Dependent {
                        id: row.int("id")?,
                        queue: row.text("queue")?,
                        doomed: row.count("doomed")? != 0,
                        ready: row.count("ready")? != 0,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?)
        }

        async fn flow_stuck(&self) -> Result<Vec<i64>> {
            use $crate::store::shared::Columns;
            self.flow_write(async |conn| {
                sqlx::query($crate::store::sql::FLOW_SETTLE_FINISHED)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            })
            .await?;
            let gone = self
                .run(statement::FLOW, async |conn| {
                    sqlx::query($crate::store::sql::FLOW_GONE_PICK)
                        .fetch_all(conn)
                        .await
                })
                .await?
                .iter()
                .map(|row| row.int("id"))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            if !gone.is_empty() {
                let sql = flow_sql(FLOW_GONE, gone.len());
                self.flow_write(async |conn| {
                    flow_bind(sqlx::query(&sql), &gone).execute(conn).await?;
                    Ok(())
                })
                .await?;
            }
            let rows = self
                .run(statement::FLOW, async |conn| {
                    sqlx::query($crate::store::sql::FLOW_STUCK)
                        .fetch_all(conn)
                        .await
                })
                .await?;
            Ok(rows
                .iter()
                .map(|row| row.int("id"))
                .collect::<Result<Vec<_>, sqlx::Error>>()?)
        }

        async fn flow_forget(&self, after: i64) -> Result<(Option<i64>, u64)> {
            use $crate::store::shared::Columns;
            let rows = self
                .run(statement::FLOW, async |conn| {
                    sqlx::query(FLOW_ORPHANS).bind(after).fetch_all(conn).await
                })
                .await?
                .iter()
                .map(|row| Ok((row.int("id")?, row.count("gone")? != 0)))
                .collect::<Result<Vec<(i64, bool)>, sqlx::Error>>()?;
            let last = (rows.len() == $crate::store::flow::FORGET_PAGE)
                .then(|| rows.last().map(|&(id, _)| id))
                .flatten();
            let gone: Vec<i64> = rows.iter().filter(|r| r.1).map(|r| r.0).collect();
            if !gone.is_empty() {
                let (deps, jobs) = (
                    flow_sql(FLOW_FORGET_DEPS, gone.len()),
                    flow_sql(FLOW_FORGET_JOBS, gone.len()),
                );
                self.flow_write(async |conn| {
                    flow_bind(sqlx::query(&deps), &gone)
                        .execute(&mut *conn)
                        .await?;
                    flow_bind(sqlx::query(&jobs), &gone)
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
                .await?;
            }
            Ok((last, gone.len() as u64))
        }

        async fn flow_read(&self, workflow: &str) -> Result<$crate::store::contract::FlowRows> {
            use $crate::store::shared::Columns;
            let (jobs, edges) = self
                .run(statement::READ, async |conn| {
                    let jobs = sqlx::query(FLOW_READ)
                        .bind(workflow)
                        .fetch_all(&mut *conn)
                        .await?;
                    let edges = sqlx::query(FLOW_READ_DEPS)
                        .bind(workflow)
                        .fetch_all(&mut *conn)
                        .await?;
                    Ok((jobs, edges))
                })
                .await?;
            let jobs = jobs
                .iter()
                .map(|row| Ok((row.int("id")?, row.text("task")?, row.opt_text("status")?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            let edges = edges
                .iter()
                .map(|row| {
                    Ok((
                        row.int("job_id")?,
                        row.int("depends_on")?,
                        row.small("run_anyway")? != 0,
                    ))
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok($crate::store::contract::FlowRows { jobs, edges })
        }

        async fn flow_outputs(&self, job: i64) -> Result<Vec<(String, Option<String>)>> {
            use $crate::store::shared::Columns;
            let rows = self
                .run(statement::READ, async |conn| {
                    sqlx::query(FLOW_OUTPUTS).bind(job).fetch_all(conn).await
                })
                .await?;
            Ok(rows
                .iter()
                .map(|row| Ok((row.text("task")?, row.opt_text("output")?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?)
        }
    };
}
pub(crate) use flow_methods;

/// Inserts `flow`'s rows on `conn` (the caller's transaction, or one of
/// the store's): its jobs with `$insert`, their names, their dependencies,
/// and holds the jobs that have some. Expanded in each backend's module.
macro_rules! flow_insert {
    ($conn:ty, $insert:path) => {
        async fn flow_insert(
            conn: &mut $conn,
            flow: &$crate::store::contract::NewFlow,
        ) -> Result<Vec<Enqueued>, sqlx::Error> {
            let mut enqueued = Vec::with_capacity(flow.jobs.len());
            for (_, job) in &flow.jobs {
                enqueued.push($insert(&mut *conn, job).await?);
            }
            if enqueued.iter().any(|e| e.duplicate) {
                return Ok(enqueued);
            }
            let (names, edges, hold) = flow.rows(&enqueued);
            sqlx::query(FLOW_JOBS_INSERT)
                .bind(names)
                .execute(&mut *conn)
                .await?;
            if !flow.edges.is_empty() {
                sqlx::query(FLOW_EDGES_INSERT)
                    .bind(edges)
                    .execute(&mut *conn)
                    .await?;
                flow_bind(sqlx::query(&flow_sql(FLOW_HOLD, hold.len())), &hold)
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(enqueued)
        }
    };
}
pub(crate) use flow_insert;

#[cfg(test)]
mod tests {
    use super::*;

    fn dependent(id: i64, doomed: bool, ready: bool) -> Dependent {
        Dependent {
            id,
            queue: "q".to_owned(),
            doomed,
            ready,
        }
    }

    #[test]
    fn a_doomed_dependent_is_cancelled_even_when_ready_and_one_still_waiting_stays() {
        let (unblock, cancel) = decide(&[
            dependent(1, false, true),
            dependent(2, true, true),
            dependent(3, true, false),
            dependent(4, false, false),
        ]);
        assert_eq!(unblock, vec![(1, "q".to_owned())]);
        assert_eq!(cancel, vec![2, 3]);
    }
}
