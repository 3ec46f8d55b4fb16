//! Where jobs are stored: one declared contract, [`BackendStore`], one
//! folder per backend implementing it, and here the one list of backends
//! ([`Store`]).
//!
//! # The contract
//!
//! [`BackendStore`] (`contract.rs`) is everything a backend does: connect
//! and migrate; enqueue (one row, a batch, and one row on the caller's
//! connection); claim, settle (complete, transition), renew leases
//! (heartbeat, heartbeat_unlocked), reap, prune; listen for the database's
//! own wake-ups; inspect (job, counts, the figures of `stats`); check the
//! server (doctor); cancel, retry; pause and resume queues; the live
//! workers' rows (register, refresh, unregister, prune the expired, read);
//! list, count and the batches of bulk retry and cancel, whose statements
//! each backend declares as the constant pieces of a [`filter::Filtered`]
//! (see `filter.rs`). Each method documents what it promises; the
//! backends' module docs say how their SQL keeps it; the contract suite
//! (`tests/tests/contract/`, one module per area) checks each promise on
//! every backend and on a 3-node Galera cluster. A method that writes is
//! one try of one statement or one short transaction; what every backend
//! does the same way around those tries — deadlines, retries of transient
//! errors, chunks of fences, batches of a prune — is written once in
//! `policy.rs`, which [`Store`] calls for every write, and so are the
//! fencing tokens.
//!
//! The trait is crate-private (nothing outside jobq can implement it) and
//! not object safe on purpose (`async fn`, associated types): the set of
//! backends is closed, so [`Store`] is an enum matched in one place
//! ([`dispatch!`]) rather than a boxed trait object. No allocation per call,
//! and every arm calls the trait, so a backend missing a method does not
//! compile. Nothing outside `store/` sees a dialect.
//!
//! # Layers
//!
//! The list of backends (`backends.rs`: names only, no import) ← value
//! types (`types.rs`, `ops.rs`, `roster.rs`, `options.rs`, `connection.rs`)
//! ← errors ← the contract and its policy (`store/contract.rs`,
//! `store/policy.rs`, `store/filter.rs`, `store/doctor.rs`, and
//! `store/shared.rs`: the code backends write alike, as macros and over
//! [`shared::Columns`]) ← the backends (`store/<backend>/`) ← this file
//! ([`Store`], its dispatch, [`connect`]) ← the client (`handle.rs`, and
//! `pools.rs`: each backend's constructor and accessor on `Jobq`) ← the
//! worker ← testing. No module imports one above it
//! (`tests/tests/layers.rs` checks the whole graph): a backend never
//! imports this file or the client.
//!
//! # Layout
//!
//! Each backend is a folder, behind its Cargo feature:
//!
//! - `mod.rs`: the store (a `Clone` struct owning its pool) and its
//!   `impl BackendStore`, each write one try (the policy retries it), with
//!   the methods its dialect writes as others do expanded from `shared.rs`;
//! - `sql.rs`: every statement it runs, as constants (IN-lists are built
//!   there from constant pieces), and its migrations (`MIGRATIONS`, the
//!   files of `jobq-runtime/migrations/<backend>/`); tests reach the
//!   statements as `jobq_runtime::__private::sql::<backend>`. No SQL text
//!   lives anywhere else but `store/sql.rs`, the few statements every
//!   backend writes word for word (a test below checks it);
//! - `glue.rs`: the `EnqueueConnection` impl of its connection (and, for
//!   `testing`, how a database of a test's own is made on its server);
//! - its mechanism files: MySQL's resumed-claim `position.rs` and connect
//!   list `failover.rs`, PostgreSQL's `notify.rs` and `listen.rs`, SQLite's
//!   `shared_write.rs` and `checkpoint.rs`; each backend's `doctor.rs` (its
//!   checks, on the shared plumbing of [`doctor`]);
//! - `tests.rs`: its unit tests, if any.
//!
//! # Adding a backend
//!
//! Its folder as above, with `impl BackendStore for FooStore` (the compiler
//! lists what is missing), and its migrations: the files in
//! `jobq-runtime/migrations/foo/` and their list in its `sql.rs` (a test
//! below checks the two agree). Outside them it touches four files, three
//! of them in jobq-runtime:
//!
//! 1. `jobq-runtime/src/backends.rs`: its entry in the list (variant,
//!    feature, store, sqlx pool and connection, name, URL schemes, and the
//!    names and docs of `Jobq::from_foo_pool` and `Jobq::foo_pool`).
//!    Everything that has a variant, an arm or an item per backend is made
//!    from the list: [`Backend`] with its name, feature and schemes,
//!    `AnyConnection`, [`Store`], [`dispatch!`], [`connect`],
//!    [`Store::enqueue_in`], the constructors and accessors on `Jobq`
//!    (`pools.rs`), `__private::sql` and the error of a build with no
//!    backend (`lib.rs`).
//! 2. This file: its module, `#[cfg(feature = "foo")] pub(crate) mod foo;`
//!    (written out: `cargo fmt` does not see a module a macro declares).
//! 3. `jobq-runtime/Cargo.toml`: its feature, enabling its sqlx driver
//!    alone (`foo = ["sqlx/foo"]`), in `default` if it should be on by
//!    default. `scripts/backends.sh` finds it there and builds it alone; a
//!    test below checks that the manifest's backend features are the list's.
//! 4. `tests/src/lib.rs`: its row in the contract suite
//!    (`tests/tests/contract/`, every method of [`BackendStore`] on every
//!    backend: the suite a backend must pass), which the conformance suite
//!    then runs on too: a `TestDb::foo()` and its line in
//!    `on_every_backend!`. Beside it, `tests/src/sql.rs`: its arm in the
//!    few statements those tests write by hand (`Db`: a row made to look
//!    old, a transaction that holds rows the way its claim does). (A
//!    backend on a server also needs the test scripts to give it one:
//!    `scripts/test.sh` a database per run, `tests/src/scratch.rs` scratch
//!    databases.)
//!
//! What only some backends do is written where it is needed, not asked of
//! a new one: MySQL/MariaDB's connect list sees every result
//! ([`dispatch_seen!`]) and has accessors of its own on `Jobq`; a server
//! backend adds its arm to [`server_database`] for `TestJobq::isolated`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use self::filter::{Kind, Statement, Where};
use crate::backends;
use crate::connection::AnyConnection;
use crate::error::{Error, Result};
use crate::metrics::statement;
use crate::ops::{Order, Stats, StatsWindow};
use crate::options::{ConnectOptions, Rate};
use crate::roster::WorkerRecord;
use crate::types::Backend;
use crate::types::{Enqueued, JobInfo, QueueCounts, Schedule, ScheduleInfo};

pub(crate) mod batch;
pub(crate) mod contract;
pub(crate) mod doctor;
pub(crate) mod filter;
pub(crate) mod flow;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) mod look;
pub(crate) mod migrate;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
pub(crate) mod policy;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod ring;
mod shared;
pub(crate) mod sql;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
mod stash;

pub(crate) use contract::{
    BackendStore, ClaimRequest, ClaimedJob, Fence, Flow, LimitedClaim, NewJob, Prunable,
    QueueControl, Releases, RowLocks, Settled, Target, Transition, WorkerRefresh, WorkerRow,
    history_message,
};
pub(crate) use policy::new_token_base;

/// Makes [`Store`] from the list of backends: a variant per compiled-in backend.
macro_rules! store_enum {
    (() $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        /// The concrete stores, one variant per compiled-in backend.
        #[derive(Debug, Clone)]
        pub(crate) enum Store {
            $(
                #[cfg(feature = $feature)]
                $variant($module::$store),
            )*
        }
    };
}

backends::list!(store_enum);

/// Runs `$body` with `$s` bound to the concrete store.
macro_rules! dispatch {
    ($self:expr, $s:ident => $body:expr) => {
        crate::backends::list!(dispatch_arms($self, $s => $body))
    };
}

/// The `match` of [`dispatch!`]: an arm per compiled-in backend.
macro_rules! dispatch_arms {
    (($self:expr, $s:ident => $body:expr) $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        match $self {
            $(
                #[cfg(feature = $feature)]
                Store::$variant($s) => $body,
            )*
        }
    };
}

/// [`dispatch!`] for a call that returns a `Result`: on MySQL/MariaDB the
/// store also sees the result, so that a connect list can react to a lost
/// node (`store/mysql/failover.rs`).
macro_rules! dispatch_seen {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            #[cfg(feature = "mysql")]
            Store::MySql($s) => {
                let result = $body;
                $s.seen(&result);
                result
            }
            #[allow(unreachable_patterns)]
            store => dispatch!(store, $s => $body),
        }
    };
}

/// The `match` of [`connect`]: the store of `$backend` if it is compiled
/// in, else [`Error::BackendNotCompiled`].
macro_rules! connect_to {
    (($backend:expr, $url:expr, $options:expr) $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        match $backend {
            $(
                #[cfg(feature = $feature)]
                Backend::$variant => Ok(Store::$variant($module::$store::connect($url, $options).await?)),
            )*
            #[allow(unreachable_patterns)]
            backend => Err(Error::BackendNotCompiled {
                backend,
                feature: backend.feature(),
            }),
        }
    };
}

/// The `match` of [`Store::enqueue_in`]: a backend's connection to a store
/// of the same backend, else [`Error::BackendMismatch`].
macro_rules! enqueue_in_arms {
    (($this:expr, $conn:expr, $job:expr) $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        match ($this, $conn) {
            $(
                #[cfg(feature = $feature)]
                (Store::$variant(_), AnyConnection::$variant(c)) => $module::$store::enqueue_in(c, $job).await,
            )*
            #[allow(unreachable_patterns)]
            (store, given) => Err(Error::BackendMismatch {
                expected: store.backend().name(),
                given: given.backend().name(),
            }),
        }
    };
}

/// The `match` of [`Store::enqueue_flow_in`], as [`enqueue_in_arms`].
macro_rules! enqueue_flow_in_arms {
    (($this:expr, $conn:expr, $flow:expr) $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        match ($this, $conn) {
            $(
                #[cfg(feature = $feature)]
                (Store::$variant(_), AnyConnection::$variant(c)) => <$module::$store as BackendStore>::enqueue_flow_in(c, $flow).await,
            )*
            #[allow(unreachable_patterns)]
            (store, given) => Err(Error::BackendMismatch {
                expected: store.backend().name(),
                given: given.backend().name(),
            }),
        }
    };
}

/// The `match` of [`Store::enqueue_batch_in`], as [`enqueue_in_arms`].
macro_rules! enqueue_batch_in_arms {
    (($this:expr, $conn:expr, $batch:expr) $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        match ($this, $conn) {
            $(
                #[cfg(feature = $feature)]
                (Store::$variant(_), AnyConnection::$variant(c)) => <$module::$store as BackendStore>::enqueue_batch_in(c, $batch).await,
            )*
            #[allow(unreachable_patterns)]
            (store, given) => Err(Error::BackendMismatch {
                expected: store.backend().name(),
                given: given.backend().name(),
            }),
        }
    };
}

/// The `match` of [`Store::complete_in`]: the backend of the caller's
/// connection (no store needed: the statement runs on that connection).
macro_rules! complete_in_arms {
    (($conn:expr, $fence:expr, $output:expr) $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        match $conn {
            $(
                #[cfg(feature = $feature)]
                AnyConnection::$variant(c) => <$module::$store as BackendStore>::complete_in(c, $fence, $output).await,
            )*
        }
    };
}

/// [`dispatch_seen!`] of a write, one try of it (`$call`) run by the
/// policy ([`policy::retried`]): again after a transient error, each try
/// within the deadline; `$statement` names it ([`statement`]).
macro_rules! retried {
    ($self:expr, $statement:ident, $s:ident => $call:expr) => {
        dispatch_seen!($self, $s => policy::retried($s, statement::$statement, || $call).await)
    };
}

/// Creates (`create`) or drops database `name` on the server of `url`
/// (MySQL/MariaDB or PostgreSQL), for `jobq_runtime::testing`.
#[cfg(feature = "testing")]
pub(crate) async fn server_database(url: &str, name: &str, create: bool) -> Result<()> {
    match Backend::from_url(url) {
        #[cfg(feature = "mysql")]
        Some(Backend::MySql) => mysql::glue::server_database(url, name, create).await,
        #[cfg(feature = "postgres")]
        Some(Backend::Postgres) => postgres::glue::server_database(url, name, create).await,
        _ => Err(Error::UnsupportedUrl(crate::options::redact_url(url))),
    }
}

/// Opens the store `url` names, if its backend is compiled in.
pub(crate) async fn connect(url: &str, options: &ConnectOptions) -> Result<Store> {
    let Some(backend) = Backend::from_url(url) else {
        return Err(Error::UnsupportedUrl(crate::options::redact_url(url)));
    };
    backends::list!(connect_to(backend, url, options))
}

impl Store {
    pub(crate) fn backend(&self) -> Backend {
        dispatch!(self, s => s.backend())
    }

    /// The same store with statement deadline `deadline`.
    pub(crate) fn with_deadline(&self, deadline: Duration) -> Self {
        let mut store = self.clone();
        dispatch!(&mut store, s => s.deadline = deadline.max(crate::options::MIN_STATEMENT_TIMEOUT));
        store
    }

    /// See [`BackendStore::server_payload_limit`].
    pub(crate) fn server_payload_limit(&self) -> Option<(usize, String)> {
        dispatch!(self, s => s.server_payload_limit())
    }

    /// Applies the embedded migrations; safe from many processes at once.
    pub(crate) async fn migrate(&self) -> Result<()> {
        dispatch_seen!(self, s => s.migrate().await)
    }

    /// Whether every embedded migration is applied: [`Error::NotMigrated`]
    /// for a database never migrated, [`Error::MigrationsPending`] for one
    /// an older jobq migrated. One read of `jobq_migrations`.
    pub(crate) async fn check_migrated(&self) -> Result<()> {
        let applied = dispatch_seen!(self, s => s.applied_migrations().await)?;
        match migrate::missing(dispatch!(self, s => s.migrations()), &applied) {
            None => Ok(()),
            Some(what) => Err(Error::MigrationsPending { what, source: None }),
        }
    }

    pub(crate) async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        retried!(self, ENQUEUE, s => s.enqueue(job))
    }

    /// Inserts a batch; results are in input order.
    pub(crate) async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        retried!(self, ENQUEUE, s => s.enqueue_many(jobs))
    }

    /// Inserts `job` through the caller's connection, which must be of this
    /// store's backend.
    pub(crate) async fn enqueue_in(
        &self,
        conn: AnyConnection<'_>,
        job: &NewJob,
    ) -> Result<Enqueued> {
        let enqueued = backends::list!(enqueue_in_arms(self, conn, job))?;
        dispatch!(self, s => s.enqueued_in(&enqueued, &job.queue));
        Ok(enqueued)
    }

    /// Marks held job `fence` `done` (with `output`) on the caller's
    /// connection, in its transaction; whether it was still held.
    pub(crate) async fn complete_in(
        conn: AnyConnection<'_>,
        fence: Fence,
        output: Option<&str>,
    ) -> Result<bool> {
        backends::list!(complete_in_arms(conn, fence, output))
    }

    /// Claims up to `limit` due jobs of `queue`, ordered by priority, run_at, id.
    pub(crate) async fn claim(
        &self,
        queue: &str,
        limit: u32,
        lease: Duration,
        worker: &str,
    ) -> Result<Vec<ClaimedJob>> {
        let claim = ClaimRequest {
            queue,
            limit,
            lease: lease.min(crate::MAX_DELAY),
            worker,
        };
        retried!(self, CLAIM, s => s.claim(claim))
    }

    /// [`claim`](Self::claim) of a queue with a global concurrency limit
    /// (see [`BackendStore::claim_limited`]).
    pub(crate) async fn claim_limited(
        &self,
        queue: &str,
        limit: u32,
        lease: Duration,
        worker: &str,
        flow: Flow,
    ) -> Result<LimitedClaim> {
        let claim = ClaimRequest {
            queue,
            limit,
            lease: lease.min(crate::MAX_DELAY),
            worker,
        };
        retried!(self, CLAIM, s => s.claim_limited(claim, flow))
    }

    /// See [`BackendStore::set_limit`].
    pub(crate) async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        retried!(self, LIMIT, s => s.set_limit(queue, limit))?;
        self.announce_control();
        Ok(())
    }

    /// See [`BackendStore::announce_control`].
    pub(crate) fn announce_control(&self) {
        dispatch!(self, s => s.announce_control());
    }

    /// See [`BackendStore::flush_wakeups`]; at most the statement deadline.
    pub(crate) async fn flush_wakeups(&self) {
        dispatch!(self, s => s.flush_wakeups(s.deadline()).await);
    }

    /// See [`BackendStore::set_rate`].
    pub(crate) async fn set_rate(
        &self,
        queue: &str,
        rate: Option<crate::options::Rate>,
    ) -> Result<()> {
        retried!(self, RATE, s => s.set_rate(queue, rate))?;
        self.announce_control();
        Ok(())
    }

    /// See [`BackendStore::queue_controls`].
    pub(crate) async fn queue_controls(&self) -> Result<Vec<QueueControl>> {
        dispatch_seen!(self, s => s.queue_controls().await)
    }

    /// Deletes every row of the `which` kind that finished more than
    /// `older_than` ago, oldest first, in batches ([`policy::prune`]),
    /// then, if it deleted any, a bounded share of the unique keys' rows
    /// whose holders are gone ([`policy::prune_unique`]: at most
    /// [`UNIQUE_PAGES_PER_PRUNE`](policy::UNIQUE_PAGES_PER_PRUNE) pages,
    /// resuming where the last prune stopped); returns how many jobs.
    /// Deletes the unique keys' rows whose holders are gone
    /// ([`policy::prune_unique`]): all of them, or with `pages` a bounded
    /// share of the table; how many.
    pub(crate) async fn prune_unique(&self, pages: Option<u32>) -> Result<u64> {
        dispatch_seen!(self, s => policy::prune_unique(s, pages).await)
    }

    pub(crate) async fn prune_all(&self, which: Prunable, older_than: Duration) -> Result<u64> {
        let pruned = dispatch_seen!(self, s => policy::prune(s, which, older_than).await)?;
        if pruned > 0 {
            self.prune_unique(Some(policy::UNIQUE_PAGES_PER_PRUNE))
                .await?;
        }
        Ok(pruned)
    }

    /// Releases concurrency keys whose jobs left them ([`policy::release_keys`]);
    /// how many blocked jobs it unblocked.
    pub(crate) async fn release_keys(&self, keys: &[String]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        dispatch_seen!(self, s => policy::release_keys(s, keys).await)
    }

    /// Releases every key with jobs, a bounded share of them per call
    /// ([`policy::sweep_keys`]); how many blocked jobs it unblocked.
    pub(crate) async fn sweep_keys(&self, pages: u32) -> Result<u64> {
        dispatch_seen!(self, s => policy::sweep_keys(s, pages).await)
    }

    /// After an operator moved the rows `ids` (a cancel, a retry): lists
    /// retried ones in their keys again (`rejoin`) and releases the keys,
    /// so a cancelled holder's place goes to the next job and a retried
    /// job, which comes back `blocked`, starts when its key has room.
    async fn rekey(&self, ids: &[i64], rejoin: bool) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let keys = retried!(self, RELEASE, s => s.keys_of(ids, rejoin))?;
        self.release_keys(&keys).await?;
        if !rejoin {
            // Cancelled: their dependents, if any, are cancelled or run.
            self.release_dependents(&contract::Settled::both(ids))
                .await?;
        }
        Ok(())
    }

    /// Inserts workflow `flow` in one transaction (see `store/flow.rs`).
    pub(crate) async fn enqueue_flow(&self, flow: &contract::NewFlow) -> Result<Vec<Enqueued>> {
        retried!(self, FLOW, s => s.enqueue_flow(flow))
    }

    /// Inserts workflow `flow` through the caller's connection, which must
    /// be of this store's backend.
    pub(crate) async fn enqueue_flow_in(
        &self,
        conn: AnyConnection<'_>,
        flow: &contract::NewFlow,
    ) -> Result<Vec<Enqueued>> {
        backends::list!(enqueue_flow_in_arms(self, conn, flow))
    }

    /// Releases the dependents of the jobs `settled.flows`
    /// ([`flow::release`]) and the callbacks of the batches of
    /// `settled.batches` ([`batch::release`]), and wakes this process's
    /// claim loops of the queues it made jobs `pending` in.
    pub(crate) async fn release_dependents(
        &self,
        settled: &contract::Settled,
    ) -> Result<flow::Released> {
        let mut released = flow::Released::default();
        if !settled.flows.is_empty() {
            released = dispatch_seen!(self, s => flow::release(s, &settled.flows).await)?;
        }
        if !settled.batches.is_empty() {
            released.absorb(dispatch_seen!(self, s => batch::release(s, &settled.batches).await)?);
        }
        notify_unblocked(&released);
        Ok(released)
    }

    /// What releases missed ([`flow::sweep`], [`batch::sweep`]), as
    /// [`release_dependents`](Self::release_dependents).
    pub(crate) async fn sweep_dependents(&self) -> Result<flow::Released> {
        let mut released = dispatch_seen!(self, s => flow::sweep(s).await)?;
        released.absorb(dispatch_seen!(self, s => batch::sweep(s).await)?);
        notify_unblocked(&released);
        Ok(released)
    }

    /// Inserts batch `batch` in one transaction (see `store/batch.rs`);
    /// a batch created closed with no job fires its callbacks at once.
    pub(crate) async fn enqueue_batch(&self, batch: &contract::NewBatch) -> Result<Vec<Enqueued>> {
        let enqueued = refused(retried!(self, FLOW, s => s.enqueue_batch(batch))?)?;
        if batch.close && batch.members() == 0 {
            self.evaluate_batch(&batch.id).await?;
        }
        Ok(enqueued)
    }

    /// Inserts batch `batch` through the caller's connection, which must
    /// be of this store's backend (a batch closed with no job there fires
    /// at the sweep after the commit).
    pub(crate) async fn enqueue_batch_in(
        &self,
        conn: AnyConnection<'_>,
        batch: &contract::NewBatch,
    ) -> Result<Vec<Enqueued>> {
        refused(backends::list!(enqueue_batch_in_arms(self, conn, batch))?)
    }

    /// Closes batch `id` and moves its callbacks as its state calls for;
    /// whether this call closed it, `None` if there is no such batch.
    pub(crate) async fn close_batch(&self, id: &str) -> Result<Option<bool>> {
        let closed = retried!(self, FLOW, s => s.batch_close(id))?;
        if closed.is_some() {
            self.evaluate_batch(id).await?;
        }
        Ok(closed)
    }

    /// Moves batch `id`'s callbacks as its state calls for.
    async fn evaluate_batch(&self, id: &str) -> Result<()> {
        let released = dispatch_seen!(self, s => batch::evaluate(s, id).await)?;
        notify_unblocked(&released);
        Ok(())
    }

    /// Batch `id` as stored.
    pub(crate) async fn batch_read(&self, id: &str) -> Result<Option<contract::BatchRows>> {
        dispatch_seen!(self, s => s.batch_read(id).await)
    }

    /// The jobs of batch `id` that have not ended.
    pub(crate) async fn batch_unfinished(&self, id: &str) -> Result<Vec<i64>> {
        dispatch_seen!(self, s => s.batch_unfinished(id).await)
    }

    /// Workflow `workflow`'s jobs and dependencies.
    pub(crate) async fn flow_read(&self, workflow: &str) -> Result<contract::FlowRows> {
        dispatch_seen!(self, s => s.flow_read(workflow).await)
    }

    /// The task names and outputs of job `job`'s dependencies.
    pub(crate) async fn flow_outputs(&self, job: i64) -> Result<Vec<(String, Option<String>)>> {
        dispatch_seen!(self, s => s.flow_outputs(job).await)
    }

    /// Sets or removes concurrency key `key`'s rate.
    pub(crate) async fn set_key_rate(&self, key: &str, rate: Option<Rate>) -> Result<()> {
        retried!(self, RATE, s => s.set_key_rate(key, rate))?;
        self.announce_control();
        Ok(())
    }

    /// Every concurrency key with a rate.
    pub(crate) async fn key_rates(&self) -> Result<Vec<(String, Rate)>> {
        dispatch_seen!(self, s => s.key_rates().await)
    }

    /// Takes starts from key `key`'s rate for the claimed jobs `ids` (see
    /// [`BackendStore::take_key_starts`]).
    pub(crate) async fn take_key_starts(
        &self,
        key: &str,
        ids: &[i64],
    ) -> Result<Option<contract::KeyStarts>> {
        retried!(self, RATE, s => s.take_key_starts(key, ids))
    }

    /// Marks held jobs `done`; returns how many were still held.
    pub(crate) async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        dispatch_seen!(self, s => policy::complete(s, fences).await)
    }

    /// Marks one held job `done` with its handler's output (JSON); `false`
    /// when the fence no longer matched.
    pub(crate) async fn complete_with_output(&self, fence: Fence, output: &str) -> Result<bool> {
        retried!(self, COMPLETE, s => s.complete_with_output(fence, output))
    }

    /// Saves held job's checkpoint (JSON); `false` when the fence no
    /// longer matched.
    pub(crate) async fn save_checkpoint(&self, fence: Fence, json: &str) -> Result<bool> {
        retried!(self, CHECKPOINT, s => s.save_checkpoint(fence, json))
    }

    /// The checkpoint saved last for job `id`.
    pub(crate) async fn load_checkpoint(&self, id: i64) -> Result<Option<String>> {
        dispatch_seen!(self, s => s.load_checkpoint(id).await)
    }

    /// Records held job's progress (JSON), once; `false` when the fence no
    /// longer matched.
    pub(crate) async fn save_progress(&self, fence: Fence, json: &str) -> Result<bool> {
        dispatch_seen!(self, s => s.save_progress(fence, json).await)
    }

    /// Applies one fenced transition; `false` when the fence no longer matched.
    ///
    /// A move to `failed` is given no delay, whatever it asked for: every
    /// finished row's `run_at` is when it finished (MySQL and SQLite count
    /// and bucket finished rows through `run_at` in the claim index).
    pub(crate) async fn transition(&self, t: &Transition) -> Result<bool> {
        if t.target == Target::Failed && !t.delay.is_zero() {
            let t = Transition {
                delay: Duration::ZERO,
                ..t.clone()
            };
            return retried!(self, TRANSITION, s => s.transition(&t));
        }
        retried!(self, TRANSITION, s => s.transition(t))
    }

    /// Extends the leases of held jobs; returns the fences that are no longer held.
    /// A lease past [`MAX_DELAY`](crate::MAX_DELAY) (e.g. `extend_lease(Duration::MAX)`)
    /// is clamped to it: every backend's time arithmetic holds that.
    pub(crate) async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let lease = lease.min(crate::MAX_DELAY);
        dispatch_seen!(self, s => policy::heartbeat(s, fences, lease).await)
    }

    /// Extends the leases of the held jobs among `fences` whose rows no other
    /// transaction has locked, without waiting on any lock (for the rows of a
    /// settle stuck on a row lock); returns the fences it renewed. A skipped
    /// row is not lost: its lock holder is the stuck settle, or the one it waits on.
    pub(crate) async fn heartbeat_unlocked(
        &self,
        fences: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>> {
        let lease = lease.min(crate::MAX_DELAY);
        dispatch_seen!(self, s => policy::heartbeat_unlocked(s, fences, lease).await)
    }

    /// Returns up to `limit` expired `processing` rows of `queue` to `pending`
    /// (or `failed` when their attempts are used up); returns how many.
    pub(crate) async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        retried!(self, REAP, s => s.reap(queue, limit))
    }

    /// Forwards the database's own wake-ups (PostgreSQL NOTIFY) for `queues`
    /// to the in-process ones until `stop` (its last writes until
    /// `give_up`); returns at once on backends that have none. Polling
    /// stays on regardless: a lost listener never stalls a queue.
    pub(crate) async fn listen(
        &self,
        queues: &[String],
        watch: &crate::wakeup::Watch,
        stop: &CancellationToken,
        give_up: &CancellationToken,
    ) {
        dispatch!(self, s => s.listen(queues, watch, stop, give_up).await)
    }

    pub(crate) async fn job(&self, id: i64) -> Result<Option<JobInfo>> {
        dispatch_seen!(self, s => s.job(id).await)
    }

    /// How many jobs of `queue` are in each status.
    pub(crate) async fn counts(&self, queue: &str) -> Result<QueueCounts> {
        dispatch_seen!(self, s => s.counts(queue).await)
    }

    /// Cancels one row; `signal` gets the claim it ended (if it was
    /// `processing`) once the change has committed.
    pub(crate) async fn cancel(&self, id: i64, signal: fn(&[Fence])) -> Result<bool> {
        let cancelled = self.cancel_row(id).await?;
        signal(&cancelled.held);
        if !cancelled.held.is_empty() {
            self.announce_control();
        }
        Ok(cancelled.changed() == 1)
    }

    /// What cancelling one row changed, telling no worker (see
    /// [`BackendStore::cancel`]); [`cancel`](Self::cancel) is this and the signal.
    pub(crate) async fn cancel_row(&self, id: i64) -> Result<contract::Cancelled> {
        let cancelled = retried!(self, CANCEL, s => s.cancel(id))?;
        if cancelled.changed() > 0 {
            self.rekey(&[id], false).await?;
        }
        Ok(cancelled)
    }

    /// Ids one page of a bulk action reads at most here.
    pub(crate) fn bulk_page(&self) -> u32 {
        dispatch!(self, s => s.filtered().ids_page)
    }

    /// The `kind` statement of this backend for `w`.
    pub(crate) fn statement(&self, kind: Kind, w: &Where<'_>, limit: i64) -> Statement {
        dispatch!(self, s => s.filtered().statement(kind, w, limit))
    }

    /// `w` with the ids of its enqueue-time bounds ([`filter::Window`]),
    /// each found by a binary search of the primary key.
    pub(crate) async fn windowed<'a>(&self, w: Where<'a>) -> Result<Where<'a>> {
        let (from, before) = (w.filter.created_from, w.filter.created_before);
        if from.is_none() && before.is_none() {
            return Ok(w);
        }
        let filtered = dispatch!(self, s => s.filtered());
        let last = dispatch_seen!(self, s => s.ids(&filtered.last_id()).await)?;
        let past_last = last.first().map_or(1, |id| id.saturating_add(1));
        let probe = |id, t| {
            let statement = filtered.probe(id, t);
            async move {
                let ids = dispatch_seen!(self, s => s.ids(&statement).await)?;
                Ok::<_, crate::error::Error>(ids.first().copied())
            }
        };
        let mut window = filter::Window::default();
        let mut lo = 0;
        if let Some(t) = from {
            let first = filter::Window::first_enqueued_at(t, lo, past_last, probe).await?;
            lo = first.unwrap_or(past_last);
            window.from = Some(lo);
        }
        if let Some(t) = before {
            let first = filter::Window::first_enqueued_at(t, lo, past_last, probe).await?;
            window.before = first;
        }
        Ok(Where { window, ..w })
    }

    /// Up to `limit` rows `w` matches, in `order`.
    pub(crate) async fn list(
        &self,
        w: &Where<'_>,
        order: Order,
        limit: u32,
    ) -> Result<Vec<JobInfo>> {
        let w = self.windowed(*w).await?;
        let statement = self.statement(Kind::List(order), &w, i64::from(limit));
        dispatch_seen!(self, s => s.list(&statement).await)
    }

    /// How many rows `w` matches.
    pub(crate) async fn count_where(&self, w: &Where<'_>) -> Result<u64> {
        let w = self.windowed(*w).await?;
        let statement = self.statement(Kind::Count, &w, 0);
        dispatch_seen!(self, s => s.count_where(&statement).await)
    }

    /// Retries every row `w` matches (`w.statuses` already narrowed to the
    /// retryable ones) at most once: the ids it matches are read page by
    /// page ([`filter::Pages`]), then retried in batches of
    /// [`filter::BULK_BATCH`], each re-checking the statuses on the rows it
    /// locks. A job a worker fails again meanwhile is not retried again.
    /// Each batch takes two passes ([`RowLocks`]): the first skips rows
    /// another transaction holds, the second waits for those it left out.
    pub(crate) async fn retry_where(&self, w: Where<'_>) -> Result<u64> {
        let w = self.windowed(w).await?;
        let guard = dispatch!(self, s => s.filtered().guard(w.statuses));
        let mut retried = 0;
        let mut pages = filter::Pages::new(w, Kind::Retry);
        while let Some(ids) = self.next_page(&mut pages).await? {
            for batch in ids.chunks(filter::BULK_BATCH) {
                let mut left = batch.to_vec();
                for locks in [RowLocks::Skip, RowLocks::Wait] {
                    if left.is_empty() {
                        break;
                    }
                    let changed = retried!(self, RETRY, s => s.retry_batch(&left, guard, locks))?;
                    retried += changed.len() as u64;
                    leave_out(&mut left, changed);
                }
                self.rekey(batch, true).await?;
            }
        }
        Ok(retried)
    }

    /// Cancels every row `w` matches (`w.statuses` already narrowed to the
    /// cancellable ones) at most once, in pages, batches and passes as
    /// [`retry_where`](Self::retry_where); `signal` gets the claims each
    /// batch ended once it has committed.
    pub(crate) async fn cancel_where(&self, w: Where<'_>, signal: fn(&[Fence])) -> Result<u64> {
        let w = self.windowed(w).await?;
        let guard = dispatch!(self, s => s.filtered().guard(w.statuses));
        let mut cancelled = 0;
        let mut pages = filter::Pages::new(w, Kind::Cancel);
        while let Some(ids) = self.next_page(&mut pages).await? {
            for batch in ids.chunks(filter::BULK_BATCH) {
                let mut left = batch.to_vec();
                for locks in [RowLocks::Skip, RowLocks::Wait] {
                    if left.is_empty() {
                        break;
                    }
                    let changed = retried!(self, CANCEL, s => s.cancel_batch(&left, guard, locks))?;
                    signal(&changed.held);
                    if !changed.held.is_empty() {
                        self.announce_control();
                    }
                    cancelled += changed.changed();
                    leave_out(&mut left, changed.ids);
                }
                self.rekey(batch, false).await?;
            }
        }
        Ok(cancelled)
    }

    /// The ids of the next page of a bulk action, `None` after the last.
    async fn next_page(&self, pages: &mut filter::Pages<'_>) -> Result<Option<Vec<i64>>> {
        let filtered = dispatch!(self, s => s.filtered());
        let Some(statement) = pages.next_statement(filtered) else {
            return Ok(None);
        };
        let ids = dispatch_seen!(self, s => s.ids(&statement).await)?;
        pages.read(filtered, &ids);
        Ok(Some(ids))
    }

    pub(crate) async fn retry(&self, id: i64) -> Result<bool> {
        let retried = retried!(self, RETRY, s => s.retry(id))?;
        if retried {
            self.rekey(&[id], true).await?;
        }
        Ok(retried)
    }

    /// The figures of every queue (see [`Jobq::stats`](crate::Jobq::stats)):
    /// the clock, the queues with rows, the paused ones and those live
    /// workers serve, then each
    /// queue's figures, put together by [`crate::ops::assemble`].
    pub(crate) async fn stats(&self) -> Result<Stats> {
        let mut stats = dispatch!(self, s => {
            let now = s.clock().await?;
            let window = StatsWindow::ending(now);
            let controls = s.queue_controls().await?;
            // One name per live worker serving a queue.
            let served: Vec<String> = s
                .live_workers()
                .await?
                .iter()
                .flat_map(|w| crate::roster::served_queue_names(&w.queues))
                .collect();
            let mut queues = s.queues_with_rows().await?;
            queues.extend(controls.iter().map(|c| c.queue.clone()));
            queues.extend(served.iter().cloned());
            queues.sort_unstable();
            queues.dedup();
            let mut figures = Vec::with_capacity(queues.len());
            for queue in &queues {
                figures.push(policy::queue_figures(s, queue, window).await?);
            }
            let paused: Vec<String> = controls
                .iter()
                .filter(|c| c.paused)
                .map(|c| c.queue.clone())
                .collect();
            let limits: Vec<(String, u32)> = controls
                .iter()
                .filter_map(|c| c.limit.map(|n| (c.queue.clone(), n)))
                .collect();
            let now = window.now.timestamp_micros();
            let rates: Vec<(String, crate::options::Rate, u32)> = controls
                .iter()
                .filter_map(|c| {
                    let rate = c.rate?;
                    let allowed = policy::gcra(&rate, c.tat.unwrap_or(0), now).allowed;
                    Some((c.queue.clone(), rate, allowed))
                })
                .collect();
            let key_rates = s.key_rates().await?;
            Ok::<_, Error>(crate::ops::assemble(
                window, figures, &paused, &limits, &rates, &served, key_rates,
            ))
        })?;
        for queue in stats.queues.iter_mut().filter(|q| q.processing > 0) {
            queue.in_progress = self.in_progress(&queue.queue).await?;
        }
        Ok(stats)
    }

    /// The running jobs of `queue` that reported progress: a list of its
    /// `processing` rows (a range of the claim index), at most
    /// [`STATS_PROGRESS_CAP`](crate::ops::STATS_PROGRESS_CAP).
    async fn in_progress(&self, queue: &str) -> Result<Vec<crate::ops::RunningProgress>> {
        let filter = crate::ops::JobFilter::new()
            .queue(queue)
            .status(crate::types::JobStatus::Processing);
        let listed = self
            .list(
                &Where::new(&filter),
                Order::OldestFirst,
                crate::ops::STATS_PROGRESS_CAP,
            )
            .await?;
        Ok(listed
            .into_iter()
            .filter_map(crate::ops::RunningProgress::of)
            .collect())
    }

    /// See [`BackendStore::set_paused`].
    pub(crate) async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool> {
        let changed = retried!(self, PAUSE, s => s.set_paused(queue, paused))?;
        self.announce_control();
        Ok(changed)
    }

    /// See [`BackendStore::make_due`].
    #[cfg(feature = "testing")]
    pub(crate) async fn make_due(&self, queue: &str) -> Result<u64> {
        retried!(self, MAKE_DUE, s => s.make_due(queue))
    }

    /// See [`BackendStore::register_worker`].
    pub(crate) async fn register_worker(&self, row: &WorkerRow<'_>) -> Result<()> {
        let row = WorkerRow {
            ttl: row.ttl.min(crate::MAX_DELAY),
            ..*row
        };
        retried!(self, WORKERS, s => s.register_worker(&row))
    }

    /// See [`BackendStore::refresh_worker`].
    pub(crate) async fn refresh_worker(
        &self,
        id: i64,
        running: i64,
        ttl: Duration,
    ) -> Result<bool> {
        let refresh = WorkerRefresh {
            id,
            running,
            ttl: ttl.min(crate::MAX_DELAY),
        };
        retried!(self, WORKERS, s => s.refresh_worker(refresh))
    }

    /// See [`BackendStore::unregister_worker`].
    pub(crate) async fn unregister_worker(&self, id: i64) -> Result<()> {
        retried!(self, WORKERS, s => s.unregister_worker(id))
    }

    /// See [`BackendStore::prune_workers`].
    pub(crate) async fn prune_workers(&self) -> Result<u64> {
        retried!(self, WORKERS, s => s.prune_workers())
    }

    /// See [`BackendStore::record_tick`].
    pub(crate) async fn record_tick(&self, name: &str, tick: DateTime<Utc>) -> Result<()> {
        retried!(self, CRON, s => s.record_tick(name, tick))
    }

    /// See [`BackendStore::last_tick`].
    pub(crate) async fn last_tick(&self, name: &str) -> Result<Option<DateTime<Utc>>> {
        retried!(self, CRON, s => s.last_tick(name))
    }

    /// See [`BackendStore::put_schedule`]; announced to every worker.
    pub(crate) async fn put_schedule(&self, schedule: &Schedule) -> Result<()> {
        retried!(self, CRON, s => s.put_schedule(schedule))?;
        self.announce_control();
        Ok(())
    }

    /// See [`BackendStore::set_schedule_paused`]; announced to every worker.
    pub(crate) async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<bool> {
        let changed = retried!(self, CRON, s => s.set_schedule_paused(name, paused))?;
        self.announce_control();
        Ok(changed)
    }

    /// See [`BackendStore::remove_schedule`]; announced to every worker.
    pub(crate) async fn remove_schedule(&self, name: &str) -> Result<bool> {
        let removed = retried!(self, CRON, s => s.remove_schedule(name))?;
        self.announce_control();
        Ok(removed)
    }

    /// See [`BackendStore::stored_schedules`].
    pub(crate) async fn stored_schedules(&self) -> Result<Vec<ScheduleInfo>> {
        retried!(self, CRON, s => s.stored_schedules(None))
    }

    /// Stored schedule `name`, if it is stored
    /// ([`BackendStore::stored_schedules`]).
    pub(crate) async fn stored_schedule(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        let mut rows = retried!(self, CRON, s => s.stored_schedules(Some(name)))?;
        Ok(rows.pop())
    }

    /// The live workers' rows and the clock they were read at.
    pub(crate) async fn live_workers(&self) -> Result<(DateTime<Utc>, Vec<WorkerRecord>)> {
        dispatch_seen!(self, s => {
            match s.live_workers().await {
                Ok(rows) => s.clock().await.map(|now| (now, rows)),
                Err(error) => Err(error),
            }
        })
    }
}

impl Store {
    /// Every check of [`BackendStore::doctor`], as a report.
    pub(crate) async fn doctor(
        &self,
        options: doctor::DoctorOptions,
    ) -> Result<crate::ops::DoctorReport> {
        let checks = dispatch_seen!(self, s => s.doctor(options).await)?;
        Ok(crate::ops::DoctorReport { checks })
    }
}

/// `left` without the ids a pass `changed` (a bulk action's batch, in id
/// order).
fn leave_out(left: &mut Vec<i64>, mut changed: Vec<i64>) {
    changed.sort_unstable();
    left.retain(|id| changed.binary_search(id).is_err());
}

/// The jobs a batch insert stored, or its refusal as an error.
fn refused(done: contract::BatchInsert) -> Result<Vec<Enqueued>> {
    match done {
        contract::BatchInsert::Stored(enqueued) => Ok(enqueued),
        contract::BatchInsert::Refused(why) => {
            Err(crate::error::InvalidArgument::Batch(why).into())
        }
    }
}

/// Wakes this process's claim loops of the queues `released` made jobs
/// `pending` in (other processes' are woken by the store's bell).
fn notify_unblocked(released: &flow::Released) {
    let mut queues: Vec<&str> = released.unblocked.iter().map(|(_, q)| q.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        crate::wakeup::notify(queue);
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// How a statement starts (followed by a space or a line continuation).
    const KEYWORDS: [&str; 9] = [
        "SELECT", "UPDATE", "INSERT", "DELETE", "WITH", "SET", "CREATE", "PRAGMA", "BEGIN",
    ];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Each re-run after a transient error counts once in the process-wide
    /// counter and once under its statement kind in the metric; the final
    /// success does not count.
    #[test]
    fn a_transient_retry_is_counted_under_its_statement_kind() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let before = super::policy::internal_retries();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            let mut failures = 2;
            let result: crate::Result<u32> = runtime.block_on(super::policy::retry_transient(
                std::time::Duration::from_secs(5),
                crate::metrics::statement::CLAIM,
                |_| true,
                || {
                    let fail = failures > 0;
                    failures -= 1;
                    async move {
                        if fail {
                            Err(sqlx::Error::PoolTimedOut)
                        } else {
                            Ok(7)
                        }
                    }
                },
            ));
            assert_eq!(result.unwrap(), 7);
        });
        assert!(super::policy::internal_retries() >= before + 2);
        let counted: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == crate::metrics::INTERNAL_RETRIES)
            .map(|(key, _, _, value)| {
                let labels: Vec<(String, String)> = key
                    .key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (labels, value)
            })
            .collect();
        assert_eq!(
            counted,
            [(
                vec![("statement".to_owned(), "claim".to_owned())],
                DebugValue::Counter(2)
            )]
        );
    }

    #[test]
    fn a_url_names_its_backend_by_scheme() {
        use crate::types::Backend;
        for (url, backend) in [
            ("mysql://root@db/app", Some(Backend::MySql)),
            ("mariadb://root@db/app", Some(Backend::MySql)),
            ("sqlite://jobs.db", Some(Backend::Sqlite)),
            ("sqlite::memory:", Some(Backend::Sqlite)),
            ("postgres://db/app", Some(Backend::Postgres)),
            ("postgresql://db/app", Some(Backend::Postgres)),
            ("redis://db", None),
        ] {
            assert_eq!(Backend::from_url(url), backend, "{url}");
        }
    }

    /// Every backend's Cargo feature, from the list of backends.
    macro_rules! features {
        (() $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
            [$($feature),*]
        };
    }

    /// Checks each compiled-in backend's migrations with
    /// [`embeds_every_file_of`].
    macro_rules! check_embedded_migrations {
        (() $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
            $(
                #[cfg(feature = $feature)]
                embeds_every_file_of(stringify!($module), super::$module::sql::MIGRATIONS);
            )*
        };
    }

    /// The list names the backend features of jobq-runtime's Cargo.toml,
    /// all and only those: each enables its sqlx driver alone
    /// (`mysql = ["sqlx/mysql"]`), the form scripts/backends.sh finds them
    /// by, and no other feature is of that form.
    #[test]
    fn the_list_names_every_backend_feature_of_the_manifest() {
        let manifest =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
                .unwrap();
        let mut in_manifest: Vec<&str> = manifest
            .lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(" = ")?;
                (value == format!("[\"sqlx/{name}\"]")).then_some(name)
            })
            .collect();
        in_manifest.sort_unstable();
        let mut listed = super::backends::list!(features);
        listed.sort_unstable();
        assert_eq!(listed.as_slice(), in_manifest);
    }

    /// Each compiled-in backend embeds every file of its folder of
    /// migrations (`migrations/<module>/{version}_{name}.sql`), in order.
    #[test]
    fn each_backend_embeds_every_migration_of_its_folder() {
        super::backends::list!(check_embedded_migrations);
    }

    fn embeds_every_file_of(module: &str, migrations: &[super::migrate::Migration]) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(module);
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort_unstable();
        let embedded: Vec<String> = migrations
            .iter()
            .map(|m| format!("{}_{}.sql", m.version, m.description))
            .collect();
        assert!(!embedded.is_empty(), "{module}");
        assert_eq!(embedded, files, "{}", dir.display());
    }

    /// The tests that exist only in a build without every backend.
    /// scripts/backends.sh runs `single_backend::` in each single-backend
    /// build (the default build, which CI tests, has none of them), and
    /// fails if it finds none: put every such test here.
    #[cfg(not(all(feature = "mysql", feature = "postgres", feature = "sqlite")))]
    mod single_backend {
        /// A URL of a backend left out of the build names the feature to enable.
        #[tokio::test]
        async fn a_url_of_a_compiled_out_backend_names_its_feature() {
            let url = if cfg!(not(feature = "postgres")) {
                "postgres://user:secret@db/app"
            } else if cfg!(not(feature = "mysql")) {
                "mysql://user:secret@db/app"
            } else {
                "sqlite::memory:"
            };
            let error = super::super::connect(url, &crate::ConnectOptions::new())
                .await
                .unwrap_err();
            let crate::Error::BackendNotCompiled { backend, feature } = &error else {
                panic!("{error:?}");
            };
            assert_eq!(*feature, backend.feature());
            assert!(
                error.to_string().contains(&format!("`{feature}`")),
                "{error}"
            );
        }
    }

    /// Each backend's SQL is in its own `store/<backend>/sql.rs` (what all
    /// write word for word in `store/sql.rs`) and nowhere
    /// else: no other source file of the crate (unit tests aside) has a
    /// string literal that starts like a statement.
    #[test]
    fn sql_lives_only_in_the_backends_sql_files() {
        let mut files = Vec::new();
        rust_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut found = Vec::new();
        for path in files {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name == "sql.rs" || name == "tests.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (at, _) in line.match_indices('"') {
                    let rest = line[at + 1..].trim_start();
                    let sql = KEYWORDS.iter().any(|kw| {
                        rest.strip_prefix(kw)
                            .is_some_and(|after| after.starts_with([' ', '\\']) || after.is_empty())
                    });
                    if sql {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "SQL outside store/<backend>/sql.rs:\n{}",
            found.join("\n")
        );
    }
}
