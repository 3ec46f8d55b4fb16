//! The database-free core of [jobq](https://docs.rs/jobq-runtime): what a job
//! *is*, independent of where it is stored and how it is run.
//!
//! - [`Job`]: a typed, serde-able payload with its settings (name, queue,
//!   priority, attempts, timeout, retry policy, idempotency key). `#[job]`
//!   generates the payload struct and this impl from an `async fn`.
//! - [`JobRegistration`] and [`Registry`]: the handler behind each name,
//!   submitted through `inventory` and built once into a sorted map.
//! - [`JobContext`]: what a running attempt knows (id, attempt, idempotency
//!   key, cancellation, lease extension); [`State`]: values injected from the worker.
//! - [`JobError`]: retry (default), `retry_in`, `permanent`, `snooze`;
//!   [`RetryPolicy`]: when a failed job runs again (see [`retry`] for the formula).
//!
//! Users depend on `jobq-runtime`, which re-exports all of this.

mod context;
mod error;
mod job;
mod registry;
pub mod retry;
mod state;

pub use context::{ExtendFuture, JobContext, JobMeta, LeaseError, LeaseExtender};
pub use error::{DispatchError, IntoJobResult, JobError, JobErrorKind, error_chain};
pub use job::{DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, Job};
pub use registry::{Definition, JobFuture, JobRegistration, Registry, RegistryError, RunFn};
pub use retry::RetryPolicy;
pub use state::{State, StateRequirement, States};

#[doc(hidden)]
pub use inventory;
