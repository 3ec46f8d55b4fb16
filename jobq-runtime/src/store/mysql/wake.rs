//! Wake-ups across processes on MySQL/MariaDB, which have no LISTEN.
//!
//! **The waiter** (a worker's): one connection of its own, kept in one
//! statement ([`wake_wait_sql`]) that returns at once with the queues that have a
//! due job, else sleeps (`SLEEP`) until the next job of its queues is due
//! or [`WAIT_SLEEP`] has passed. Its queues are those whose claim loops in this
//! process wait for jobs ([`wakeup::Waiting`]): a process busy with its
//! backlog sends it nothing, and a queue is reported once per claim of its
//! loops. Idle, a worker process sends one statement per [`WAIT_SLEEP`]
//! (1.25 s) for all its queues.
//!
//! **The ringer** (every process that enqueues): after an enqueue commits,
//! `KILL QUERY` of the waiters of the enqueued queues, found in
//! `jobq_waiters` (re-read at most once a second). `KILL QUERY` needs no
//! privilege for a connection of the same user; it interrupts a statement
//! and is forgotten by an idle connection. The waiter then runs [`wake_wait_sql`]
//! again, which finds the job: a kill that arrives between two of its
//! statements is not lost either, since the next statement sees the row
//! its enqueue committed before the kill. [`MySqlBell`] sends the kills for
//! a [`Ringer`](crate::store::ring::Ringer), which coalesces enqueues and
//! watches for jobs enqueued in callers' transactions.
//!
//! Connection ids are a server's own and restart with it, so a waiter is
//! recorded with its server (host and port) and that server's start, and a
//! ringer kills only waiters of the server its own connection is on,
//! started when it saw it start, and of its own user. Across Galera nodes
//! (or to a waiter of another user) no kill is sent: those waiters find
//! the job at their next statement, within [`WAIT_SLEEP`]. A waiter first checks
//! that a kill reaches it (through a proxy that multiplexes connections it
//! may not: two checks in a row the first time) and otherwise falls back
//! to polling with a warning, and checks again a minute later (longer
//! after each check that found so).
//!
//! With a connect list (Galera), the waiters and the ringer follow the
//! store's pool: each connects to the node the pool's new connections go
//! to, and moves when the pool does (checked every [`FOLLOW_EVERY`], in
//! this process), so that a ringer and the waiters it should reach are on
//! the same node, and no waiter sits on a node the pool left (a node that
//! came back before it was ready).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError};
use sqlx::{ConnectOptions, Connection, Executor, MySqlConnection, MySqlPool, Row};
use tokio_util::sync::CancellationToken;

use super::padded_strings;
use super::sql::{
    WAKE_CONTROL_WAIT, WAKE_FORGET, WAKE_FORGET_STALE, WAKE_IDENTITY, WAKE_PROBE,
    WAKE_PROBE_RUNNING, WAKE_REGISTER, WAKE_RINGER_SESSION, WAKE_UPTIME, WAKE_WAITER_SESSION,
    WAKE_WAITERS, wake_wait_columns, wake_wait_sql,
};
use crate::store::ring::Bell;
use crate::store::sql::visible_sql;
use crate::wakeup;

/// Longest sleep of one [`wake_wait_sql`]: how long a waiter that no kill reaches
/// takes, at most, to see another process's job (and an idle worker's one
/// statement per this long).
pub(crate) const WAIT_SLEEP: Duration = wakeup::WATCH_EVERY;
/// How often a waiter refreshes its row.
const REGISTER_EVERY: Duration = Duration::from_secs(60);
/// How long a ringer trusts its list of waiters.
const WAITERS_FRESH: Duration = Duration::from_secs(1);
/// How long a ringer trusts its list of waiters for queues none of them
/// serves (a worker that started since is reached this soon).
const WAITERS_MISSED: Duration = Duration::from_millis(100);
/// How long a waiter that found kills do not reach it polls before it
/// probes again (times the probes in a row that found so, up to ten).
const REPROBE_AFTER: Duration = Duration::from_secs(60);
/// How long the probe's statement ([`WAKE_PROBE`]) sleeps unless killed.
pub(super) const PROBE_SLEEP: Duration = Duration::from_secs(10);
/// Server starts that differ by this many seconds are one start (each side
/// computes it from the uptime in whole seconds).
const BOOT_SLACK: i64 = 2;

/// How often a waiter checks whether the store's pool moved to another
/// node (no statement: a look at the pool's connect options).
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// The node (host, port) new connections of `pool` go to.
fn pool_node(pool: &MySqlPool) -> (String, u16) {
    let options = pool.connect_options();
    (options.get_host().to_owned(), options.get_port())
}

/// Completes when `pool`'s new connections go elsewhere than `node`.
async fn moved_from(pool: &MySqlPool, node: &(String, u16)) {
    let mut every = tokio::time::interval(FOLLOW_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if pool_node(pool) != *node {
            return;
        }
    }
}

/// How long the controls' waiter sleeps in one statement.
const CONTROL_SLEEP: Duration = Duration::from_secs(60);

/// Error 1317, "Query execution was interrupted": a kill.
fn killed(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
        .is_some_and(|e| e.number() == 1317)
}

/// A server and the connection's place on it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    conn: i64,
    node: String,
    booted: i64,
    user: String,
}

impl Identity {
    async fn read(conn: &mut MySqlConnection) -> Result<Self, sqlx::Error> {
        let (id, node, now, user): (u64, String, i64, String) =
            sqlx::query_as(WAKE_IDENTITY).fetch_one(&mut *conn).await?;
        let uptime: String = sqlx::query(WAKE_UPTIME)
            .fetch_one(&mut *conn)
            .await?
            .try_get(1)?;
        let uptime: i64 = uptime.trim().parse().unwrap_or(0);
        Ok(Self {
            conn: i64::try_from(id).unwrap_or(i64::MAX),
            node,
            booted: now - uptime,
            user,
        })
    }

    /// A waiter's place, from a row of [`WAKE_WAITERS`].
    fn of_row(row: &sqlx::mysql::MySqlRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            node: row.try_get("node")?,
            conn: row.try_get("conn")?,
            booted: row.try_get("booted")?,
            user: row.try_get("user_name")?,
        })
    }

    /// Whether a kill sent on this connection reaches the waiter `other`.
    fn reaches(&self, other: &Identity) -> bool {
        self.node == other.node
            && (self.booted - other.booted).abs() <= BOOT_SLACK
            && self.user == other.user
    }
}

/// Waits for jobs of `queues` on behalf of this process's claim loops and
/// wakes them, and for announcements of changed controls
/// ([`wakeup::CONTROL`]: a second waiter, on a connection of its own,
/// sleeping a minute at a time), until `stop` (see the module docs).
pub(super) async fn wait(
    pool: &MySqlPool,
    queues: &[String],
    watch: &wakeup::Watch,
    stops: Stops<'_>,
    deadline: Duration,
) {
    if queues.is_empty() {
        return;
    }
    let control = [wakeup::CONTROL.to_owned()];
    tokio::join!(
        keep_waiting(pool, queues, watch, stops, deadline),
        keep_waiting(pool, &control, watch, stops, deadline),
    );
}

/// When a waiter stops (the worker's background), and when it gives up on
/// forgetting its row (the shutdown's deadline).
type Stops<'a> = (&'a CancellationToken, &'a CancellationToken);

/// One waiter (for `queues`, or for the controls), reconnected after
/// errors with a backoff until `stop`.
async fn keep_waiting(
    pool: &MySqlPool,
    queues: &[String],
    watch: &wakeup::Watch,
    stops: Stops<'_>,
    deadline: Duration,
) {
    let stop = stops.0;
    let mut failures = 0u32;
    // Probes in a row that found kills do not reach a waiter.
    let mut unreachable = 0u32;
    loop {
        // Where the pool connects now (it moves along a connect list). Its
        // statement sleeps by design: not one for sqlx's slow-statement warning.
        let options = (*pool.connect_options())
            .clone()
            .disable_statement_logging();
        match wait_on(
            &options,
            pool,
            (queues, watch),
            (&mut failures, &mut unreachable),
            stops,
            deadline,
        )
        .await
        {
            Ok(Stopped::Stopping) => break,
            Ok(Stopped::Moved) => {}
            Ok(Stopped::Unreachable(reason)) => {
                // Polling meanwhile; asked again later (a proxy may go, a
                // server's answer may change): never given up for good.
                unreachable += 1;
                let again = REPROBE_AFTER.saturating_mul(unreachable.min(10));
                if unreachable == 1 {
                    tracing::warn!(
                        reason = %reason,
                        probe_again_in = ?again,
                        "MySQL wake-ups are not available: jobs enqueued by other processes are found by polling"
                    );
                } else {
                    tracing::debug!(reason = %reason, probe_again_in = ?again, "MySQL wake-ups still not available");
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(again) => {}
                }
            }
            Err(error) => {
                let what = "waiting for other processes' jobs failed; reconnecting (queues are still polled)";
                if !crate::store::policy::listen_failed(&mut failures, &error, what, stop).await {
                    break;
                }
            }
        }
    }
}

/// Why a waiter stopped for good.
enum Stopped {
    /// The worker is stopping.
    Stopping,
    /// The store's pool moved to another node: reconnect there.
    Moved,
    /// Kills do not reach it: polling only, until a later probe.
    Unreachable(String),
}

/// One connection's life as the waiter: connect, register, check that a
/// kill reaches it, then wait and wake until an error.
async fn wait_on(
    options: &MySqlConnectOptions,
    pool: &MySqlPool,
    (queues, watch): (&[String], &wakeup::Watch),
    (failures, unreachable): (&mut u32, &mut u32),
    (stop, give_up): Stops<'_>,
    deadline: Duration,
) -> Result<Stopped, sqlx::Error> {
    let mut recorded: Option<Identity> = None;
    let node = (options.get_host().to_owned(), options.get_port());
    let session = async {
        let connect = async {
            let mut conn = MySqlConnection::connect_with(options).await?;
            conn.execute(WAKE_WAITER_SESSION).await?;
            let me = Identity::read(&mut conn).await?;
            Ok::<_, sqlx::Error>((conn, me))
        };
        let (mut conn, me) = timed(deadline, connect).await?;
        let mut verdict = probe(&mut conn, pool, &me, deadline).await?;
        if verdict.is_err() && *unreachable == 0 {
            // One kill answered and not landing can be the server's own:
            // MariaDB once left a Galera node's probe sleeping its full 10 s
            // after answering the kill (CI, wakeups.rs), which turned the
            // worker's wake-ups off for a minute. A setup that kills cannot
            // reach (a proxy that multiplexes connections) fails every
            // probe: asked once more before polling.
            verdict = probe(&mut conn, pool, &me, deadline).await?;
        }
        if let Err(reason) = verdict {
            return Ok(Stopped::Unreachable(reason));
        }
        *unreachable = 0;
        recorded = Some(me.clone());
        let mut waiter = Waiter {
            conn,
            me,
            queues: serde_json::to_string(queues).unwrap_or_default(),
            registered: None,
        };
        if queues == [wakeup::CONTROL] {
            waiter.watch_controls(failures, deadline).await
        } else {
            waiter.run(queues, watch, failures, deadline).await
        }
    };
    let result = tokio::select! {
        biased;
        () = stop.cancelled() => Ok(Stopped::Stopping),
        () = moved_from(pool, &node) => Ok(Stopped::Moved),
        result = session => result,
    };
    // Its row goes with it (through the pool: the waiter's connection may
    // be mid-statement); a row left behind is forgotten by the ringers
    // that find its connection gone, or after ten minutes. A worker
    // stopping waits for it until its shutdown's deadline (a process
    // exiting after its shutdown took its row with it: it was once left
    // behind when the delete was only spawned); a waiter that reconnects
    // does not (in a task of its own).
    if let Some(me) = recorded {
        let pool = pool.clone();
        let forget = async move {
            let forget = sqlx::query(WAKE_FORGET)
                .bind(&me.node)
                .bind(me.conn)
                .execute(&pool);
            let _ = tokio::time::timeout(deadline, forget).await;
        };
        if matches!(result, Ok(Stopped::Stopping)) {
            tokio::select! {
                biased;
                () = give_up.cancelled() => {}
                () = forget => {}
            }
        } else {
            tokio::spawn(forget);
        }
    }
    result
}

/// Runs `work` within `deadline`.
async fn timed<T>(
    deadline: Duration,
    work: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {deadline:?}"),
            )))
        })
}

/// Whether a `KILL QUERY` sent through the store's pool interrupts a
/// statement of `conn`. `Ok(Err(why))` when it does not; `Err` when the
/// probe could not tell (a connection lost, a server that stopped
/// answering: try again later, it says nothing of kills).
///
/// Decided by what the server reports, never by how long a kill takes
/// (on a busy server one `KILL` can take two seconds to return: the server
/// retries waking its target while the target holds its mutex): while
/// [`WAKE_PROBE`] sleeps ([`PROBE_SLEEP`]), the pool's connection reads the
/// process list until the server shows the statement running on the
/// waiter's connection id, then kills that id once and waits for the
/// statement's end. Unreachable only when the server showed the statement
/// on that id, answered the kill and the statement still slept to its end,
/// or when the process list never showed it there while the probe slept
/// (a proxy that multiplexes connections runs it on another).
async fn probe(
    conn: &mut MySqlConnection,
    pool: &MySqlPool,
    me: &Identity,
    deadline: Duration,
) -> Result<Result<(), String>, sqlx::Error> {
    // The connection that reads the process list and sends the kill, taken
    // before the statement starts: opening one while it sleeps (seven
    // round trips) can outlast the sleep on a slow link, every time.
    let mut other = timed(deadline, pool.acquire()).await?;
    let sent = Instant::now();
    let sleeping = sqlx::query(WAKE_PROBE).fetch_one(&mut *conn);
    tokio::pin!(sleeping);
    let interrupted = |result: Result<sqlx::mysql::MySqlRow, sqlx::Error>| match result {
        Err(error) if killed(&error) => Ok(true),
        // MySQL returns 1 from a SLEEP a kill interrupted.
        Ok(row) => Ok(row.try_get::<i64, _>(0).is_ok_and(|slept| slept == 1)),
        Err(error) => Err(error),
    };
    // Reads of the process list answered without the statement, sent when
    // it had surely reached the server.
    let mut missed = 0u32;
    let mut every = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            // The statement goes out before the first read.
            biased;
            result = &mut sleeping => {
                if interrupted(result)? {
                    // Only a kill interrupts it; ours, or a ringer's.
                    return Ok(Ok(()));
                }
                return if missed >= 3 {
                    Ok(Err("the server never showed the probe's statement on the waiter's \
                            connection id (a proxy between jobq and the server that multiplexes \
                            connections?)".to_owned()))
                } else {
                    Err(unanswered("the process list was not read while the probe slept"))
                };
            }
            _ = every.tick() => {
                let asked = Instant::now();
                let running: i64 = timed(deadline, async {
                    sqlx::query_scalar(WAKE_PROBE_RUNNING).bind(me.conn).fetch_one(&mut *other).await
                })
                .await?;
                if running > 0 {
                    break;
                }
                if asked.duration_since(sent) >= PROBE_SLEEP / 5 {
                    missed += 1;
                }
            }
        }
    }
    // The server runs it on that id: one kill, then its end.
    let kill = format!("KILL QUERY {}", me.conn);
    let killed_at = tokio::select! {
        result = &mut sleeping => {
            // Ended before the kill was answered: a kill (a ringer's)
            // reached it, or it slept to its end while the kill waited.
            return if interrupted(result)? {
                Ok(Ok(()))
            } else {
                Err(unanswered("the kill was not answered while the probe slept"))
            };
        }
        sent = timed(deadline, other.execute(kill.as_str())) => match sent {
            Ok(_) => Instant::now(),
            // The server refused the kill (not this user's thread, …).
            Err(sqlx::Error::Database(error)) => {
                return Ok(Err(format!("KILL QUERY of the waiter's own connection failed: {error}")));
            }
            Err(error) => return Err(error),
        },
    };
    let result = timed(PROBE_SLEEP + deadline, sleeping).await;
    if interrupted(result)? {
        Ok(Ok(()))
    } else if killed_at.duration_since(sent) < PROBE_SLEEP {
        Ok(Err(format!(
            "a KILL QUERY of the waiter's connection (id {}) did not interrupt its statement",
            me.conn
        )))
    } else {
        Err(unanswered(
            "the kill was answered after the probe's statement ended",
        ))
    }
}

/// An inconclusive probe: an error that makes the waiter try again.
fn unanswered(why: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        why.to_owned(),
    ))
}

/// The doctor's `wakeups`: whether a kill sent through `pool` interrupts
/// another connection's statement, and which recorded waiters this
/// process's enqueues reach.
pub(super) async fn check(pool: &MySqlPool) -> crate::error::Result<crate::ops::Check> {
    use crate::ops::Check;
    use crate::store::doctor::names::WAKEUPS;
    // A connection of its own to put to sleep: the kill takes one of the
    // pool's, which may have only one.
    let options = (*pool.connect_options())
        .clone()
        .disable_statement_logging();
    let mut conn = MySqlConnection::connect_with(&options).await?;
    let me = Identity::read(&mut conn).await?;
    let probed = probe(&mut conn, pool, &me, PROBE_SLEEP).await?;
    let _ = conn.close().await;
    if let Err(reason) = probed {
        return Ok(Check::warn(
            WAKEUPS,
            format!("a KILL QUERY does not reach this server's connections: {reason}"),
            "workers in other processes find new jobs by polling (every poll interval): connect straight to the server (not through a proxy that multiplexes connections) for wake-ups within milliseconds",
        ));
    }
    let rows = sqlx::query(WAKE_WAITERS).fetch_all(pool).await?;
    let (mut reached, mut other_user, mut other_node) = (0, Vec::new(), 0);
    for row in rows {
        let waiter = Identity::of_row(&row)?;
        if me.reaches(&waiter) {
            reached += 1;
        } else if waiter.node == me.node && waiter.user != me.user {
            other_user.push(waiter.user);
        } else {
            other_node += 1;
        }
    }
    let found = format!(
        "KILL QUERY reaches this user's connections; waiting workers: {reached} reached at once, {} of another user, {other_node} on another server (reached within {WAIT_SLEEP:?})",
        other_user.len()
    );
    if other_user.is_empty() {
        return Ok(Check::ok(WAKEUPS, found));
    }
    other_user.sort();
    other_user.dedup();
    Ok(Check::warn(
        WAKEUPS,
        found,
        format!(
            "workers connected as {} cannot be woken by enqueues of user {} (KILL QUERY reaches only the same user's connections without the PROCESS/CONNECTION ADMIN privilege): they find its jobs within {WAIT_SLEEP:?}; connect both as one user for wake-ups within milliseconds",
            other_user.join(", "),
            me.user
        ),
    ))
}

/// A waiter on its connection.
struct Waiter {
    conn: MySqlConnection,
    me: Identity,
    /// Its queues, as recorded (JSON).
    queues: String,
    registered: Option<Instant>,
}

impl Waiter {
    /// Waits and wakes until the connection fails; covers the worker's
    /// due jobs meanwhile (`watch`, its claim loops poll only as a safety
    /// net), and compares the controls at each statement (its pause loop
    /// reads them only when they changed, or as a safety net).
    async fn run(
        &mut self,
        queues: &[String],
        watch: &wakeup::Watch,
        failures: &mut u32,
        deadline: Duration,
    ) -> Result<Stopped, sqlx::Error> {
        // Every loop claims once when the connection is (re)made: jobs
        // enqueued while it was not waiting are found.
        let mut lookout = wakeup::Lookout::new(queues);
        let _covered = watch.cover(queues);
        // The controls' fingerprint at the last statement: none yet, so
        // the first tells the pause loop to read (they may have changed
        // while no waiter looked).
        let mut controls: Option<String> = None;
        loop {
            if self
                .registered
                .is_none_or(|at| at.elapsed() >= REGISTER_EVERY)
            {
                self.register(deadline).await?;
            }
            let idle = wakeup::became_idle().notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            let watched = lookout.queues();
            if watched.is_empty() {
                tracing::trace!("every loop busy");
                // Every loop busy (or already told): nothing to watch for
                // until one waits again; the statement is re-run within a
                // second regardless, to keep the row fresh.
                let _ = tokio::time::timeout(WAIT_SLEEP, idle).await;
                continue;
            }
            let queues = padded_strings(&watched);
            let sql = wake_wait_sql(queues.len());
            let mut query = sqlx::query(&sql)
                .bind(WAIT_SLEEP.as_secs_f64())
                .bind(WAIT_SLEEP.as_secs_f64());
            for queue in queues.iter().chain(&queues) {
                query = query.bind(*queue);
            }
            let result = timed(deadline + WAIT_SLEEP, query.fetch_one(&mut self.conn)).await;
            let masks = match result {
                Ok(row) => {
                    let columns = wake_wait_columns(queues.len());
                    let masks = (1..=2 * columns)
                        .map(|column| row.try_get::<u64, _>(column))
                        .collect::<Result<Vec<u64>, _>>()?;
                    let fingerprint: String = row.try_get(2 * columns + 1)?;
                    if controls.as_ref() != Some(&fingerprint) {
                        tracing::trace!(%fingerprint, "controls changed");
                        controls = Some(fingerprint);
                        let due = masks[..columns].iter().any(|&mask| mask != 0);
                        if due {
                            // A pause and a job in one answer: the pause first.
                            watch.read_controls_now(WAIT_SLEEP).await;
                        } else {
                            wakeup::notify(wakeup::CONTROL);
                        }
                    }
                    watch.controls_compared();
                    if masks[columns..].iter().any(|&mask| mask != 0) {
                        watch.lease_expired();
                    }
                    masks[..columns].to_vec()
                }
                Err(error) if killed(&error) => {
                    tracing::trace!(?watched, "waiter interrupted");
                    continue;
                }
                Err(error) => return Err(error),
            };
            *failures = 0;
            let due: Vec<&str> = due_places(&masks)
                .filter_map(|place| queues.get(place).copied())
                .collect();
            tracing::trace!(?watched, ?due, "waited");
            for queue in due {
                lookout.due(queue);
            }
        }
    }

    /// Sleeps a minute at a time; a kill means controls changed or a job
    /// was cancelled: this process's workers look at once.
    async fn watch_controls(
        &mut self,
        failures: &mut u32,
        deadline: Duration,
    ) -> Result<Stopped, sqlx::Error> {
        // Recorded first, then whatever changed while no waiter listened
        // is read: a change announced in between finds the record.
        self.register(deadline).await?;
        wakeup::notify(wakeup::CONTROL);
        loop {
            if self
                .registered
                .is_none_or(|at| at.elapsed() >= REGISTER_EVERY)
            {
                self.register(deadline).await?;
            }
            let sleep = sqlx::query(WAKE_CONTROL_WAIT).fetch_one(&mut self.conn);
            match timed(deadline + CONTROL_SLEEP, sleep).await {
                // MySQL returns 1 from a SLEEP a kill interrupted.
                Ok(row) if row.try_get::<i64, _>(0).is_ok_and(|slept| slept == 1) => {
                    wakeup::notify(wakeup::CONTROL);
                }
                Ok(_) => {}
                Err(error) if killed(&error) => wakeup::notify(wakeup::CONTROL),
                Err(error) => return Err(error),
            }
            *failures = 0;
        }
    }

    /// Records (refreshes) this waiter's row.
    async fn register(&mut self, deadline: Duration) -> Result<(), sqlx::Error> {
        let me = &self.me;
        let queues = &self.queues;
        let conn = &mut self.conn;
        timed(deadline, async {
            sqlx::query(WAKE_FORGET_STALE).execute(&mut *conn).await?;
            sqlx::query(WAKE_REGISTER)
                .bind(&me.node)
                .bind(me.conn)
                .bind(me.booted)
                .bind(&me.user)
                .bind(queues)
                .execute(&mut *conn)
                .await
        })
        .await?;
        self.registered = Some(Instant::now());
        Ok(())
    }
}

/// The places (0-based, in the statement's list) of the queues
/// [`wake_wait_sql`]'s masks report due.
fn due_places(masks: &[u64]) -> impl Iterator<Item = usize> + '_ {
    masks.iter().enumerate().flat_map(|(column, &mask)| {
        (0..64)
            .filter(move |bit| mask & (1 << bit) != 0)
            .map(move |bit| 64 * column + bit)
    })
}

/// A waiter as recorded.
#[derive(Debug, Clone)]
struct Recorded {
    at: Identity,
    queues: Vec<String>,
}

/// The kills of enqueues made through the store (see the module docs),
/// rung by a [`Ringer`](crate::store::ring::Ringer).
#[derive(Debug)]
pub(super) struct MySqlBell {
    /// The store's pool: its connect options (the node it is on now).
    pool: MySqlPool,
    /// Its own connection and the node it went to: the list of waiters,
    /// the server it is on and the kills all go through it, so a kill
    /// never reaches a server other than the one the list was checked
    /// against. Made again when the pool moves to another node.
    conn: Option<(MySqlConnection, (String, u16))>,
    /// The waiters as last read, when, and this connection's place.
    waiters: Option<(Instant, Identity, Vec<Recorded>)>,
    /// Waiters already warned about (a kill cannot reach them).
    warned: BTreeSet<(String, i64)>,
}

impl MySqlBell {
    pub(super) fn new(pool: MySqlPool) -> Self {
        Self {
            pool,
            conn: None,
            waiters: None,
            warned: BTreeSet::new(),
        }
    }

    async fn conn(&mut self) -> Result<&mut MySqlConnection, sqlx::Error> {
        let node = pool_node(&self.pool);
        if self.conn.as_ref().is_none_or(|(_, on)| *on != node) {
            self.conn = None;
            self.waiters = None;
            let options = (*self.pool.connect_options()).clone();
            let mut fresh = MySqlConnection::connect_with(&options).await?;
            fresh.execute(WAKE_RINGER_SESSION).await?;
            self.conn = Some((fresh, node));
        }
        match self.conn.as_mut() {
            Some((conn, _)) => Ok(conn),
            None => unreachable!("connected above"),
        }
    }

    /// Re-reads the waiters when the list is a second old, or a tenth of
    /// one for `queues` that none of them serves, and always for an
    /// announcement of changed controls (rare, and owed to every worker
    /// process, one started a moment ago too: a pause is honoured at once).
    async fn refresh(&mut self, queues: &BTreeSet<String>) -> Result<(), sqlx::Error> {
        let announced = queues.contains(wakeup::CONTROL);
        let stale = announced
            || self.waiters.as_ref().is_none_or(|(at, _, waiters)| {
                let served = waiters
                    .iter()
                    .any(|w| w.queues.iter().any(|q| queues.contains(q)));
                at.elapsed() >= WAITERS_FRESH || (!served && at.elapsed() >= WAITERS_MISSED)
            });
        if !stale {
            return Ok(());
        }
        let conn = self.conn().await?;
        let me = Identity::read(conn).await?;
        let rows = sqlx::query(WAKE_WAITERS).fetch_all(&mut *conn).await?;
        let mut waiters = Vec::with_capacity(rows.len());
        for row in rows {
            let queues: String = row.try_get("queues")?;
            waiters.push(Recorded {
                at: Identity::of_row(&row)?,
                queues: serde_json::from_str(&queues).unwrap_or_default(),
            });
        }
        self.waiters = Some((Instant::now(), me, waiters));
        Ok(())
    }

    /// The waiters of `queues` a kill from here reaches; warns once about
    /// each one of another user.
    fn targets(&mut self, queues: &BTreeSet<String>) -> Vec<Identity> {
        let Some((_, me, waiters)) = self.waiters.as_ref() else {
            return Vec::new();
        };
        let mut targets = Vec::new();
        for waiter in waiters {
            if !waiter.queues.iter().any(|q| queues.contains(q)) {
                continue;
            }
            if me.reaches(&waiter.at) {
                targets.push(waiter.at.clone());
            } else if waiter.at.node == me.node
                && waiter.at.user != me.user
                && self.warned.insert((waiter.at.node.clone(), waiter.at.conn))
            {
                tracing::warn!(
                    waiter_user = %waiter.at.user,
                    user = %me.user,
                    "a worker waiting for these queues connects as another user, whose connections this one may not KILL QUERY: it finds jobs enqueued here within {WAIT_SLEEP:?}, not at once"
                );
            }
        }
        targets
    }
}

impl Bell for MySqlBell {
    async fn visible(&mut self, ids: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
        let sql = visible_sql(ids.len());
        let mut query = sqlx::query_scalar::<_, i64>(&sql);
        for id in ids {
            query = query.bind(id);
        }
        query.fetch_all(self.conn().await?).await
    }

    async fn ring(&mut self, queues: &BTreeSet<String>) -> Result<(), sqlx::Error> {
        self.refresh(queues).await?;
        let targets = self.targets(queues);
        tracing::trace!(?targets, ?queues, "ringing");
        let conn = self.conn().await?;
        let mut gone = Vec::new();
        for waiter in targets {
            // One statement per waiter: an unknown id (a waiter gone
            // without a word) fails only its own kill, and its row goes.
            let sent = Instant::now();
            let answer = conn
                .execute(format!("KILL QUERY {}", waiter.conn).as_str())
                .await;
            // A kill can take the server two seconds (see GUARANTEES.md).
            tracing::trace!(conn = waiter.conn, took = ?sent.elapsed(), ok = answer.is_ok(), "killed");
            match answer {
                Ok(_) => {}
                Err(error) if unknown_thread(&error) => {
                    sqlx::query(WAKE_FORGET)
                        .bind(&waiter.node)
                        .bind(waiter.conn)
                        .execute(&mut *conn)
                        .await?;
                    gone.push(waiter.conn);
                }
                Err(error) => return Err(error),
            }
        }
        if let Some((_, _, waiters)) = self.waiters.as_mut() {
            waiters.retain(|w| !gone.contains(&w.at.conn));
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.conn = None;
        self.waiters = None;
    }

    /// No while the list of waiters, read less than [`WAITERS_MISSED`] ago,
    /// holds none of `queue`'s: [`refresh`](Self::refresh) would not read
    /// it again, so a round would ring nobody. Changed controls are owed
    /// to every worker process.
    fn may_hear(&self, queue: &str) -> bool {
        queue == wakeup::CONTROL
            || self.waiters.as_ref().is_none_or(|(at, _, waiters)| {
                at.elapsed() >= WAITERS_MISSED
                    || waiters.iter().any(|w| w.queues.iter().any(|q| q == queue))
            })
    }
}

/// Error 1094, "Unknown thread id".
fn unknown_thread(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
        .is_some_and(|e| e.number() == 1094)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_masks_name_places_in_the_list() {
        assert_eq!(due_places(&[0]).count(), 0);
        assert_eq!(due_places(&[0b101]).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(
            due_places(&[1 << 63, 1, 1 << 5]).collect::<Vec<_>>(),
            [63, 64, 133]
        );
    }

    #[test]
    fn a_kill_reaches_only_waiters_of_the_same_server_start_and_user() {
        let me = Identity {
            conn: 1,
            node: "db:3306".into(),
            booted: 1_000,
            user: "app".into(),
        };
        let other = |node: &str, booted, user: &str| Identity {
            conn: 9,
            node: node.into(),
            booted,
            user: user.into(),
        };
        assert!(me.reaches(&other("db:3306", 1_002, "app")));
        assert!(!me.reaches(&other("db:3306", 1_100, "app")));
        assert!(!me.reaches(&other("db2:3306", 1_000, "app")));
        assert!(!me.reaches(&other("db:3306", 1_000, "worker")));
    }
}
