//! What jobq does the same way on every backend, around the contract's
//! statements. Above the contract, what the list of backends calls: the
//! retries of transient errors and the deadline of each try ([`retried`]
//! around every write), the chunks of fences ([`complete`], [`heartbeat`],
//! [`heartbeat_unlocked`]), the batches of a prune ([`prune`]), the
//! figures of a queue put together ([`queue_figures`]). Below it, what the
//! backends use: statement deadlines ([`within`], [`migrating`]), fencing
//! tokens, the pools' idle pings, the first connection's probe, the
//! counts' rows, what a renewal did not renew ([`not_renewed`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::contract::{
    BackendStore, ClaimedJob, Fence, Flow, KeyFront, KeyMember, KeyPlan, KeyStarts, LimitedClaim,
    Prunable, QueueControl, Slot,
};
use super::stash::Stash;
use crate::error::{Error, Result};
use crate::metrics::statement;
use crate::ops::{QueueFigures, StatsWindow};
use crate::options::Rate;
use crate::types::{JobStatus, QueueCounts};

/// Opens one connection to a server within `timeout` and closes it: what a
/// pool's first connect does, but failing with the connection's own error
/// (a refusal, a login, a DNS failure) at once, where the pool retries it
/// until its acquire timeout (30 s) and reports only `PoolTimedOut`.
#[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
pub(crate) async fn probe<O>(url: &str, options: &O, timeout: Duration) -> Result<()>
where
    O: sqlx::ConnectOptions,
    O::Connection: Sized,
{
    use sqlx::Connection as _;
    match tokio::time::timeout(timeout, options.connect()).await {
        Ok(Ok(conn)) => {
            // The pool opens its own; a failed goodbye changes nothing.
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(error)) => Err(error.into()),
        Err(_elapsed) => Err(Error::ConnectTimeout {
            url: crate::options::redact_url(url),
            timeout,
        }),
    }
}

static INTERNAL_RETRIES: AtomicU64 = AtomicU64::new(0);

/// How many times jobq re-ran one of its own transactions or statements after
/// a transient database error (deadlock, lock wait timeout, snapshot
/// conflict, busy database) since the process started.
pub fn internal_retries() -> u64 {
    INTERNAL_RETRIES.load(Ordering::Relaxed)
}

/// Runs `work` — one statement or one short transaction of jobq's, getting
/// its connection included — within `deadline`, or gives up on it:
/// [`Error::StatementTimeout`] naming `statement` (one of
/// [`crate::metrics::statement`]'s kinds).
///
/// # The statement deadline
///
/// Every statement jobq starts on its own connections runs under one (a
/// tokio timer per statement, no round trip): a server that stops
/// answering with the connection open (frozen, cut off behind a silent
/// network, overloaded) would otherwise hold the caller, a worker loop or
/// a shutdown for as long as TCP takes to give up, which is forever while
/// the peer's kernel still acknowledges. Giving up drops `work`, and with
/// it the connection it held: on MySQL/MariaDB and PostgreSQL that
/// connection is closed rather than handed out again (see
/// [`stash`](self::stash)), since its state is unknown — a write on it may
/// or may not have taken effect, which jobq's fences make harmless (a
/// settle or renewal that committed is found applied, a claim that did is
/// reaped after its lease).
///
/// The deadline ([`DEFAULT_STATEMENT_TIMEOUT`](crate::DEFAULT_STATEMENT_TIMEOUT),
/// 15 s, or [`ConnectOptions::statement_timeout`](crate::ConnectOptions::statement_timeout))
/// is longer than the lock waits jobq sets for itself — MySQL/MariaDB's
/// `innodb_lock_wait_timeout = 5` on jobq's sessions, SQLite's busy timeout
/// of 10 s — so a statement waiting on a row lock normally gets the
/// database's own error first, which jobq retries as it always did.
/// PostgreSQL's lock waits have no limit of their own: there a wait past
/// the deadline ends at the deadline (the connection closed, the write
/// retried later as after any error).
pub(crate) async fn within<T, E, Fut>(
    deadline: Duration,
    statement: &'static str,
    work: Fut,
) -> Result<T>
where
    Fut: Future<Output = Result<T, E>>,
    E: Into<Error>,
{
    match tokio::time::timeout(deadline, work).await {
        Ok(result) => result.map_err(Into::into),
        Err(_elapsed) => Err(Error::StatementTimeout {
            statement,
            timeout: deadline,
        }),
    }
}

/// Runs `op` again (up to 8 times, with a short jittered pause) while it fails
/// with an error `transient` accepts, each run [`within`] `deadline`. Only
/// for work jobq started itself: never inside a caller's transaction. Each
/// re-run is counted, in [`internal_retries`] and in the
/// `jobq_internal_retries_total` metric under `statement` (one of
/// [`crate::metrics::statement`]'s kinds). A run past its deadline is not
/// retried: a database that did not answer in time is not asked again at
/// once.
pub(crate) async fn retry_transient<T, E, F, Fut>(
    deadline: Duration,
    statement: &'static str,
    transient: fn(&sqlx::Error) -> bool,
    mut op: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<Error>,
{
    let mut attempt = 0u32;
    loop {
        let result = match tokio::time::timeout(deadline, op()).await {
            Ok(result) => result,
            Err(_elapsed) => {
                return Err(Error::StatementTimeout {
                    statement,
                    timeout: deadline,
                });
            }
        };
        match result.map_err(Into::into) {
            Ok(value) => return Ok(value),
            Err(Error::Database(error)) if attempt < 8 && transient(&error) => {
                attempt += 1;
                count_internal_retry(statement, &error, attempt);
                let pause_ms = rand::random_range(1..=(5u64 << attempt.min(5)));
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Runs `op`, one try of a write of `store`'s, as [`retry_transient`] does
/// with the store's deadline and transient errors: the policy around every
/// write of the contract.
pub(crate) async fn retried<S, T, F, Fut>(store: &S, statement: &'static str, op: F) -> Result<T>
where
    S: BackendStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    retry_transient(store.deadline(), statement, S::is_transient, op).await
}

/// Marks held jobs `done`, [`FENCE_CHUNK`](BackendStore::FENCE_CHUNK)
/// fences per statement, each [`retried`]; how many were still held.
pub(crate) async fn complete<S: BackendStore>(store: &S, fences: &[Fence]) -> Result<u64> {
    let mut total = 0;
    for chunk in fences.chunks(S::FENCE_CHUNK) {
        total += retried(store, statement::COMPLETE, || store.complete(chunk)).await?;
    }
    Ok(total)
}

/// Extends the leases of held jobs, [`FENCE_CHUNK`](BackendStore::FENCE_CHUNK)
/// fences per statement, each [`retried`]; returns the fences no longer held.
pub(crate) async fn heartbeat<S: BackendStore>(
    store: &S,
    fences: &[Fence],
    lease: Duration,
) -> Result<Vec<Fence>> {
    let mut lost = Vec::new();
    for chunk in fences.chunks(S::FENCE_CHUNK) {
        let more = retried(store, statement::HEARTBEAT, || {
            store.heartbeat(chunk, lease)
        })
        .await?;
        append(&mut lost, more);
    }
    Ok(lost)
}

/// [`heartbeat`] of the rows no other transaction has locked, without
/// waiting on any lock (see [`BackendStore::heartbeat_unlocked`]); returns
/// the fences it renewed.
pub(crate) async fn heartbeat_unlocked<S: BackendStore>(
    store: &S,
    fences: &[Fence],
    lease: Duration,
) -> Result<Vec<Fence>> {
    let mut renewed = Vec::new();
    for chunk in fences.chunks(S::FENCE_CHUNK) {
        let more = retried(store, statement::HEARTBEAT, || {
            store.heartbeat_unlocked(chunk, lease)
        })
        .await?;
        append(&mut renewed, more);
    }
    Ok(renewed)
}

/// The fences among `fences` that `renewed` (the rows a renewal of them
/// returned, each one of `fences`) does not hold: those no longer held.
/// Nothing to look up when it renewed them all.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn not_renewed(fences: &[Fence], renewed: Vec<Fence>) -> Vec<Fence> {
    if renewed.len() == fences.len() {
        return Vec::new();
    }
    let renewed: std::collections::HashSet<Fence> = renewed.into_iter().collect();
    fences
        .iter()
        .filter(|f| !renewed.contains(f))
        .copied()
        .collect()
}

/// `more` after `all`, without a copy when `all` is empty (one chunk).
fn append(all: &mut Vec<Fence>, more: Vec<Fence>) {
    if all.is_empty() {
        *all = more;
    } else {
        all.extend(more);
    }
}

/// The figures of one queue at `window.now` (see [`QueueFigures`]): its
/// live rows, its finished rows counted up to `window.cap` per status, and
/// the `done`/`failed` rows finished since `window.since`, by minute; each
/// read through an index.
pub(crate) async fn queue_figures<S: BackendStore>(
    store: &S,
    queue: &str,
    window: StatsWindow,
) -> Result<QueueFigures> {
    Ok(QueueFigures {
        queue: queue.to_owned(),
        live: store.stats_live(queue, window.now).await?,
        finished: store.stats_finished(queue, window.cap).await?,
        per_minute: store.stats_per_minute(queue, window.since).await?,
    })
}

/// Rows one prune statement deletes at most.
const PRUNE_BATCH: u32 = 1000;

/// Deletes every row of the `which` kind that finished more than
/// `older_than` ago: for each of the store's
/// [`prune_scopes`](BackendStore::prune_scopes), [`PRUNE_BATCH`] rows per
/// statement (each [`retried`], a short transaction) until one deletes
/// fewer; returns how many it deleted.
pub(crate) async fn prune<S: BackendStore>(
    store: &S,
    which: Prunable,
    older_than: Duration,
) -> Result<u64> {
    let mut total = 0;
    for scope in store.prune_scopes(which).await? {
        loop {
            let deleted = retried(store, statement::PRUNE, || {
                store.prune(&scope, older_than, PRUNE_BATCH)
            })
            .await?;
            total += deleted;
            if deleted < u64::from(PRUNE_BATCH) {
                break;
            }
        }
    }
    Ok(total)
}

/// Pages of `jobq_unique` a prune reads at most ([`prune_unique`]).
pub(crate) const UNIQUE_PAGES_PER_PRUNE: u32 = 10;

/// Where the last bounded [`prune_unique`] of this process stopped in
/// `jobq_unique`'s key order (empty: the start). One for the process: with
/// handles on several databases it only moves where each resumes.
static UNIQUE_CURSOR: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Deletes the rows of `jobq_unique` whose holders have been pruned (a
/// key is free once its holder's row is gone; its row is only kept for
/// the next enqueue of the key to lock), reading [`PRUNE_BATCH`] key rows
/// a page (each [`retried`]) in key order: with `pages`, at most that many
/// pages, from where the last bounded call of this process stopped
/// (wrapping around at the end), so a prune's cost stays bounded however
/// many keys there are; without, the whole table. How many it deleted.
pub(crate) async fn prune_unique<S: BackendStore>(store: &S, pages: Option<u32>) -> Result<u64> {
    let mut after = match pages {
        Some(_) => UNIQUE_CURSOR
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
        None => String::new(),
    };
    let mut total = 0;
    let mut read = 0;
    loop {
        let page = retried(store, statement::PRUNE, || {
            store.prune_unique(&after, PRUNE_BATCH)
        })
        .await?;
        total += page.deleted;
        read += 1;
        after = page.next.unwrap_or_default();
        if after.is_empty() || pages.is_some_and(|pages| read >= pages) {
            break;
        }
    }
    if pages.is_some() {
        *UNIQUE_CURSOR
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = after;
    }
    Ok(total)
}

/// Members a key's front holds past its limit: finished jobs a release
/// has not forgotten yet, and the first blocked jobs it may unblock. Small:
/// a release reads each key's front (a batch of 300 keys at 32 read
/// 5,000 rows, most of them blocked jobs it could not unblock, and took
/// 20 ms on MariaDB), and a front that was all finished jobs is read again
/// once they are forgotten (`KeyPlan::again`).
pub(crate) const KEY_FRONT_SLACK: u32 = 4;

/// What key `key`'s rate row (`(starts, period_us, burst, tat_us, now_us)`
/// as a take read it, `None`: no row or no valid rate) gives `wanted`
/// starts: the starts taken and the arrival time to write (`None`: as it
/// is). The rate is a GCRA like a queue's ([`Gcra`]).
pub(crate) fn key_starts(
    row: Option<(i64, i64, i64, i64, i64)>,
    wanted: u32,
) -> Option<(KeyStarts, Option<i64>)> {
    let (starts, period_us, burst, tat, now) = row?;
    let rate = Rate::from_row(starts, period_us, burst)?;
    let g = gcra(&rate, tat, now);
    let taken = g.allowed.min(wanted);
    let starts = KeyStarts {
        taken,
        next: g.next_start_after(taken),
        interval: rate.interval(),
    };
    Some((starts, g.tat_after(taken)))
}

/// Keys' rates from `(key, starts, period_us, burst)` rows, leaving out a
/// stored rate no valid [`Rate`] has.
pub(crate) fn key_rates(
    rows: impl IntoIterator<Item = (String, i64, i64, i64)>,
) -> Vec<(String, Rate)> {
    rows.into_iter()
        .filter_map(|(key, starts, period_us, burst)| {
            Rate::from_row(starts, period_us, burst).map(|rate| (key, rate))
        })
        .collect()
}

/// How many members of a key limited to `limit` a front reads.
pub(crate) fn key_front_len(limit: u32) -> u32 {
    limit.saturating_add(KEY_FRONT_SLACK)
}

/// A key's limit as its row holds it (at least 1).
pub(crate) fn key_limit(stored: i64) -> u32 {
    u32::try_from(stored).unwrap_or(u32::MAX).max(1)
}

/// A member's status as a front read returned it (`None`: the row is gone).
fn member_status(status: Option<&str>) -> Option<JobStatus> {
    status.and_then(|s| s.parse().ok())
}

/// The front of one key as an enqueue read it: `(job id, status)` rows
/// of a key limited to `limit`, read [`key_front_len`] at most.
pub(crate) fn key_front(key: &str, limit: u32, rows: &[(i64, Option<String>)]) -> KeyFront {
    KeyFront {
        key: key.to_owned(),
        limit,
        members: rows
            .iter()
            .map(|(job_id, status)| KeyMember {
                job_id: *job_id,
                status: member_status(status.as_deref()),
            })
            .collect(),
        truncated: rows.len() >= key_front_len(limit) as usize,
    }
}

/// The fronts of the keys a release locked (`(key, limit)` rows, which
/// leave out keys whose rows are gone), from `(key, job id, status)` rows:
/// at least each key's front, in any order.
pub(crate) fn key_fronts(
    limits: &[(String, u32)],
    rows: &[(String, i64, Option<String>)],
) -> Vec<KeyFront> {
    let mut by_key: std::collections::HashMap<&str, Vec<(i64, Option<String>)>> =
        std::collections::HashMap::with_capacity(limits.len());
    for (key, id, status) in rows {
        by_key
            .entry(key.as_str())
            .or_default()
            .push((*id, status.clone()));
    }
    limits
        .iter()
        .map(|(key, limit)| {
            // A read may return more of a key than its own front (one
            // length for every key it read): the front is its first members.
            let mut members = by_key.remove(key.as_str()).unwrap_or_default();
            members.sort_unstable_by_key(|&(id, _)| id);
            members.truncate(key_front_len(*limit) as usize);
            key_front(key, *limit, &members)
        })
        .collect()
}

/// Releases of one key set at most (each forgets finished members, so a
/// release past a long run of them takes a few).
const KEY_RELEASE_ROUNDS: usize = 4;

/// Whether a new job of the key whose front is `front` may be `pending`
/// (its key has room, and nothing of the key is waiting, so it does not
/// pass a blocked job); otherwise it is `blocked`. A front read to its
/// end without a decision counts as full: a release unblocks the job if
/// there was room after all.
pub(crate) fn key_admits(front: &KeyFront) -> bool {
    let mut holders = 0u32;
    for member in &front.members {
        match member.status {
            Some(JobStatus::Pending | JobStatus::Processing) => holders += 1,
            Some(JobStatus::Blocked) => return false,
            _ => {}
        }
    }
    holders < front.limit && !front.truncated
}

/// What a release does with the fronts it read (see
/// [`BackendStore::release_keys`]): per key, the finished or deleted
/// members are forgotten; the holders (`pending`, `processing`) are
/// counted; the oldest blocked members are unblocked up to the limit.
/// Nothing is handed back: the holders are counted from their rows each
/// time, so a release repeated, late, or after a stale settle unblocks
/// nothing the limit has no room for, and a lost one is made up by the
/// next (the sweep, [`sweep_keys`]).
pub(crate) fn key_plan(fronts: &[KeyFront]) -> KeyPlan {
    let mut plan = KeyPlan::default();
    for front in fronts {
        let mut holders = 0u32;
        let mut blocked = Vec::new();
        let mut forgotten = 0usize;
        for member in &front.members {
            match member.status {
                Some(JobStatus::Pending | JobStatus::Processing) => holders += 1,
                Some(JobStatus::Blocked) => blocked.push(member.job_id),
                _ => {
                    plan.forget.push((front.key.clone(), member.job_id));
                    forgotten += 1;
                }
            }
        }
        let room = front.limit.saturating_sub(holders) as usize;
        let unblocked = room.min(blocked.len());
        plan.unblock.extend_from_slice(&blocked[..unblocked]);
        if forgotten == front.members.len() && !front.truncated {
            plan.empty.push(front.key.clone());
        } else if front.truncated && forgotten > 0 && unblocked == blocked.len() && unblocked < room
        {
            plan.again.push(front.key.clone());
        }
    }
    plan
}

/// Releases `keys` (see [`BackendStore::release_keys`]), each
/// transaction [`retried`], again for the keys whose front was mostly
/// finished members; how many jobs it unblocked.
pub(crate) async fn release_keys<S: BackendStore>(store: &S, keys: &[String]) -> Result<u64> {
    let mut keys: Vec<String> = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    let mut unblocked = 0;
    for _ in 0..KEY_RELEASE_ROUNDS {
        if keys.is_empty() {
            break;
        }
        let plan = retried(store, statement::RELEASE, || store.release_keys(&keys)).await?;
        unblocked += plan.unblock.len() as u64;
        keys = plan.again;
    }
    Ok(unblocked)
}

/// Keys a sweep reads a page ([`sweep_keys`]).
pub(crate) const KEY_SWEEP_PAGE: u32 = 200;

/// Where the last bounded [`sweep_keys`] of this process stopped in
/// `jobq_keys`' order (empty: the start).
static KEY_CURSOR: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Releases every key with jobs, [`KEY_SWEEP_PAGE`] keys a page, at most
/// `pages` pages from where the last sweep of this process stopped
/// (wrapping around at the end): the release a settle did not make (its
/// process died first, a cancel, a reaped job failed for good, a job
/// deleted) is made here. How many jobs it unblocked.
pub(crate) async fn sweep_keys<S: BackendStore>(store: &S, pages: u32) -> Result<u64> {
    let mut after = KEY_CURSOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let mut unblocked = 0;
    for _ in 0..pages {
        let keys = retried(store, statement::RELEASE, || {
            store.key_page(&after, KEY_SWEEP_PAGE)
        })
        .await?;
        unblocked += release_keys(store, &keys).await?;
        after = match keys.last() {
            Some(last) if keys.len() == KEY_SWEEP_PAGE as usize => last.clone(),
            _ => String::new(),
        };
        if after.is_empty() {
            break;
        }
    }
    *KEY_CURSOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = after;
    Ok(unblocked)
}

/// Counts (and logs) one retry of `statement` after the transient `error`.
pub(crate) fn count_internal_retry(statement: &'static str, error: &sqlx::Error, attempt: u32) {
    INTERNAL_RETRIES.fetch_add(1, Ordering::Relaxed);
    crate::metrics::internal_retry(statement);
    tracing::debug!(
        error = error as &dyn std::error::Error,
        attempt,
        statement,
        "retrying after a transient database error"
    );
}

/// [`QueueCounts`] from `(status, count)` rows, as every backend's counts
/// query returns them.
pub(crate) fn counts(rows: Vec<(String, i64)>) -> Result<QueueCounts> {
    let mut counts = QueueCounts::default();
    for (status, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match status
            .parse::<JobStatus>()
            .map_err(crate::Error::UnknownStatus)?
        {
            JobStatus::Pending => counts.pending = n,
            JobStatus::Processing => counts.processing = n,
            JobStatus::Done => counts.done = n,
            JobStatus::Failed => counts.failed = n,
            JobStatus::Cancelled => counts.cancelled = n,
            JobStatus::Blocked => counts.blocked = n,
        }
    }
    Ok(counts)
}

/// What a limited claim may do with the slot rows it locked: the free
/// slots it may write jobs into (below the limit, holder no longer
/// holding its row), how many jobs it may start (`room`), and the rows
/// above the limit whose holders have gone (`retired`: it deletes them).
///
/// A slot is never handed back: it is free as soon as its attempt's row
/// moves on, whatever moved it — the attempt's settle, a release at
/// shutdown, a cancel, the reaper after a crash — and a stale attempt's
/// settle, which changes no row, frees nothing. So no path can leak a slot
/// or return one twice. A row's token is new at each claim and its
/// `processing` state ends with the token, so a holder that was not live
/// when read never becomes live again. An expired lease alone frees
/// nothing: until the reaper moves the row, its worker may still renew it
/// (a heartbeat late by more than the lease), and the attempt would run
/// beside the one given its slot.
///
/// Rows at or above the limit exist after a limit was lowered while their
/// jobs ran: their live holders count against the limit until they finish
/// (then the rows go), and so does every row another claim has locked
/// (`total` less those locked here), whose holder this claim cannot see:
/// the room is the limit less all of them, never more than the free slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotPlan {
    pub(crate) free: Vec<i32>,
    pub(crate) room: u32,
    pub(crate) retired: Vec<i32>,
}

impl SlotPlan {
    /// The plan for `locked` slot rows of a queue limited to `limit` with
    /// `total` slot rows in all, `live` the fences of the holders that still
    /// hold their rows (`processing` under that token)
    /// as the claim read them after locking the slots.
    pub(crate) fn of(locked: &[Slot], live: &[Fence], limit: u32, total: u32) -> Self {
        let is_live = |slot: &&Slot| slot.holder.is_some_and(|holder| live.contains(&holder));
        let below = |slot: &&Slot| u32::try_from(slot.slot).is_ok_and(|n| n < limit);
        let mut free: Vec<i32> = locked
            .iter()
            .filter(|slot| below(slot) && !is_live(slot))
            .map(|slot| slot.slot)
            .collect();
        free.sort_unstable();
        let retired = locked
            .iter()
            .filter(|slot| !below(slot) && !is_live(slot))
            .map(|slot| slot.slot)
            .collect();
        let held = locked.iter().filter(is_live).count();
        let unseen = (total as usize).saturating_sub(locked.len());
        let room = (limit as usize)
            .saturating_sub(held + unseen)
            .min(free.len());
        Self {
            free,
            room: u32::try_from(room).unwrap_or(0),
            retired,
        }
    }
}

/// What one limited claim may take, put together from what it read: the
/// one rule every backend's [`claim_limited`](super::contract::BackendStore::claim_limited)
/// follows for its take, what it writes back and what it reports.
#[derive(Debug, Clone)]
pub(crate) struct Allowed {
    asked: u32,
    /// How many jobs the concurrency limit leaves room for
    /// ([`SlotPlan::room`](SlotPlan)), under one.
    room: Option<u32>,
    /// Under a rate whose row the claim read: what it allows. `Some(None)`:
    /// another claim held the row (or it is gone), so no start now.
    rate: Option<Option<Gcra>>,
}

impl Allowed {
    /// A claim asked for `asked`, with room for `room` jobs under a limit.
    pub(crate) fn new(asked: u32, room: Option<u32>) -> Self {
        Self {
            asked,
            room,
            rate: None,
        }
    }

    /// Whether the claim has anything to read the rate's row for: the
    /// queue has a rate and a slot is free.
    pub(crate) fn reads_rate(&self, flow: Flow) -> bool {
        flow.rate && self.take() > 0
    }

    /// The rate's row as the claim locked it, `(starts, period_us, burst,
    /// tat_us, now_us)` (now by the clock the claim writes `claimed_at`
    /// with), or `None` when another claim holds it.
    pub(crate) fn rate_row(&mut self, row: Option<(i64, i64, i64, i64, i64)>) {
        self.rate = Some(row.and_then(|(starts, period_us, burst, tat, now)| {
            Rate::from_row(starts, period_us, burst).map(|rate| gcra(&rate, tat, now))
        }));
    }

    /// How many jobs the claim takes: the least of what was asked, the
    /// free slots and the starts the rate allows.
    pub(crate) fn take(&self) -> u32 {
        let rate = match self.rate {
            None => u32::MAX,
            Some(None) => 0,
            Some(Some(g)) => g.allowed,
        };
        self.asked.min(self.room.unwrap_or(u32::MAX)).min(rate)
    }

    /// The rate's theoretical arrival time to write after claiming
    /// `claimed` jobs: `None` when nothing is to be written (no rate read,
    /// or nothing claimed and the stored time not ahead of the clock; see
    /// [`Gcra::tat_after`]).
    pub(crate) fn tat_after(&self, claimed: usize) -> Option<i64> {
        let claimed = u32::try_from(claimed).unwrap_or(u32::MAX);
        match self.rate {
            Some(Some(g)) => g.tat_after(claimed),
            _ => None,
        }
    }

    /// What the claim reports having claimed `jobs`; `due`: whether a job
    /// was due, read only when it took nothing (`take() == 0`).
    pub(crate) fn claimed(&self, jobs: Vec<ClaimedJob>, due: bool) -> LimitedClaim {
        let take = self.take();
        let got = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
        // It took all it was allowed, fewer than asked: more may be due.
        let full = if take == 0 {
            due
        } else {
            got == take && take < self.asked
        };
        let by_slots = self.room.is_some_and(|room| room == take);
        let next_start = match self.rate {
            Some(None) if full => Some(Duration::ZERO),
            Some(Some(g)) if full && g.allowed == take => Some(g.next_start_after(got)),
            _ => None,
        };
        LimitedClaim {
            held_back: full && by_slots,
            jobs,
            next_start,
        }
    }
}

/// A row of [`slots_read`]: `(limit, slot rows, holder id, holder token)`.
#[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
pub(crate) type SlotsReadRow = (Option<i64>, i64, Option<i64>, Option<i64>);

/// A limited claim's one read after locking its slots, as MySQL/MariaDB
/// and PostgreSQL make it: rows of `(limit, slot rows, holder id, holder
/// token)`, one per holder still holding its row (or one with no holder),
/// the first two the same in each. The limit, the slot-row count and the
/// live holders.
#[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
pub(crate) fn slots_read(rows: Vec<SlotsReadRow>) -> (u32, u32, Vec<Fence>) {
    let (limit, total) = rows
        .first()
        .map_or((None, 0), |&(limit, total, _, _)| (limit, total));
    let live = rows
        .into_iter()
        .filter_map(|(_, _, id, token)| {
            Some(Fence {
                id: id?,
                token: token?,
            })
        })
        .collect();
    (slots_limit(limit), slots_total(total), live)
}

/// A limit as a slot-size read returned it (`None`: the limit was removed
/// meanwhile, so nothing may start under it).
pub(crate) fn slots_limit(limit: Option<i64>) -> u32 {
    limit.and_then(|n| u32::try_from(n).ok()).unwrap_or(0)
}

/// A slot-row count as a slot-size read returned it.
pub(crate) fn slots_total(total: i64) -> u32 {
    u32::try_from(total).unwrap_or(u32::MAX)
}

/// The holders written in `locked` slot rows: the fences a limited claim
/// asks the jobs table about.
pub(crate) fn slot_holders(locked: &[Slot]) -> Vec<Fence> {
    locked.iter().filter_map(|slot| slot.holder).collect()
}

/// A unique key's row as an enqueue of the key read it, having locked it
/// (see each backend's `jobq_unique` migration): the job written into it
/// last (0: none yet), the states in which that job keeps the key, whether
/// its period (if any) has not passed by the database's clock, and the
/// [`Unique::state_bit`](jobq_core::Unique::state_bit) of the job's status
/// now (0: the job is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UniqueRow {
    pub(crate) job_id: i64,
    pub(crate) states: i64,
    pub(crate) within_period: bool,
    pub(crate) status_bit: i64,
}

impl UniqueRow {
    /// The job that still holds the key, if one does: it exists, is in one
    /// of its states, and its period has not passed. Nothing hands a key
    /// back: a key is free as soon as its holder's row moves to a state
    /// outside its states (settle, cancel, reap) or is pruned, or its
    /// period passes, so no path can leak a key.
    pub(crate) fn holder(self) -> Option<i64> {
        (self.job_id != 0 && self.within_period && self.states & self.status_bit != 0)
            .then_some(self.job_id)
    }
}

/// A row of the controls' read: `(queue, paused, limit, starts,
/// period_us, burst, tat_us)`, the last four set on a rate's row only.
pub(crate) type ControlRow = (
    String,
    bool,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// [`QueueControl`]s from [`ControlRow`]s, as every backend reads
/// `jobq_queues`' paused rows, `jobq_limits`' rows and `jobq_rates`' rows
/// in one statement (a queue may come three times: paused, limited, rate
/// limited), by name. A stored rate no valid [`Rate`] has is left out.
pub(crate) fn controls(rows: Vec<ControlRow>) -> Vec<QueueControl> {
    let mut controls: Vec<QueueControl> = Vec::new();
    for (queue, paused, limit, starts, period_us, burst, tat) in rows {
        let limit = limit.and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0);
        let rate = match (starts, period_us, burst) {
            (Some(starts), Some(period_us), Some(burst)) => {
                Rate::from_row(starts, period_us, burst).map(|rate| (rate, tat.unwrap_or(0)))
            }
            _ => None,
        };
        match controls.iter_mut().find(|c| c.queue == queue) {
            Some(known) => {
                known.paused |= paused;
                known.limit = known.limit.or(limit);
                if let Some((rate, tat)) = rate {
                    known.rate = Some(rate);
                    known.tat = Some(tat);
                }
            }
            None => controls.push(QueueControl {
                queue,
                paused,
                limit,
                rate: rate.map(|(rate, _)| rate),
                tat: rate.map(|(_, tat)| tat),
            }),
        }
    }
    controls.sort_by(|a, b| a.queue.cmp(&b.queue));
    controls
}

/// What a queue's rate allows at one claim, by the generic cell rate
/// algorithm (GCRA, "virtual scheduling"): [`gcra`] computes it from the
/// rate's stored theoretical arrival time (TAT) and the database's clock.
///
/// With `T` = period ÷ starts (the emission interval) and `b` the burst,
/// the TAT is the time up to which the starts already granted are paid for,
/// `T` each. A claim at `now` starts from `base = clamp(TAT, now − b·T,
/// now)` — a TAT further back than `b·T` counts as `now − b·T` (idle time
/// saves up at most `b` starts), one ahead of `now` (the clock went back,
/// or another Galera node's clock is ahead) as `now` — and may take
/// `allowed = ⌊(now − base) ÷ T⌋` starts (so at most `b`); having taken
/// `k` it stores `TAT = base + k·T`, never past `now`. So over any window
/// of length `L`, the `m` starts of the window moved the TAT on by `m·T`
/// from at least `(first start) − b·T` to at most its last start:
/// `m·T < L + b·T`, that is `m ≤ ⌈L ÷ T⌉ + b − 1` — at most `starts + b − 1`
/// in any period, `b` in any interval.
///
/// A TAT ahead of `now` by more than [`CLOCK_STEP`] (or the burst's
/// `b·T`, if longer) — more than a race of two claims makes, where the one
/// that read the clock first locks the row after the other committed — is
/// the clock stepped back: a claim that finds it writes it back as `now`,
/// so the rate holds for one interval, not until the clock catches up. A
/// TAT ahead by less allows nothing and is left as it is.
///
/// Times are microseconds; the arithmetic is done in microseconds ×
/// starts, where `T` is the whole number `period_us`; the TAT stored is
/// rounded up to the next microsecond, so a start comes at most a
/// microsecond late, never early (a rate of 1,000 a second loses 0.1 % at
/// most).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// Starts the rate allows now.
    pub(crate) allowed: u32,
    /// The stored TAT was ahead of `now` by more than a race makes: pulled
    /// back, to be written.
    ahead: bool,
    /// `base` above, `now` and `T`, in microseconds × starts; and where
    /// the next start is counted from: `base`, or the TAT while it is ahead
    /// of `now` by less than a clock step.
    base: i128,
    from: i128,
    now: i128,
    interval: i128,
    starts: i128,
}

/// How far ahead of the clock a rate's TAT may be before a claim takes the
/// clock for stepped back and pulls the TAT back (see [`Gcra`]).
pub(crate) const CLOCK_STEP: Duration = Duration::from_secs(1);

/// What `rate` allows at `now` with the stored theoretical arrival time
/// `tat` (both microseconds since the Unix epoch of the same clock). See
/// [`Gcra`].
pub(crate) fn gcra(rate: &Rate, tat: i64, now: i64) -> Gcra {
    let starts = i128::from(rate.starts());
    let interval = i128::from(rate.period_us()).max(1);
    let now = i128::from(now) * starts;
    let burst = i128::from(rate.burst()) * interval;
    let tat = i128::from(tat) * starts;
    let base = tat.clamp(now - burst, now);
    let allowed = u32::try_from((now - base) / interval).unwrap_or(0);
    let step = burst.max(i128::from(micros(CLOCK_STEP)) * starts);
    Gcra {
        allowed,
        ahead: tat > now + step,
        base,
        from: if tat > now + step {
            base
        } else {
            base.max(tat)
        },
        now,
        interval,
        starts,
    }
}

impl Gcra {
    /// The TAT to store after taking `taken` (at most
    /// [`allowed`](Self::allowed)) starts, in microseconds rounded up:
    /// `None` when it is to stay as stored (nothing taken, and not ahead
    /// of now).
    pub(crate) fn tat_after(&self, taken: u32) -> Option<i64> {
        if taken == 0 && !self.ahead {
            return None;
        }
        let tat = self.base + i128::from(taken) * self.interval;
        Some(i64::try_from(ceil_div(tat, self.starts)).unwrap_or(i64::MAX))
    }

    /// How long after `now` the rate allows its next start once `taken`
    /// were taken: zero while it still allows one.
    pub(crate) fn next_start_after(&self, taken: u32) -> Duration {
        let next = self.from + i128::from(taken) * self.interval + self.interval - self.now;
        if next <= 0 {
            return Duration::ZERO;
        }
        Duration::from_micros(u64::try_from(ceil_div(next, self.starts)).unwrap_or(u64::MAX))
    }
}

/// `a ÷ b` rounded toward +∞, for `b > 0`.
fn ceil_div(a: i128, b: i128) -> i128 {
    a.div_euclid(b) + i128::from(a.rem_euclid(b) != 0)
}

/// Microseconds in `d`, saturated to what a signed 64-bit column holds.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A fresh base for the fencing tokens of one claim: random in `[0, 2^62)`.
///
/// Each row of the claim gets its own token, [`row_token`]`(base, id)` =
/// `base + id`, written by the claim statement itself (`lease_token = ? + id`
/// on every backend). With ids below 2^62 the sum cannot overflow.
///
/// Per-row tokens make a fence an exact `(id, token)` pair even where a
/// settle or heartbeat matches `id IN (…) AND lease_token IN (…)` as two
/// lists (MySQL, SQLite): a row whose current claim is not in the batch
/// matches only if its token equals the token of another fence of the
/// batch, `base₁ + id₁ = base₂ + id₂` for two independent random 62-bit
/// bases, which is as likely as two equal random tokens. With one token per
/// claim batch, a worker holding a stale attempt of job A (token T1) that had
/// claimed A again with job B (token T2) settled A through B's T2.
pub(crate) fn new_token_base() -> i64 {
    rand::random::<i64>() & ((1 << 62) - 1)
}

/// The fencing token the claim with `base` writes into row `id`.
pub(crate) fn row_token(base: i64, id: i64) -> i64 {
    base + id
}

/// The deadline of `migrate()` once it has its connection: a migration may
/// rewrite a table of millions of rows (one copies `jobq_jobs` once, about
/// 1 s per 100,000 rows on a small machine), and MySQL's waits up to 120 s
/// for another process's migration first.
pub(crate) const MIGRATE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// Runs `migrate` (the embedded migrations applied under the backend's
/// lock) on one of jobq's connections of `conns`: the connection taken
/// within `deadline`, the migration given [`MIGRATE_DEADLINE`].
pub(crate) async fn migrating<DB, T, E>(
    conns: &Stash<DB>,
    deadline: Duration,
    migrate: impl AsyncFnOnce(&mut DB::Connection) -> Result<T, E>,
) -> Result<T>
where
    DB: sqlx::Database,
    E: Into<Error>,
{
    let conn = within(deadline, statement::MIGRATE, conns.get()).await?;
    let run = async move {
        let mut conn = conn;
        let result = migrate(&mut conn).await;
        conn.done(result)
    };
    within(MIGRATE_DEADLINE, statement::MIGRATE, run).await
}

/// A pooled connection that sat idle at least this long is pinged before use.
#[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The pools' `before_acquire` hook: pings a connection only when it has been
/// idle for [`PING_AFTER_IDLE`], instead of sqlx's ping before every checkout,
/// a round trip that doubled the cost of a single-row enqueue. A connection
/// in steady use has just proven itself alive; one that idled across a server
/// restart is pinged, fails, and is replaced before a statement is lost on it.
#[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
pub(crate) fn ping_if_idle<DB: sqlx::Database>(
    conn: &mut DB::Connection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> futures_util::future::BoxFuture<'_, Result<bool, sqlx::Error>> {
    Box::pin(async move {
        if meta.idle_for >= PING_AFTER_IDLE {
            sqlx::Connection::ping(conn).await?;
        }
        Ok(true)
    })
}

/// A database listener's pause after `failures` failures in a row (PostgreSQL's
/// LISTEN, MySQL's waiter): 500 ms doubling to 30 s: polling covers the
/// queues meanwhile, so a listener that cannot connect need not hammer the server.
pub(crate) fn listen_backoff(failures: u32) -> Duration {
    let ms = 500u64.saturating_mul(1 << failures.min(6)).min(30_000);
    Duration::from_millis(rand::random_range(ms / 2..=ms))
}

/// A listener's failure `error`: counted in `failures`, warned of with
/// `what` (what failed, and that polling covers the queues meanwhile), then
/// its backoff ([`listen_backoff`]) slept; `false` if `stop` came first.
pub(crate) async fn listen_failed(
    failures: &mut u32,
    error: &sqlx::Error,
    what: &str,
    stop: &tokio_util::sync::CancellationToken,
) -> bool {
    *failures += 1;
    let pause = listen_backoff(*failures);
    tracing::warn!(
        error = error as &dyn std::error::Error,
        retry_in = ?pause,
        "{what}"
    );
    tokio::select! {
        biased;
        () = stop.cancelled() => false,
        () = tokio::time::sleep(pause) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A front of `key` limited to `limit` from `(job id, status)` pairs
    /// (`None`: the row is gone).
    fn front(key: &str, limit: u32, members: &[(i64, Option<&str>)]) -> KeyFront {
        let rows: Vec<(i64, Option<String>)> = members
            .iter()
            .map(|&(id, status)| (id, status.map(str::to_owned)))
            .collect();
        key_front(key, limit, &rows)
    }

    #[test]
    fn a_release_forgets_finished_members_and_unblocks_the_oldest_up_to_the_limit() {
        let fronts = [
            // Limit 2: one done, one running, three blocked: room for one.
            front(
                "a",
                2,
                &[
                    (1, Some("done")),
                    (2, Some("processing")),
                    (3, Some("blocked")),
                    (4, Some("blocked")),
                    (5, Some("blocked")),
                ],
            ),
            // Full: a retrying holder (pending) keeps its place.
            front("b", 1, &[(6, Some("pending")), (7, Some("blocked"))]),
            // Every member finished or deleted: the key is forgotten.
            front("c", 1, &[(8, Some("cancelled")), (9, None)]),
        ];
        let plan = key_plan(&fronts);
        assert_eq!(plan.unblock, [3]);
        assert_eq!(
            plan.forget,
            [("a".into(), 1), ("c".into(), 8), ("c".into(), 9)]
        );
        assert_eq!(plan.empty, ["c"]);
        assert!(plan.again.is_empty());
        // Repeated after the unblock committed: nothing more.
        let again = key_plan(&[front(
            "a",
            2,
            &[
                (2, Some("processing")),
                (3, Some("pending")),
                (4, Some("blocked")),
            ],
        )]);
        assert!(again.unblock.is_empty() && again.forget.is_empty());
    }

    #[test]
    fn a_front_of_finished_members_is_read_again_past_them() {
        // Limit 1 reads 1 + KEY_FRONT_SLACK members: all finished, more may follow.
        let finished: Vec<(i64, Option<&str>)> = (1..=i64::from(key_front_len(1)))
            .map(|id| (id, Some("done")))
            .collect();
        let plan = key_plan(&[front("a", 1, &finished)]);
        assert!(plan.unblock.is_empty() && plan.empty.is_empty());
        assert_eq!(plan.again, ["a"]);
    }

    #[test]
    fn a_new_job_is_admitted_only_with_room_and_nothing_waiting() {
        assert!(key_admits(&front("a", 2, &[(1, Some("processing"))])));
        assert!(key_admits(&front("a", 1, &[(1, Some("done"))])));
        assert!(!key_admits(&front("a", 1, &[(1, Some("pending"))])));
        // Room, but an older job waits: the new one queues behind it.
        assert!(!key_admits(&front(
            "a",
            2,
            &[(1, Some("done")), (2, Some("blocked"))]
        )));
        // A front read to its end decides nothing: blocked, to be released.
        let full: Vec<(i64, Option<&str>)> = (1..=i64::from(key_front_len(1)))
            .map(|id| (id, Some("done")))
            .collect();
        assert!(!key_admits(&front("a", 1, &full)));
    }

    #[test]
    fn fronts_group_rows_by_key_and_keep_each_keys_own_front() {
        let rows: Vec<(String, i64, Option<String>)> = (1..=10)
            .map(|id| {
                (
                    (if id % 2 == 0 { "a" } else { "b" }).to_owned(),
                    id,
                    Some("blocked".to_owned()),
                )
            })
            .collect();
        let fronts = key_fronts(
            &[("a".into(), 1), ("b".into(), 3), ("gone".into(), 1)],
            &rows,
        );
        let ids = |f: &KeyFront| f.members.iter().map(|m| m.job_id).collect::<Vec<_>>();
        assert_eq!(ids(&fronts[0]), [2, 4, 6, 8, 10]);
        assert_eq!(ids(&fronts[1]), [1, 3, 5, 7, 9]);
        assert!(fronts[2].members.is_empty() && !fronts[2].truncated);
    }

    fn slot(slot: i32, holder: Option<(i64, i64)>) -> Slot {
        Slot {
            slot,
            holder: holder.map(|(id, token)| Fence { id, token }),
        }
    }

    #[test]
    fn a_slot_is_free_unless_its_holder_still_holds_its_row() {
        let locked = [
            slot(2, Some((10, 100))),
            slot(0, None),
            slot(1, Some((11, 111))),
            slot(3, Some((12, 120))),
        ];
        // 10 holds its row; 11 settled; 12 was claimed again under another token.
        let live = [Fence { id: 10, token: 100 }, Fence { id: 12, token: 121 }];
        let plan = SlotPlan::of(&locked, &live, 4, 4);
        assert_eq!(
            (plan.free, plan.room, plan.retired),
            (vec![0, 1, 3], 3, vec![])
        );
        assert_eq!(slot_holders(&locked).len(), 3);
        assert_eq!(SlotPlan::of(&[], &live, 4, 0).room, 0);
    }

    #[test]
    fn rows_above_a_lowered_limit_and_rows_locked_elsewhere_count_against_it() {
        let live = [Fence { id: 11, token: 1 }, Fence { id: 12, token: 2 }];
        // Lowered from 3 to 2 while 11 and 12 ran in slots 1 and 2.
        let locked = [
            slot(0, None),
            slot(1, Some((11, 1))),
            slot(2, Some((12, 2))),
        ];
        let plan = SlotPlan::of(&locked, &live, 2, 3);
        assert_eq!(
            (plan.free.clone(), plan.room, plan.retired),
            (vec![0], 0, vec![])
        );
        // 12 finished: slot 2 is retired, and one job may start in slot 0.
        let plan = SlotPlan::of(&locked, &live[..1], 2, 3);
        assert_eq!((plan.free, plan.room, plan.retired), (vec![0], 1, vec![2]));
        // Another claim holds slot 1 locked: it may be filling it.
        let plan = SlotPlan::of(&[slot(0, None), slot(2, None)], &[], 2, 3);
        assert_eq!((plan.free, plan.room, plan.retired), (vec![0], 1, vec![2]));
        let plan = SlotPlan::of(&[slot(0, None)], &[], 2, 3);
        assert_eq!(plan.room, 0, "two rows unseen, either may hold a job");
    }

    #[test]
    fn a_unique_key_is_held_only_by_an_existing_job_in_its_states_within_its_period() {
        let row = |job_id, status: &str, within_period| UniqueRow {
            job_id,
            states: i64::from(jobq_core::Unique::while_active().state_bits()),
            within_period,
            status_bit: i64::from(jobq_core::Unique::state_bit(status)),
        };
        assert_eq!(row(7, "pending", true).holder(), Some(7));
        assert_eq!(row(7, "processing", true).holder(), Some(7));
        for status in ["done", "failed", "cancelled", "gone"] {
            assert_eq!(row(7, status, true).holder(), None, "{status}");
        }
        assert_eq!(row(7, "pending", false).holder(), None, "period passed");
        assert_eq!(row(0, "pending", true).holder(), None, "no job yet");
    }

    #[test]
    fn controls_merge_a_queue_paused_and_limited() {
        let row = |queue: &str, paused: bool, limit: Option<i64>| -> ControlRow {
            (queue.to_owned(), paused, limit, None, None, None, None)
        };
        let rows = vec![
            row("b", false, Some(5)),
            row("a", true, None),
            row("b", true, None),
            row("c", false, Some(0)),
        ];
        let controls = controls(rows);
        let seen: Vec<_> = controls
            .iter()
            .map(|c| (c.queue.as_str(), c.paused, c.limit))
            .collect();
        assert_eq!(
            seen,
            vec![("a", true, None), ("b", true, Some(5)), ("c", false, None)]
        );
    }

    const S: i64 = 1_000_000;

    /// 10 per second, burst `burst`: T = 100 ms.
    fn ten_a_second(burst: u32) -> Rate {
        Rate::per(10, Duration::from_secs(1)).with_burst(burst)
    }

    /// Claims at each of `times` (µs) asking for `asked`, from a rate never
    /// used; how many each took.
    fn run(rate: &Rate, asked: u32, times: &[i64]) -> Vec<u32> {
        let mut tat = 0;
        times
            .iter()
            .map(|&now| {
                let g = gcra(rate, tat, now);
                let take = g.allowed.min(asked);
                if let Some(after) = g.tat_after(take) {
                    tat = after;
                }
                take
            })
            .collect()
    }

    #[test]
    fn a_strict_rate_allows_one_start_per_interval_and_no_more() {
        let rate = ten_a_second(1);
        let now = 1_000 * S;
        let g = gcra(&rate, 0, now);
        assert_eq!(
            g.allowed, 1,
            "a rate never used allows its burst, not its period's starts"
        );
        let tat = g.tat_after(1).unwrap();
        assert_eq!(tat, now);
        assert_eq!(g.next_start_after(1), Duration::from_millis(100));
        assert_eq!(g.tat_after(0), None, "nothing taken, nothing written");
        // 99.999 ms later: none; 100 ms later: one.
        assert_eq!(gcra(&rate, tat, now + 99_999).allowed, 0);
        assert_eq!(
            gcra(&rate, tat, now + 99_999).next_start_after(0),
            Duration::from_micros(1)
        );
        assert_eq!(gcra(&rate, tat, now + 100_000).allowed, 1);
        // Claims every 25 ms, asking for 10 each: one start every 100 ms,
        // never two within 100 ms.
        let times: Vec<i64> = (0..100).map(|i| now + i * 25_000).collect();
        let took = run(&rate, 10, &times);
        let starts: Vec<i64> = times
            .iter()
            .zip(&took)
            .flat_map(|(&t, &k)| std::iter::repeat_n(t, k as usize))
            .collect();
        assert!(
            starts.windows(2).all(|w| w[1] - w[0] >= 100_000),
            "{starts:?}"
        );
        assert_eq!(starts.len(), 25, "2.475 s at 10/s from a bucket of 1");
        // Claims every 30 ms: a start comes at the first claim at or after
        // its time, and with a burst of 1 the lateness is not made up.
        let times: Vec<i64> = (0..100).map(|i| now + i * 30_000).collect();
        assert_eq!(
            run(&rate, 10, &times).iter().sum::<u32>(),
            25,
            "one per 120 ms"
        );
    }

    #[test]
    fn idle_time_saves_up_at_most_the_burst() {
        let rate = ten_a_second(3);
        let now = 5_000 * S;
        // Never used, or idle for an hour: 3, not 36,000.
        assert_eq!(gcra(&rate, 0, now).allowed, 3);
        assert_eq!(gcra(&rate, now - 3_600 * S, now).allowed, 3);
        let g = gcra(&rate, now - 3_600 * S, now);
        let tat = g.tat_after(3).unwrap();
        assert_eq!(tat, now);
        assert_eq!(gcra(&rate, tat, now).allowed, 0);
        // 250 ms later: two intervals paid back.
        assert_eq!(gcra(&rate, tat, now + 250_000).allowed, 2);
        // Taking fewer than allowed keeps the rest.
        let g = gcra(&rate, now - 3_600 * S, now);
        let tat = g.tat_after(1).unwrap();
        assert_eq!(gcra(&rate, tat, now).allowed, 2);
        assert_eq!(g.next_start_after(1), Duration::ZERO);
        // Any window of one second holds at most starts + burst - 1 = 12,
        // any window of one interval at most the burst.
        let times: Vec<i64> = (0..400).map(|i| now + i * 7_000).collect();
        let took = run(&rate, 100, &times);
        let starts: Vec<i64> = times
            .iter()
            .zip(&took)
            .flat_map(|(&t, &k)| std::iter::repeat_n(t, k as usize))
            .collect();
        for (i, &first) in starts.iter().enumerate() {
            let in_second = starts[i..].iter().take_while(|&&t| t < first + S).count();
            let in_interval = starts[i..]
                .iter()
                .take_while(|&&t| t < first + 100_000)
                .count();
            assert!(
                in_second <= 12,
                "{in_second} starts in a second from {first}"
            );
            assert!(
                in_interval <= 3,
                "{in_interval} starts in an interval from {first}"
            );
        }
    }

    #[test]
    fn a_clock_gone_back_holds_for_one_interval_at_most() {
        let rate = ten_a_second(1);
        let now = 1_000 * S;
        // The TAT was written by a clock 10 s ahead of this one.
        let ahead = now + 10 * S;
        let g = gcra(&rate, ahead, now);
        assert_eq!(g.allowed, 0);
        assert_eq!(g.next_start_after(0), Duration::from_millis(100));
        // The claim that took nothing writes the TAT back to now.
        let tat = g.tat_after(0).unwrap();
        assert_eq!(tat, now);
        assert_eq!(gcra(&rate, tat, now + 99_999).allowed, 0);
        assert_eq!(gcra(&rate, tat, now + 100_000).allowed, 1);
        // Ahead by what a race of two claims makes (the one that read the
        // clock first committing second): nothing allowed, nothing written.
        let g = gcra(&rate, now + 5_000, now);
        assert_eq!((g.allowed, g.tat_after(0)), (0, None));
        assert_eq!(g.next_start_after(0), Duration::from_millis(105));
    }

    #[test]
    fn an_interval_of_a_fraction_of_a_millisecond_does_not_drift() {
        // 3 per 10 ms, burst 3 (late claims catch up): T = 3.333 ms, so
        // 3,000 starts take 10 s less the burst, each late by at most 1 µs
        // of rounding; claims every 7 µs.
        let rate = Rate::per(3, Duration::from_millis(10)).with_burst(3);
        let mut tat = 0;
        let start = 7 * S;
        let mut now = start;
        let mut started = 0u32;
        while started < 3_000 {
            let g = gcra(&rate, tat, now);
            let take = g.allowed.min(3_000 - started);
            if let Some(after) = g.tat_after(take) {
                tat = after;
            }
            started += take;
            now += 7;
        }
        let spent = now - start;
        assert!((9_990_000..=9_996_000).contains(&spent), "{spent} µs");
    }

    #[test]
    fn controls_merge_a_rate_with_a_limit() {
        let rows: Vec<ControlRow> = vec![
            ("q".to_owned(), false, Some(4), None, None, None, None),
            (
                "q".to_owned(),
                false,
                None,
                Some(10),
                Some(S),
                Some(2),
                Some(77),
            ),
            (
                "bad".to_owned(),
                false,
                None,
                Some(0),
                Some(S),
                Some(1),
                Some(0),
            ),
        ];
        let controls = controls(rows);
        assert_eq!(controls.len(), 2);
        assert_eq!(controls[0].rate, None, "a stored rate no valid rate has");
        assert_eq!(controls[1].limit, Some(4));
        assert_eq!(controls[1].rate, Some(ten_a_second(2)));
        assert_eq!(controls[1].tat, Some(77));
    }
}
