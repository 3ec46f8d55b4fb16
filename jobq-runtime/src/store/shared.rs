//! The contract's methods whose code is the same in several backends, as
//! macros each of them expands in its `impl BackendStore`: one text, each
//! backend's own SQL where it expands — its `sql.rs` constants, its
//! `arguments` (the values of a filtered statement), its `run` (a read on
//! its stash within the deadline) and its `conns` (the stash) — and the
//! rows jobq reads written once over how each backend decodes its columns
//! ([`Columns`]). What differs between dialects stays in their folders;
//! what is here is only how the contract's values reach a statement and
//! come back.

use std::borrow::Cow;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::roster::WorkerRecord;
use crate::types::JobInfo;

/// A row of `jobq_jobs` or `jobq_workers` as one backend reads jobq's
/// columns: its integer widths, how its text columns decode, its times.
/// Each backend implements it for its row type (the table of its column
/// types); [`job_info`] and [`worker_record`] are written once on it.
pub(crate) trait Columns {
    /// A `BIGINT` column (ids, pids, counts).
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    /// `priority`, a `SMALLINT`.
    fn small(&self, column: &str) -> Result<i16, sqlx::Error>;
    /// `attempts` and `max_attempts`, an `INTEGER`.
    fn count(&self, column: &str) -> Result<i64, sqlx::Error>;
    /// A text column that is never NULL.
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    /// A text column that may be NULL.
    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    /// A time column that is never NULL.
    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error>;
    /// A time column that may be NULL.
    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error>;
}

/// A `jobq_jobs` row with every column `Jobq::job` reports.
pub(crate) fn job_info<R: Columns>(row: &R) -> Result<JobInfo> {
    let status = row.text("status")?;
    Ok(JobInfo {
        id: row.int("id")?,
        queue: row.text("queue")?,
        job_name: row.text("job_name")?,
        payload: row.text("payload")?,
        status: status.parse().map_err(Error::UnknownStatus)?,
        priority: row.small("priority")?,
        attempts: u32::try_from(row.count("attempts")?).unwrap_or(0),
        max_attempts: u32::try_from(row.count("max_attempts")?).unwrap_or(0),
        run_at: row.time("run_at")?,
        idempotency_key: row.opt_text("idempotency_key")?,
        last_error: row.opt_text("last_error")?,
        claimed_by: row.opt_text("claimed_by")?,
        claimed_at: row.opt_time("claimed_at")?,
        created_at: row.time("created_at")?,
        finished_at: row.opt_time("finished_at")?,
        history: crate::types::AttemptRecord::parse_history(row.opt_text("history")?.as_deref()),
        output: row.opt_text("output")?,
        progress: crate::types::JobProgress::parse(row.opt_text("progress")?.as_deref()),
        metadata: crate::types::parse_metadata(row.opt_text("metadata")?),
        tags: crate::types::parse_tags(row.opt_text("tags")?.as_deref()),
    })
}

/// A `jobq_workers` row.
pub(crate) fn worker_record<R: Columns>(row: &R) -> Result<WorkerRecord, sqlx::Error> {
    Ok(WorkerRecord {
        worker_id: row.text("worker_id")?,
        host: row.text("host")?,
        pid: row.int("pid")?,
        version: row.text("version")?,
        queues: row.text("queues")?,
        jobs: row.text("jobs")?,
        running: row.int("running")?,
        started_at: row.time("started_at")?,
        last_seen: row.time("last_seen")?,
        expires_at: row.time("expires_at")?,
    })
}

/// The reads every backend writes alike, one statement each: `job`,
/// `counts`, `applied_migrations`, and `list`, `count_where` and `ids`
/// (the rows, the count or the ids of a filtered statement). `$read`
/// gives the text that runs for a statement's SQL: [`as_is`], or MySQL's
/// `read` (on Galera, behind the sync wait).
macro_rules! reads {
    ($read:path) => {
        async fn job(&self, id: i64) -> Result<Option<JobInfo>> {
            let sql = $read(self, JOB);
            let row = self
                .run(statement::READ, async |conn| {
                    sqlx::query(&sql).bind(id).fetch_optional(conn).await
                })
                .await?;
            row.map(|row| $crate::store::shared::job_info(&row))
                .transpose()
        }

        async fn load_checkpoint(&self, id: i64) -> Result<Option<String>> {
            let sql = $read(self, CHECKPOINT_LOAD);
            let row = self
                .run(statement::READ, async |conn| {
                    sqlx::query(&sql).bind(id).fetch_optional(conn).await
                })
                .await?;
            Ok(match row {
                Some(row) => $crate::store::shared::Columns::opt_text(&row, "checkpoint")?,
                None => None,
            })
        }

        async fn counts(&self, queue: &str) -> Result<QueueCounts> {
            let sql = $read(self, COUNTS);
            let rows = self
                .run(statement::READ, async |conn| {
                    sqlx::query_as(&sql).bind(queue).fetch_all(conn).await
                })
                .await?;
            $crate::store::policy::counts(rows)
        }

        async fn applied_migrations(&self) -> Result<Vec<i64>> {
            let sql = $read(self, MIGRATIONS_APPLIED);
            self.run(statement::READ, async |conn| {
                sqlx::query_scalar(&sql).fetch_all(conn).await
            })
            .await
        }

        async fn list(&self, statement: &Statement) -> Result<Vec<JobInfo>> {
            let sql = $read(self, &statement.sql);
            let args = arguments(&statement.binds)?;
            let rows = self
                .run(statement::READ, async |conn| {
                    sqlx::query_with(&sql, args).fetch_all(conn).await
                })
                .await?;
            rows.iter().map($crate::store::shared::job_info).collect()
        }

        async fn count_where(&self, statement: &Statement) -> Result<u64> {
            let sql = $read(self, &statement.sql);
            let args = arguments(&statement.binds)?;
            let n: i64 = self
                .run(statement::READ, async |conn| {
                    sqlx::query_scalar_with(&sql, args).fetch_one(conn).await
                })
                .await?;
            Ok(u64::try_from(n).unwrap_or(0))
        }

        async fn ids(&self, statement: &Statement) -> Result<Vec<i64>> {
            let sql = $read(self, &statement.sql);
            let args = arguments(&statement.binds)?;
            self.run(statement::READ, async |conn| {
                sqlx::query_scalar_with(&sql, args).fetch_all(conn).await
            })
            .await
        }
    };
}
pub(crate) use reads;

/// The reads PostgreSQL and SQLite run alike: their statements number
/// their parameters (one value for each `$1`/`?1` however often it
/// stands) and their text decodes as `String`; MySQL/MariaDB's take
/// each value at each `?` and read text of binary collations.
/// `queues_with_rows`, `queue_controls` and `stats_finished`.
#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_macros)
)]
macro_rules! numbered_reads {
    () => {
        async fn queues_with_rows(&self) -> Result<Vec<String>> {
            self.run(statement::READ, async |conn| {
                sqlx::query_scalar(QUEUES).fetch_all(conn).await
            })
            .await
        }

        async fn queue_controls(&self) -> Result<Vec<QueueControl>> {
            let rows = self
                .run(statement::READ, async |conn| {
                    sqlx::query_as(CONTROLS).fetch_all(conn).await
                })
                .await?;
            Ok($crate::store::policy::controls(rows))
        }

        async fn stats_finished(&self, queue: &str, cap: i64) -> Result<[i64; 3]> {
            let (done, failed, cancelled) = self
                .run(statement::READ, async |conn| {
                    sqlx::query_as(STATS_FINISHED)
                        .bind(queue)
                        .bind(cap)
                        .fetch_one(conn)
                        .await
                })
                .await?;
            Ok([done, failed, cancelled])
        }
    };
}
#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_imports)
)]
pub(crate) use numbered_reads;

/// The writes MySQL/MariaDB and PostgreSQL run alike, one statement each
/// on the stash with the same values in the same order (their SQL
/// differs; SQLite binds the times its statements need, and takes the
/// write turn): `retry`, `set_paused`, the workers' rows, and the
/// attempts' fenced writes of one value (checkpoint, progress, completion
/// with an output, on the stash or on the caller's connection).
#[cfg_attr(
    not(any(feature = "mysql", feature = "postgres")),
    allow(unused_macros)
)]
macro_rules! server_writes {
    () => {
        async fn retry(&self, id: i64) -> Result<bool> {
            Ok(self.conns.execute(sqlx::query(RETRY).bind(id)).await? == 1)
        }

        async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool> {
            if paused {
                self.conns
                    .execute(sqlx::query(QUEUE_ROW).bind(queue))
                    .await?;
            }
            let sql = if paused { PAUSE } else { RESUME };
            let affected = self.conns.execute(sqlx::query(sql).bind(queue)).await?;
            Ok(affected == 1)
        }

        async fn register_worker(&self, row: &WorkerRow<'_>) -> Result<()> {
            let query = row.bind_identity(sqlx::query(WORKER_REGISTER));
            self.conns.execute(query.bind(micros(row.ttl))).await?;
            Ok(())
        }

        async fn refresh_worker(&self, refresh: WorkerRefresh) -> Result<bool> {
            let query = sqlx::query(WORKER_REFRESH)
                .bind(refresh.running)
                .bind(micros(refresh.ttl))
                .bind(refresh.id);
            Ok(self.conns.execute(query).await? == 1)
        }

        #[cfg(feature = "testing")]
        async fn make_due(&self, queue: &str) -> Result<u64> {
            Ok(self
                .conns
                .execute(sqlx::query(MAKE_DUE).bind(queue))
                .await?)
        }

        async fn unregister_worker(&self, id: i64) -> Result<()> {
            self.conns
                .execute(sqlx::query(WORKER_UNREGISTER).bind(id))
                .await?;
            Ok(())
        }

        async fn prune_workers(&self) -> Result<u64> {
            Ok(self.conns.execute(sqlx::query(WORKERS_PRUNE)).await?)
        }

        async fn record_tick(&self, name: &str, tick: DateTime<Utc>) -> Result<()> {
            self.conns
                .execute(sqlx::query(TICK_RECORD).bind(name).bind(db_time(tick)))
                .await?;
            Ok(())
        }

        async fn put_schedule(&self, schedule: &Schedule) -> Result<()> {
            let query = sqlx::query(SCHEDULE_PUT)
                .bind(&schedule.name)
                .bind(&schedule.job_name)
                .bind(&schedule.payload)
                .bind(&schedule.cron)
                .bind(&schedule.time_zone)
                .bind(&schedule.queue)
                .bind(schedule.priority);
            self.conns.execute(query).await?;
            Ok(())
        }

        async fn remove_schedule(&self, name: &str) -> Result<bool> {
            let query = sqlx::query(SCHEDULE_REMOVE).bind(name);
            Ok(self.conns.execute(query).await? == 1)
        }

        async fn save_checkpoint(&self, fence: Fence, json: &str) -> Result<bool> {
            self.fenced_set(CHECKPOINT_SAVE, fence, json).await
        }

        async fn save_progress(&self, fence: Fence, json: &str) -> Result<bool> {
            self.fenced_set(PROGRESS_SAVE, fence, json).await
        }

        async fn complete_with_output(&self, fence: Fence, output: &str) -> Result<bool> {
            self.fenced_set(COMPLETE_OUTPUT, fence, output).await
        }

        async fn complete_in(
            conn: &mut Self::Connection,
            fence: Fence,
            output: Option<&str>,
        ) -> Result<bool> {
            let done = sqlx::query(COMPLETE_OUTPUT)
                .bind(output)
                .bind(fence.id)
                .bind(fence.token)
                .execute(conn)
                .await?;
            Ok(done.rows_affected() == 1)
        }
    };
}

/// One fenced statement setting one value on held row `fence` (its SQL
/// binds the value, the id, the token), on the stash of a MySQL/MariaDB or
/// PostgreSQL store: whether it still held the row.
#[cfg_attr(
    not(any(feature = "mysql", feature = "postgres")),
    allow(unused_macros)
)]
macro_rules! fenced_set {
    ($store:ty) => {
        impl $store {
            async fn fenced_set(
                &self,
                sql: &'static str,
                fence: Fence,
                value: &str,
            ) -> Result<bool> {
                let query = sqlx::query(sql)
                    .bind(value)
                    .bind(fence.id)
                    .bind(fence.token);
                // Within the deadline: progress is written by a handler
                // outside the policy's retries (a frozen server would hold
                // it for ever).
                Ok(within(
                    self.deadline,
                    statement::CHECKPOINT,
                    self.conns.execute(query),
                )
                .await?
                    == 1)
            }
        }
    };
}
#[cfg_attr(
    not(any(feature = "mysql", feature = "postgres")),
    allow(unused_imports)
)]
pub(crate) use fenced_set;
#[cfg_attr(
    not(any(feature = "mysql", feature = "postgres")),
    allow(unused_imports)
)]
pub(crate) use server_writes;

/// A job with metadata or tags ([`NewJob::attached`](super::contract::NewJob::attached)):
/// `$insert` inserts its row on transaction `$tx` (begun on `$conn`: a
/// savepoint of the caller's transaction, if any), then, unless the row was
/// a duplicate (whose job keeps its own), the backend's `ATTACH` writes
/// them to the row and `TAGS_INSERT` its tags' index rows, and the
/// transaction commits: a job and its tags land together or not at all.
macro_rules! insert_attached {
    ($conn:expr, $job:expr, $tx:ident => $insert:expr) => {{
        let mut $tx = $conn.begin().await?;
        let enqueued = $insert.await?;
        if !enqueued.duplicate {
            let attached = $job.attached_json();
            sqlx::query(ATTACH)
                .bind(&attached.metadata)
                .bind(&attached.tags)
                .bind(enqueued.id)
                .execute(&mut *$tx)
                .await?;
            if attached.tags.is_some() {
                sqlx::query(TAGS_INSERT)
                    .bind(enqueued.id)
                    .bind(&attached.tags)
                    .execute(&mut *$tx)
                    .await?;
            }
        }
        $tx.commit().await?;
        Ok(enqueued)
    }};
}
pub(crate) use insert_attached;

/// A statement's SQL as it is: the `$read` of [`reads`] for a
/// backend that runs every read as written.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn as_is<'a, S>(_store: &S, sql: &'a str) -> Cow<'a, str> {
    Cow::Borrowed(sql)
}

/// The reads every backend runs alike, each decoding its times with its
/// own `utc_time`: a periodic job's last tick, the stored schedules.
macro_rules! every_backend_reads {
    () => {
        async fn last_tick(&self, name: &str) -> Result<Option<DateTime<Utc>>> {
            let tick = self
                .conns
                .run(async |conn| {
                    sqlx::query_scalar(TICK_LAST)
                        .bind(name)
                        .fetch_optional(conn)
                        .await
                })
                .await?;
            Ok(tick.flatten().map(utc_time))
        }

        async fn stored_schedules(&self, name: Option<&str>) -> Result<Vec<ScheduleInfo>> {
            let rows: Vec<(
                String,
                String,
                String,
                String,
                Option<String>,
                Option<String>,
                Option<i16>,
                Option<_>,
                Option<_>,
                _,
            )> = {
                // On Galera behind a sync wait: read after an announcement
                // from another node's change, it sees that change.
                let sql = self.causal(match name {
                    None => SCHEDULES_STORED,
                    Some(_) => SCHEDULE_STORED,
                });
                self.conns
                    .run(async |conn| {
                        let query = sqlx::query_as(&sql);
                        match name {
                            None => query.fetch_all(conn).await,
                            Some(name) => query.bind(name).fetch_all(conn).await,
                        }
                    })
                    .await?
            };
            Ok(rows
                .into_iter()
                .map(
                    |(
                        name,
                        job_name,
                        payload,
                        cron,
                        time_zone,
                        queue,
                        priority,
                        paused_at,
                        last_tick,
                        updated_at,
                    )| {
                        ScheduleInfo {
                            schedule: Schedule {
                                name,
                                job_name,
                                payload,
                                cron,
                                time_zone,
                                queue,
                                priority,
                            },
                            paused: paused_at.map(utc_time).is_some(),
                            last_tick: last_tick.map(utc_time),
                            updated_at: utc_time(updated_at),
                        }
                    },
                )
                .collect())
        }
    };
}
pub(crate) use every_backend_reads;
