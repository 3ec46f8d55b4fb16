//! The `Job` trait: a typed payload bound to a registered handler.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{FieldSpec, RetryPolicy, Unique};

/// The queue a job goes to when it names none.
pub const DEFAULT_QUEUE: &str = "default";
/// How many attempts a job gets when it sets no `max_attempts`.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 20;
/// The largest per-key limit a job may set ([`Job::CONCURRENCY`]); a larger
/// one is refused (by `#[job]` at compile time).
pub const MAX_KEY_CONCURRENCY: u32 = 10_000;
/// The most tags one job carries (its type's and its enqueue's together).
pub const MAX_TAGS: usize = 16;
/// The longest tag, in bytes (a tag is also never empty).
pub const MAX_TAG_LEN: usize = 100;
/// The most bytes of JSON one job's metadata may take.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;

/// A job's typed payload and its settings.
///
/// `#[job]` implements this for the payload struct it generates; implement it
/// by hand only together with a [`JobRegistration`](crate::JobRegistration).
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The name stored in each row; the registry key of the handler.
    ///
    /// It is part of the storage contract: queued rows find their handler by it.
    const NAME: &'static str;
    /// The queue jobs of this type go to unless enqueued elsewhere.
    const QUEUE: &'static str = DEFAULT_QUEUE;
    /// Smaller runs first.
    const PRIORITY: i16 = 0;
    /// Attempts before the job is marked `failed`.
    const MAX_ATTEMPTS: u32 = DEFAULT_MAX_ATTEMPTS;
    /// How long one attempt may run; `None` lets it run as long as its lease is renewed.
    const TIMEOUT: Option<Duration> = None;

    /// The idempotency key template of `#[job(key = "…")]` as written
    /// (`"welcome:{user_id}"`), published so that tools enqueueing by name
    /// can compute the same key; `None` when the job has none.
    const KEY_TEMPLATE: Option<&'static str> = None;

    /// How long the job's key keeps other jobs of that key out, when it is
    /// unique by state or period (`#[job(unique = "…", unique_for = "…")]`);
    /// `None`: the key is a plain idempotency key, taken while its row exists.
    const UNIQUE: Option<Unique> = None;

    /// The concurrency key template of `#[job(concurrency_key = "…")]` as
    /// written (`"sync:{customer_id}"`), published like
    /// [`KEY_TEMPLATE`](Self::KEY_TEMPLATE); `None` when the job has none.
    const CONCURRENCY_KEY_TEMPLATE: Option<&'static str> = None;

    /// At most this many jobs of one concurrency key run at once
    /// (`#[job(concurrency = N)]`, 1 to [`MAX_KEY_CONCURRENCY`]); only
    /// meaningful with a [`concurrency_key`](Self::concurrency_key).
    const CONCURRENCY: u32 = 1;

    /// Tags every job of this type is stored with (`#[job(tags = ["…"])]`),
    /// beside those its enqueue adds ([`MAX_TAGS`](crate::MAX_TAGS) in all).
    const TAGS: &'static [&'static str] = &[];

    /// The payload's fields, published so that tools enqueueing by name
    /// can check a JSON payload; `None` when unknown (a hand-written `Job`).
    fn payload_fields() -> Option<Vec<FieldSpec>> {
        None
    }

    /// When a failed attempt runs again.
    fn retry_policy() -> RetryPolicy {
        RetryPolicy::DEFAULT
    }

    /// The idempotency key of this job, if its type defines one: enqueueing a
    /// job whose key already exists returns the existing job.
    fn idempotency_key(&self) -> Option<String> {
        None
    }

    /// The concurrency key of this job, if its type defines one: jobs of one
    /// key start in enqueue order, at most [`CONCURRENCY`](Self::CONCURRENCY)
    /// at a time, and a job waiting behind its key's running jobs is `blocked`.
    fn concurrency_key(&self) -> Option<String> {
        None
    }
}

/// The type of a job's output: what its `#[job]` fn returns on success
/// (`T` of a `Result<T, E>`, a bare `T`, or `()` for none), as
/// `Jobq::output` reads it back. `#[job]` implements it; a fn returning
/// `impl Trait` has `serde_json::Value` here.
pub trait JobOutput {
    /// The output's type.
    type Output;
}
