//! The runtime's error type.

use std::time::Duration;

use chrono::{DateTime, Utc};
use jobq_core::RegistryError;

use crate::options::{MAX_JOB_NAME_LEN, MAX_KEY_LEN, MAX_QUEUE_LEN};
use crate::types::Backend;

/// Everything that can go wrong in a jobq call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database returned an error or could not be reached; the message
    /// ends with sqlx's, which has the server's or the I/O error's
    /// (`database error: error communicating with database: Connection
    /// refused (os error 111)`). A URL's password is never part of it.
    ///
    /// The one place its cause is printed in its message as well as being
    /// its [`source`](std::error::Error::source): a `{}` of it is what
    /// applications log, and "database error" alone says nothing. Printers
    /// of the whole chain skip a source whose text the message ends with.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// A statement found a table of jobq missing: the database was never
    /// migrated (or by an older jobq).
    #[error(
        "the database has no table `{table}`: jobq's tables are not created yet; run Jobq::migrate() (or `jobq migrate`) once before using it"
    )]
    NotMigrated {
        /// The missing table (`jobq_jobs`, `jobq_queues`, …).
        table: String,
        /// The server's error.
        #[source]
        source: sqlx::Error,
    },
    /// The database lacks migrations (or an index one of them creates) this
    /// jobq needs: it was migrated by an older jobq, or not fully. A worker
    /// checks at its start and fails with this at once
    /// (`the database lacks jobq's migration 20261204000001 (jobq_jobs_job_name) …`).
    #[error(
        "the database lacks jobq's {what} (it was migrated by an older jobq, or not fully): run Jobq::migrate() (or `jobq migrate`) of this version before using it"
    )]
    MigrationsPending {
        /// What is missing: `migration 20261204000001 (jobq_jobs_job_name)`,
        /// `migrations …, …`, or `index \`jobq_jobs_job_name\``.
        what: String,
        /// The server's error, when a statement found the index missing.
        #[source]
        source: Option<sqlx::Error>,
    },
    /// No connection to the database was made within the connect timeout
    /// ([`ConnectOptions::connect_timeout`](crate::ConnectOptions::connect_timeout)).
    #[error(
        "no connection to {url} within {timeout:?}: is the server running, and are the URL's host and port right?"
    )]
    ConnectTimeout {
        /// The URL, its passwords replaced by `***`.
        url: String,
        /// How long jobq waited.
        timeout: Duration,
    },
    /// The database did not finish one of jobq's statements (or short
    /// transactions), waiting for a connection included, within the
    /// statement deadline
    /// ([`ConnectOptions::statement_timeout`](crate::ConnectOptions::statement_timeout)):
    /// the server is frozen, cut off, or overloaded. jobq closed that
    /// connection rather than use it again. A write may or may not have
    /// taken effect.
    #[error(
        "the database did not answer within {timeout:?} ({statement}); jobq closed that connection (a write may or may not have taken effect)"
    )]
    StatementTimeout {
        /// What jobq was doing: `claim`, `complete`, `heartbeat`, `enqueue`, `read`, …
        statement: &'static str,
        /// The deadline it missed.
        timeout: Duration,
    },
    /// No node of a connect list (`mysql://user@node1,node2,node3/app`)
    /// took a connection and answered as ready; each node's reason is
    /// listed (`node1:3306: error communicating with database: Connection
    /// refused (os error 111); node2:3306: …`).
    #[error("no database node of {url} is reachable: {reasons}")]
    NoNodeReachable {
        /// The URL, its passwords replaced by `***`.
        url: String,
        /// Why each node was passed over, by `host:port`.
        reasons: String,
    },
    /// A payload could not be serialized to JSON.
    #[error("payload of job `{job}` could not be serialized to JSON")]
    Serialize {
        /// The job name.
        job: String,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// A job's stored output is not JSON of the type asked for
    /// ([`Jobq::output`](crate::Jobq::output)): the handler's output type
    /// changed since the job ran, or the row was written by hand.
    #[error("the output of job {id} (`{job}`) does not deserialize into `{type_name}`")]
    Output {
        /// The job's id.
        id: i64,
        /// The job name.
        job: String,
        /// The type asked for.
        type_name: &'static str,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// [`CompleteIn::complete_in`](crate::CompleteIn::complete_in) did not
    /// complete the job: nothing was written (the caller's transaction may
    /// go on, or roll back).
    #[error("job {id} was not completed in the transaction: {why}")]
    CompleteIn {
        /// The job's id.
        id: i64,
        /// Why.
        why: String,
    },
    /// The URL names no database jobq supports. It is shown with the
    /// password of its userinfo and of any `…password=` query parameter
    /// replaced by `***`.
    #[error(
        "unsupported database URL `{0}`: expected mysql://, mariadb://, sqlite:// (or sqlite::memory:) or postgres://"
    )]
    UnsupportedUrl(String),
    /// The URL names a backend this build of jobq-runtime leaves out: enable
    /// its Cargo feature.
    #[error(
        "jobq-runtime was built without {backend} support: enable its `{feature}` feature (features = [\"{feature}\"])"
    )]
    BackendNotCompiled {
        /// The backend the URL names.
        backend: crate::Backend,
        /// The feature that compiles it in.
        feature: &'static str,
    },
    /// An argument is out of range or malformed; the [`InvalidArgument`]
    /// says which and what is allowed.
    #[error(transparent)]
    Invalid(#[from] InvalidArgument),
    /// The job registry is inconsistent (two jobs share a name).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A worker could not be built; the [`ConfigError`] says what is wrong.
    #[error("the worker cannot be built: {0}")]
    Config(ConfigError),
    /// The database server is older than jobq supports.
    #[error("{backend} {version} is too old for jobq: it needs {needs} or newer ({because})")]
    UnsupportedServerVersion {
        /// The server's backend.
        backend: Backend,
        /// The version the server reported.
        version: String,
        /// The oldest version jobq supports.
        needs: String,
        /// What jobq needs of that version.
        because: &'static str,
    },
    /// Another migration held the migration lock for too long.
    #[error(
        "could not take the migration lock `{lock}` within {seconds} s; is another migration stuck?"
    )]
    MigrationLockTimeout {
        /// The lock's name.
        lock: &'static str,
        /// How long jobq waited for it.
        seconds: u64,
    },
    /// A row holds a status jobq does not know (written by something
    /// else); the message names it.
    #[error("{0}")]
    UnknownStatus(String),
    /// A task of the worker panicked (or ended before the worker stopped);
    /// the worker stopped, releasing or settling what it held. Returned by
    /// `Worker::run_until` and `WorkerHandle::shutdown`.
    #[error("worker task `{task}` panicked: {message}")]
    Panicked {
        /// Which task: `claim`, `completer`, `cron`, `settle`, …
        task: &'static str,
        /// The panic's message.
        message: String,
    },
    /// An enqueue layer refused the row (see
    /// [`EnqueueLayer`](crate::middleware::EnqueueLayer)); nothing was stored.
    #[error("job `{job}` was refused by an enqueue layer")]
    Refused {
        /// The job's name.
        job: String,
        /// What the layer said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A connection of one backend was given to a `Jobq` of another.
    #[error("this Jobq stores jobs in {expected}, but the connection given is {given}")]
    BackendMismatch {
        /// The handle's backend.
        expected: &'static str,
        /// The connection's backend.
        given: &'static str,
    },
}

/// `known jobs: a, b` or `no job is known`, for [`InvalidArgument::UnknownJob`].
fn known_jobs(known: &[String]) -> String {
    if known.is_empty() {
        "no job is known: no live worker has registered".to_owned()
    } else {
        format!("known jobs: {}", known.join(", "))
    }
}

/// `Result<T, jobq_runtime::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An argument jobq refuses ([`Error::Invalid`]); each message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidArgument {
    /// The payload's JSON is over the handle's limit
    /// ([`Jobq::with_max_payload_bytes`](crate::Jobq::with_max_payload_bytes)).
    #[error(
        "payload of job `{job}` is {bytes} bytes of JSON, over the limit of {limit} bytes; store large data elsewhere and enqueue a reference to it, or raise the limit with Jobq::with_max_payload_bytes"
    )]
    PayloadTooLarge {
        /// The job name.
        job: String,
        /// The payload's size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A schedule given to [`Jobq::put_schedule`](crate::Jobq::put_schedule)
    /// that cannot run: a name, job name, cron expression, time zone, payload
    /// or queue that is not valid.
    #[error("schedule `{name}` cannot be stored: {problem}")]
    Schedule {
        /// The schedule's name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A workflow given to
    /// [`Jobq::enqueue_workflow`](crate::Jobq::enqueue_workflow) that cannot
    /// be stored: an empty one, a task name given twice or not valid, a
    /// dependency on a task it does not have, a cycle, more jobs or
    /// dependencies than a workflow may have, a job with a concurrency key,
    /// or a job that is a duplicate of a stored one. Nothing of it was
    /// stored (in a caller's transaction: roll it back).
    #[error("the workflow cannot be stored: {0}")]
    Workflow(String),
    /// A batch given to [`Jobq::enqueue_batch`](crate::Jobq::enqueue_batch)
    /// or [`Jobq::add_to_batch`](crate::Jobq::add_to_batch), or named to
    /// [`Jobq::close_batch`](crate::Jobq::close_batch), that cannot be
    /// stored or found: an id not valid or already taken, more jobs than
    /// one call may add, a batch that is closed (or unknown) to additions,
    /// a job with a concurrency key among its callbacks, or a job that is
    /// a duplicate of a stored one. Nothing of it was stored (in a
    /// caller's transaction: roll it back).
    #[error("the batch cannot be stored: {0}")]
    Batch(String),
    /// A payload given as text ([`Jobq::enqueue_json`](crate::Jobq::enqueue_json)) is not JSON.
    #[error("payload of job `{job}` is not valid JSON: {message}")]
    PayloadNotJson {
        /// The job name.
        job: String,
        /// What the JSON parser said.
        message: String,
    },
    /// A job given by name ([`Jobq::enqueue_json`](crate::Jobq::enqueue_json))
    /// that neither this process nor any live worker registers, with no
    /// queue given: it would land in a queue no worker may serve.
    #[error(
        "no job named `{job}` is registered by this process or published by a live worker ({known}); start a worker that registers it, or name the queue to store it anyway (`--queue`, Enqueue::queue)",
        known = known_jobs(known)
    )]
    UnknownJob {
        /// The job name.
        job: String,
        /// The job names that are known, sorted.
        known: Vec<String>,
    },
    /// A JSON payload ([`Jobq::enqueue_json`](crate::Jobq::enqueue_json))
    /// does not fit the fields its job published: not an object, a field
    /// the job does not have, or a required field missing.
    #[error("payload of job `{job}` does not fit its fields ({fields}): {problem}")]
    PayloadFields {
        /// The job name.
        job: String,
        /// What is wrong.
        problem: String,
        /// The job's fields, as `name: type` (`?` after an optional one's name).
        fields: String,
    },
    /// The idempotency key of a job given by name and JSON cannot be
    /// computed from the template the job published as the job itself
    /// would compute it.
    #[error(
        "the idempotency key of job `{job}` cannot be computed from its template {template:?}: {problem}; give the key (`--key`, Enqueue::idempotency_key)"
    )]
    KeyTemplate {
        /// The job name.
        job: String,
        /// The template.
        template: String,
        /// Why not.
        problem: String,
    },
    /// The payload's JSON is over what the server takes in one statement.
    #[error(
        "payload of job `{job}` is {bytes} bytes of JSON, more than the {backend} server takes in one statement ({limit} bytes: {setting}, less room for the other columns); raise max_allowed_packet on the server (new connections see it), or store large data elsewhere and enqueue a reference to it"
    )]
    PayloadOverServerLimit {
        /// The job name.
        job: String,
        /// The payload's size.
        bytes: usize,
        /// The server's backend.
        backend: Backend,
        /// The most payload bytes the server takes.
        limit: usize,
        /// The server setting that limit comes from.
        setting: String,
    },
    /// The idempotency key is empty or over [`MAX_KEY_LEN`] characters.
    #[error(
        "idempotency key of job `{job}` is {chars} characters long; it must be 1 to {max} (hash a longer key)",
        max = MAX_KEY_LEN
    )]
    KeyLength {
        /// The job name.
        job: String,
        /// The key's length, in characters.
        chars: usize,
    },
    /// A concurrency key ([`Enqueue::concurrency_key`](crate::Enqueue::concurrency_key))
    /// is empty, over [`MAX_KEY_LEN`] characters or holds a NUL, or its
    /// limit is 0 or over [`MAX_KEY_CONCURRENCY`](crate::MAX_KEY_CONCURRENCY).
    #[error(
        "job `{job}` has concurrency key {key:?} with limit {limit}: a key must have 1 to {max_len} characters and no NUL, and a limit must be 1 to {max_limit}",
        max_len = MAX_KEY_LEN,
        max_limit = jobq_core::MAX_KEY_CONCURRENCY
    )]
    ConcurrencyKey {
        /// The job name.
        job: String,
        /// The key.
        key: String,
        /// The limit.
        limit: u32,
    },
    /// A tag that is empty, longer than [`MAX_TAG_LEN`](crate::MAX_TAG_LEN)
    /// bytes or holds a NUL, or more than [`MAX_TAGS`](crate::MAX_TAGS) tags.
    #[error(
        "job `{job}` has tags {tags:?}: at most {max_tags} tags, each 1 to {max_len} bytes without NUL",
        max_tags = jobq_core::MAX_TAGS,
        max_len = jobq_core::MAX_TAG_LEN
    )]
    Tags {
        /// The job name.
        job: String,
        /// Its tags.
        tags: Vec<String>,
    },
    /// Metadata that is not a JSON object, or is over
    /// [`MAX_METADATA_BYTES`](crate::MAX_METADATA_BYTES) as JSON.
    #[error(
        "job `{job}` has metadata of {bytes} bytes that {why}: metadata is a JSON object of at most {max} bytes",
        max = jobq_core::MAX_METADATA_BYTES
    )]
    Metadata {
        /// The job name.
        job: String,
        /// Its size as JSON.
        bytes: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A job is both unique by state or period and limited per
    /// concurrency key: jobq does not combine the two yet.
    #[error(
        "job `{job}` is unique by state or period and has a concurrency key: use one of the two (a plain idempotency key combines with a concurrency key)"
    )]
    UniqueWithConcurrencyKey {
        /// The job name.
        job: String,
    },
    /// A job is unique by state or period ([`Unique`](crate::Unique)) but
    /// has no key to be unique by.
    #[error(
        "job `{job}` is unique by state or period but has no key: give it one with #[job(key = \"…\")] or Enqueue::idempotency_key"
    )]
    UniqueWithoutKey {
        /// The job name.
        job: String,
    },
    /// A [`Unique`](crate::Unique) period is zero or over
    /// [`MAX_DELAY`](crate::MAX_DELAY).
    #[error(
        "the unique period of job `{job}` is {period:?}; it must be more than zero and at most {max:?}",
        max = crate::MAX_DELAY
    )]
    UniquePeriod {
        /// The job name.
        job: String,
        /// The period given.
        period: std::time::Duration,
    },
    /// The idempotency key holds a NUL character.
    #[error(
        "idempotency key {key:?} of job `{job}` has a NUL character (byte {at}), which PostgreSQL cannot store; jobq refuses it on every backend: remove it or hash the key"
    )]
    KeyNul {
        /// The job name.
        job: String,
        /// The key.
        key: String,
        /// The byte offset of the first NUL.
        at: usize,
    },
    /// A filter's key prefix is empty or over [`MAX_KEY_LEN`] characters.
    #[error(
        "key prefix {prefix:?} of a job filter is {chars} characters long; it must be 1 to {max}",
        max = MAX_KEY_LEN
    )]
    KeyPrefixLength {
        /// The prefix.
        prefix: String,
        /// Its length, in characters.
        chars: usize,
    },
    /// A filter's key prefix holds a NUL character, which no stored key has.
    #[error(
        "key prefix {prefix:?} of a job filter has a NUL character (byte {at}), which no idempotency key can hold: remove it"
    )]
    KeyPrefixNul {
        /// The prefix.
        prefix: String,
        /// The byte offset of the first NUL.
        at: usize,
    },
    /// The queue name is empty or over [`MAX_QUEUE_LEN`] bytes.
    #[error(
        "queue name `{queue}` is {bytes} bytes long; it must be 1 to {max} bytes",
        max = MAX_QUEUE_LEN
    )]
    QueueLength {
        /// The queue name.
        queue: String,
        /// Its length, in bytes.
        bytes: usize,
    },
    /// The queue name holds a NUL character.
    #[error(
        "queue name {queue:?} has a NUL character (byte {at}), which PostgreSQL cannot store; jobq refuses it on every backend: remove it"
    )]
    QueueNul {
        /// The queue name.
        queue: String,
        /// The byte offset of the first NUL.
        at: usize,
    },
    /// The job name is empty or over [`MAX_JOB_NAME_LEN`] bytes.
    #[error(
        "job name `{name}` is {bytes} bytes long; it must be 1 to {max} bytes (room for a periodic job's key `cron:{{name}}:{{tick}}` in 255 characters): pin a shorter one with #[job(name = \"…\")]",
        max = MAX_JOB_NAME_LEN
    )]
    JobNameLength {
        /// The job name.
        name: String,
        /// Its length, in bytes.
        bytes: usize,
    },
    /// The job name holds a NUL character.
    #[error(
        "job name {name:?} has a NUL character (byte {at}), which PostgreSQL cannot store; jobq refuses it on every backend: pin another name with #[job(name = \"…\")]"
    )]
    JobNameNul {
        /// The job name.
        name: String,
        /// The byte offset of the first NUL.
        at: usize,
    },
    /// A queue's global concurrency limit is 0 or over
    /// [`MAX_QUEUE_LIMIT`](crate::MAX_QUEUE_LIMIT).
    #[error(
        "the limit of queue `{queue}` is {limit}; it must be 1 to {max} jobs at once (remove a limit with set_queue_limit(queue, None); pause a queue to run none)",
        max = crate::options::MAX_QUEUE_LIMIT
    )]
    QueueLimit {
        /// The queue.
        queue: String,
        /// The value given.
        limit: u32,
    },
    /// A queue's rate limit is out of range: no starts, a period under
    /// [`MIN_RATE_PERIOD`](crate::MIN_RATE_PERIOD) or over
    /// [`MAX_RATE_PERIOD`](crate::MAX_RATE_PERIOD), more than
    /// [`MAX_RATE_STARTS`](crate::MAX_RATE_STARTS) starts or more than one
    /// a microsecond, or a burst of 0 or over its starts.
    #[error(
        "the rate of queue `{queue}` is {rate}: {problem} (remove a rate with set_queue_rate(queue, None))"
    )]
    QueueRate {
        /// The queue.
        queue: String,
        /// The rate given.
        rate: crate::options::Rate,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// `max_attempts` is 0 or over `i32::MAX`.
    #[error(
        "max_attempts of job `{job}` is {max_attempts}; it must be 1 to {max}",
        max = i32::MAX
    )]
    MaxAttempts {
        /// The job name.
        job: String,
        /// The value given.
        max_attempts: u32,
    },
    /// The delay is longer than [`MAX_DELAY`](crate::MAX_DELAY).
    #[error(
        "delay of job `{job}` is {delay:?}, longer than the limit of 100 years (jobq_runtime::MAX_DELAY); pass a shorter delay"
    )]
    DelayTooLong {
        /// The job name.
        job: String,
        /// The delay given.
        delay: Duration,
    },
    /// The run-at instant is more than [`MAX_DELAY`](crate::MAX_DELAY) from now.
    #[error(
        "run_at of job `{job}` is {run_at}, more than 100 years from now (jobq_runtime::MAX_DELAY); pass an instant within 100 years"
    )]
    RunAtTooLate {
        /// The job name.
        job: String,
        /// The instant given.
        run_at: DateTime<Utc>,
    },
}

/// Why a worker cannot be built ([`Error::Config`]); each message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No queue is served.
    #[error("it serves no queue; add one with .queue(name, concurrency)")]
    NoQueue,
    /// A served queue's name is refused.
    #[error("{0}")]
    QueueName(InvalidArgument),
    /// A served queue's concurrency is 0 or over the limit.
    #[error(
        "queue `{queue}` has concurrency {concurrency}; it must be 1 to {max} (for more jobs at once, run more workers)"
    )]
    Concurrency {
        /// The queue.
        queue: String,
        /// The concurrency given.
        concurrency: usize,
        /// The most allowed.
        max: usize,
    },
    /// A queue is served twice.
    #[error("queue `{queue}` is served twice; give it one .queue(…) with the total concurrency")]
    QueueServedTwice {
        /// The queue.
        queue: String,
    },
    /// A checked queue has no registered job.
    #[error(
        "queue `{queue}` has no registered job (queues of registered jobs: {}); check the name, or use .queue_unchecked for a queue fed only by Enqueue::queue overrides",
        quoted_list(.known)
    )]
    UnknownQueue {
        /// The queue.
        queue: String,
        /// The queues of the registered jobs, sorted.
        known: Vec<String>,
    },
    /// A registered job's name (of a served queue or a cron entry) is refused.
    #[error("{0}")]
    JobName(InvalidArgument),
    /// A job of a served queue takes a `State<T>` the worker was not given;
    /// the message lists the states it was given, types as written in Rust
    /// (`std::sync::Arc<Mailer>`, not `alloc::sync::Arc<…>`).
    #[error(
        "job `{job}` ({definition}) takes `State<{}>`, but the worker was given {}; add .state(value){}",
        jobq_core::type_name_as_written(.type_name),
        given_states(.given),
        state_hint(.type_name, .given)
    )]
    MissingState {
        /// The job name.
        job: &'static str,
        /// Where the job is defined.
        definition: String,
        /// The state's type (`std::any::type_name`).
        type_name: &'static str,
        /// The types of the states the worker was given, as written, sorted.
        given: Vec<String>,
    },
    /// A duration is out of its range.
    #[error("the {what} is {value:?}; it must be {min:?} to {max:?}")]
    OutOfRange {
        /// Which setting.
        what: &'static str,
        /// The value given.
        value: Duration,
        /// The least allowed.
        min: Duration,
        /// The most allowed.
        max: Duration,
    },
    /// The heartbeat interval is under 1 ms or not shorter than the lease.
    #[error(
        "the heartbeat interval ({interval:?}) must be at least 1ms and shorter than the lease ({lease:?})"
    )]
    HeartbeatInterval {
        /// The heartbeat interval.
        interval: Duration,
        /// The lease.
        lease: Duration,
    },
    /// A cron schedule does not parse.
    #[error("the cron schedule `{schedule}` of job `{job}` does not parse: {reason}")]
    CronSchedule {
        /// The job name.
        job: String,
        /// The schedule given.
        schedule: String,
        /// What the parser reported.
        reason: String,
    },
    /// A cron schedule's time zone is not a name of the IANA time zone
    /// database.
    #[error(
        "the time zone `{time_zone}` of job `{job}`'s cron schedule is not an IANA time zone name (such as `Europe/Paris` or `America/New_York`)"
    )]
    CronTimeZone {
        /// The job name.
        job: String,
        /// The zone given.
        time_zone: String,
    },
    /// A job is scheduled twice.
    #[error(
        "job `{job}` is scheduled twice; one row per tick is keyed by the job's name, so give it one schedule"
    )]
    CronScheduledTwice {
        /// The job name.
        job: String,
    },
}

impl From<sqlx::Error> for Error {
    /// [`Error::NotMigrated`] when the server says a `jobq_…` table does not
    /// exist, [`Error::Database`] otherwise: every statement's error passes
    /// here, so each call site says the same.
    fn from(error: sqlx::Error) -> Self {
        if let Some(table) = missing_jobq_table(&error) {
            return Self::NotMigrated {
                table,
                source: error,
            };
        }
        match missing_jobq_index(&error) {
            Some(index) => Self::MigrationsPending {
                what: format!("index `{index}`"),
                source: Some(error),
            },
            None => Self::Database(error),
        }
    }
}

/// The jobq index a MySQL/MariaDB error 1176 (SQLSTATE 42000) names: `Key
/// 'jobq_jobs_job_name' doesn't exist in table 'jobq_jobs'`, what a
/// statement that names the index in `FORCE INDEX` gets on a database
/// migrated by an older jobq.
fn missing_jobq_index(error: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    if db.code().as_deref() != Some("42000") {
        return None;
    }
    let (name, rest) = db.message().strip_prefix("Key '")?.split_once('\'')?;
    (name.starts_with("jobq_") && rest.starts_with(" doesn't exist in table"))
        .then(|| name.to_owned())
}

/// The jobq table a "no such table" error of any backend names: SQLite's
/// `no such table: jobq_jobs`, MySQL/MariaDB's error 1146 (SQLSTATE 42S02)
/// `Table 'app.jobq_jobs' doesn't exist`, PostgreSQL's 42P01 `relation
/// "jobq_jobs" does not exist`.
fn missing_jobq_table(error: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    let message = db.message();
    let code = db.code();
    let name = match code.as_deref() {
        Some("42S02") => message
            .strip_prefix("Table '")?
            .split('\'')
            .next()?
            .rsplit('.')
            .next()?,
        Some("42P01") => message.strip_prefix("relation \"")?.split('"').next()?,
        _ => message
            .strip_prefix("no such table: ")?
            .rsplit('.')
            .next()?,
    };
    name.starts_with("jobq_").then(|| name.to_owned())
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Self::Config(error)
    }
}

/// `none`, or `only a \`Mailer\`` / `states of type \`A\`, \`B\``.
fn given_states(given: &[String]) -> String {
    match given {
        [] => "none".to_owned(),
        [one] => format!("only a `{one}`"),
        many => format!("states of type {}", quoted_list(many)),
    }
}

/// A hint when the state given and the one taken differ by an `Arc`: a
/// `State<T>` holds its `T` in an `Arc` already.
fn state_hint(needed: &str, given: &[String]) -> String {
    let needed = jobq_core::type_name_as_written(needed);
    let inner = needed
        .strip_prefix("std::sync::Arc<")
        .and_then(|t| t.strip_suffix('>'))
        .filter(|inner| given.iter().any(|g| g == inner));
    if let Some(inner) = inner {
        return format!(
            " (a `{inner}` was given: take `State<{inner}>`, which shares it in an Arc already, or give .state(Arc::new(value)))"
        );
    }
    let arc = format!("std::sync::Arc<{needed}>");
    if given.contains(&arc) {
        return format!(
            " (a `{arc}` was given: give the `{needed}` itself, .state(value); State<T> shares it in an Arc already)"
        );
    }
    String::new()
}

/// `a`, `b`: each name in backticks, comma separated.
fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_over_the_limit_reads_as_it_always_did() {
        let error = Error::from(InvalidArgument::JobNameLength {
            name: "j".repeat(201),
            bytes: 201,
        });
        assert_eq!(
            error.to_string(),
            format!(
                "job name `{}` is 201 bytes long; it must be 1 to 200 bytes (room for a periodic job's key `cron:{{name}}:{{tick}}` in 255 characters): pin a shorter one with #[job(name = \"…\")]",
                "j".repeat(201)
            )
        );
    }

    #[test]
    fn a_config_error_is_prefixed_once_and_lists_known_queues_in_backticks() {
        let error = Error::from(ConfigError::UnknownQueue {
            queue: "mial".into(),
            known: vec!["mail".into(), "reports".into()],
        });
        assert_eq!(
            error.to_string(),
            "the worker cannot be built: queue `mial` has no registered job (queues of registered jobs: `mail`, `reports`); check the name, or use .queue_unchecked for a queue fed only by Enqueue::queue overrides"
        );
        let error = Error::from(ConfigError::QueueName(InvalidArgument::QueueLength {
            queue: String::new(),
            bytes: 0,
        }));
        assert_eq!(
            error.to_string(),
            "the worker cannot be built: queue name `` is 0 bytes long; it must be 1 to 128 bytes"
        );
    }

    #[test]
    fn max_attempts_and_key_limits_read_as_they_always_did() {
        let attempts = InvalidArgument::MaxAttempts {
            job: "j".into(),
            max_attempts: 0,
        };
        assert_eq!(
            attempts.to_string(),
            "max_attempts of job `j` is 0; it must be 1 to 2147483647"
        );
        let key = InvalidArgument::KeyLength {
            job: "j".into(),
            chars: 256,
        };
        assert_eq!(
            key.to_string(),
            "idempotency key of job `j` is 256 characters long; it must be 1 to 255 (hash a longer key)"
        );
    }
}
