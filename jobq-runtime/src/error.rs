//! The runtime's error type.

use jobq_core::RegistryError;

/// Everything that can go wrong in a jobq call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database returned an error or could not be reached.
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// A payload could not be serialized to JSON.
    #[error("payload of job `{job}` could not be serialized to JSON")]
    Serialize {
        /// The job name.
        job: String,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
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
    /// An argument is out of range or malformed; the message says which and what is allowed.
    #[error("{0}")]
    Invalid(String),
    /// The job registry is inconsistent (two jobs share a name).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A worker could not be built; the message says what is missing.
    #[error("the worker cannot be built: {0}")]
    Config(String),
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
    /// A connection of one backend was given to a `Jobq` of another.
    #[error("this Jobq stores jobs in {expected}, but the connection given is {given}")]
    BackendMismatch {
        /// The handle's backend.
        expected: &'static str,
        /// The connection's backend.
        given: &'static str,
    },
}

/// `Result<T, jobq_runtime::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }
}
