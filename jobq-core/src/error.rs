//! What a handler's failure asks jobq to do next.

use std::any::Any;
use std::fmt;
use std::time::Duration;

/// How jobq treats a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobErrorKind {
    /// Retry after the delay the job's [`RetryPolicy`](crate::RetryPolicy) gives; uses up an attempt.
    Retry,
    /// Retry after exactly this delay; uses up an attempt.
    RetryIn(Duration),
    /// Do not retry: the job goes straight to `failed`.
    Permanent,
    /// Run again after this delay without using up an attempt.
    Snooze(Duration),
}

/// The error a job handler returns to steer what happens next.
///
/// Any `Result<(), E>` with `E: Display` is accepted from a `#[job]` fn and
/// becomes [`JobError::retry`]; return a `JobError` to choose explicitly.
///
/// ```
/// use std::time::Duration;
/// use jobq_core::{JobError, JobErrorKind};
///
/// let e = JobError::retry_in(Duration::from_secs(30), "rate limited");
/// assert_eq!(e.kind(), JobErrorKind::RetryIn(Duration::from_secs(30)));
/// assert_eq!(e.to_string(), "rate limited");
/// assert_eq!(JobError::permanent("no such user").kind(), JobErrorKind::Permanent);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    kind: JobErrorKind,
    message: String,
    ended: AttemptEnd,
}

/// How an attempt that did not succeed ended, as the job's attempt history
/// records it ([`JobError::ended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptEnd {
    /// The handler (or a layer) returned an error.
    Error,
    /// The handler panicked (the message says what it said and where).
    Panic,
    /// The attempt ran past the job's timeout.
    Timeout,
    /// The handler snoozed the job ([`JobError::snooze`]).
    Snooze,
}

impl AttemptEnd {
    /// Its name as stored in the attempt history: `error`, `panic`,
    /// `timeout` or `snooze`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Panic => "panic",
            Self::Timeout => "timeout",
            Self::Snooze => "snooze",
        }
    }
}

impl JobError {
    /// A failed attempt, retried on the job's retry schedule (the default).
    pub fn retry(message: impl fmt::Display) -> Self {
        Self::new(JobErrorKind::Retry, message)
    }

    /// A failed attempt, retried after exactly `delay`.
    pub fn retry_in(delay: Duration, message: impl fmt::Display) -> Self {
        Self::new(JobErrorKind::RetryIn(delay), message)
    }

    /// A failure that retrying cannot fix: the job is marked `failed` at once.
    pub fn permanent(message: impl fmt::Display) -> Self {
        Self::new(JobErrorKind::Permanent, message)
    }

    /// Not a failure: run the job again after `delay`, without using up an attempt.
    pub fn snooze(delay: Duration) -> Self {
        Self::new(
            JobErrorKind::Snooze(delay),
            format_args!("snoozed for {delay:?}"),
        )
    }

    /// A handler's panic, retried on the job's retry schedule: `message`
    /// says what it said (and where, when known).
    pub fn panicked(message: impl fmt::Display) -> Self {
        Self {
            ended: AttemptEnd::Panic,
            ..Self::retry(message)
        }
    }

    /// An attempt stopped at the job's timeout `limit`, retried on the
    /// job's retry schedule.
    pub fn timed_out(limit: Duration) -> Self {
        Self {
            ended: AttemptEnd::Timeout,
            ..Self::retry(format_args!("attempt timed out after {limit:?}"))
        }
    }

    fn new(kind: JobErrorKind, message: impl fmt::Display) -> Self {
        let ended = match kind {
            JobErrorKind::Snooze(_) => AttemptEnd::Snooze,
            _ => AttemptEnd::Error,
        };
        Self {
            kind,
            message: message.to_string(),
            ended,
        }
    }

    /// How the attempt ended, as its history records it.
    pub fn ended(&self) -> AttemptEnd {
        self.ended
    }

    /// What jobq does with this failure.
    pub fn kind(&self) -> JobErrorKind {
        self.kind
    }

    /// The message stored as the job's `last_error`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Turns any displayable error into a `JobError`; a `JobError` passes through unchanged.
    ///
    /// The alternate form (`{:#}`) is used, so error types that print their
    /// cause chain that way (such as `anyhow::Error`) keep it.
    pub fn from_display<E: fmt::Display + 'static>(error: E) -> Self {
        let mut slot = Some(error);
        if let Some(job_error) = (&mut slot as &mut dyn Any).downcast_mut::<Option<JobError>>() {
            if let Some(job_error) = job_error.take() {
                return job_error;
            }
        }
        match slot {
            Some(error) => Self::retry(format_args!("{error:#}")),
            None => Self::retry("error"),
        }
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}

/// Converts what a `#[job]` fn returns into the outcome of the attempt and
/// its output.
///
/// Implemented for `()` and for `Result<T, E>` with `T: Serialize` (the
/// job's output, stored with it when the attempt succeeds; `()` stores
/// nothing) and `E: Display + 'static`. A `#[job]` fn may also return a
/// bare `T: Serialize`, which `#[job]` wraps in `Ok`.
pub trait IntoJobResult {
    /// What a successful attempt leaves as the job's output.
    type Output: serde::Serialize;

    /// The outcome of the attempt.
    fn into_job_result(self) -> Result<Self::Output, JobError>;
}

impl IntoJobResult for () {
    type Output = ();

    fn into_job_result(self) -> Result<(), JobError> {
        Ok(())
    }
}

impl<T: serde::Serialize, E: fmt::Display + 'static> IntoJobResult for Result<T, E> {
    type Output = T;

    fn into_job_result(self) -> Result<T, JobError> {
        self.map_err(JobError::from_display)
    }
}

/// The most bytes of JSON a job's output may take; a larger one fails the
/// attempt with a message that says so (store large results elsewhere and
/// return a reference to them).
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;

/// Keeps `value` (what a `#[job]` fn returned) on its attempt's context as
/// JSON, for the worker to store with the job when the attempt succeeds;
/// a value that serializes to `null` (`()`, `None`) stores nothing. An
/// error fails the attempt: the value does not serialize, or it is over
/// [`MAX_OUTPUT_BYTES`].
#[doc(hidden)]
pub fn keep_output<T: serde::Serialize>(
    ctx: &crate::JobContext,
    value: &T,
) -> Result<(), JobError> {
    if let Some(json) = output_json(value)? {
        ctx.put_output(json);
    }
    Ok(())
}

/// `value` as a job's output: its JSON, `None` for `null` (nothing to
/// store); an error when it does not serialize or is over
/// [`MAX_OUTPUT_BYTES`].
#[doc(hidden)]
pub fn output_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Option<String>, JobError> {
    if std::mem::size_of_val(value) == 0 {
        return Ok(None);
    }
    let json = serde_json::to_string(value).map_err(|error| {
        JobError::retry(format_args!(
            "the job's output does not serialize to JSON: {error}"
        ))
    })?;
    if json == "null" {
        return Ok(None);
    }
    if json.len() > MAX_OUTPUT_BYTES {
        return Err(JobError::retry(format_args!(
            "the job's output is {} bytes of JSON, over the cap of {MAX_OUTPUT_BYTES} bytes \
             (jobq_runtime::MAX_OUTPUT_BYTES): return less, or store it elsewhere and return a reference to it",
            json.len()
        )));
    }
    Ok(Some(json))
}

/// Why a stored job could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// The payload is not JSON of the job's payload type (a changed struct, a bad row).
    #[error("payload of job `{job}` does not deserialize into its payload type")]
    Payload {
        /// The job name.
        job: &'static str,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// The handler takes a `State<T>` that the worker was not given.
    #[error("job `{job}` needs `State<{}>`, which the worker was not given", crate::type_name_as_written(.type_name))]
    MissingState {
        /// The job name.
        job: &'static str,
        /// The missing state's type.
        type_name: &'static str,
    },
}

/// Renders an error and its `source()` chain as `outer: inner: innermost`,
/// so that the cause shows (a database error's is the server's refusal
/// further down). A source whose message the text already ends with is
/// skipped: an error that prints its source too (sqlx repeats the server's
/// message) shows it once.
///
/// ```
/// use std::fmt;
///
/// #[derive(Debug)]
/// struct Outer(std::io::Error);
/// impl fmt::Display for Outer {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         write!(f, "writing the report failed: {}", self.0)
///     }
/// }
/// impl std::error::Error for Outer {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let error = Outer(std::io::Error::other("disk full"));
/// assert_eq!(jobq_core::error_chain(&error), "writing the report failed: disk full");
/// ```
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.ends_with(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_error_passes_through_from_display_unchanged() {
        let original = JobError::snooze(Duration::from_secs(5));
        assert_eq!(JobError::from_display(original.clone()), original);
    }

    #[test]
    fn any_display_error_becomes_a_retry() {
        let e = JobError::from_display("smtp timeout");
        assert_eq!(e.kind(), JobErrorKind::Retry);
        assert_eq!(e.message(), "smtp timeout");
        let r: Result<(), std::io::Error> = Err(std::io::Error::other("disk full"));
        assert_eq!(r.into_job_result().unwrap_err().message(), "disk full");
    }

    /// Each source is appended once; one that its outer error already
    /// printed at its end is not repeated.
    #[test]
    fn an_error_chain_shows_each_cause_once() {
        #[derive(Debug)]
        struct Wrap(&'static str, Option<Box<Wrap>>);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|w| w as _)
            }
        }
        let inner = Wrap("1045: access denied", None);
        let repeats = Wrap("database error: 1045: access denied", Some(Box::new(inner)));
        assert_eq!(error_chain(&repeats), "database error: 1045: access denied");
        let three = Wrap(
            "outer",
            Some(Box::new(Wrap(
                "middle",
                Some(Box::new(Wrap("inner", None))),
            ))),
        );
        assert_eq!(error_chain(&three), "outer: middle: inner");
    }

    #[test]
    fn a_dispatch_error_chain_names_the_job_and_the_serde_error() {
        let source = serde_json::from_str::<u32>("\"x\"").unwrap_err();
        let e = DispatchError::Payload {
            job: "send",
            source,
        };
        let chain = error_chain(&e);
        assert!(
            chain.starts_with("payload of job `send` does not deserialize"),
            "{chain}"
        );
        assert!(chain.contains("invalid type"), "{chain}");
    }
}
