//! The registry: job name → how to decode and run it.
//!
//! `#[job]` submits one [`JobRegistration`] per job to [`inventory`]; a worker
//! builds a [`Registry`] from them once. Iteration order of `inventory` is
//! unspecified, so the registry is a sorted map and a duplicate name is an
//! error naming both definitions, never last-one-wins.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::{
    DispatchError, FieldSpec, Job, JobContext, JobError, RetryPolicy, StateRequirement, States,
};

/// A running attempt, boxed.
pub type JobFuture = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'static>>;

/// Decodes a payload, takes the states the handler needs, and starts the handler.
pub type RunFn = fn(JobContext, &str, &States) -> Result<JobFuture, DispatchError>;

/// Where a job was defined: named in errors about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Definition {
    /// `module_path!()` of the definition.
    pub module_path: &'static str,
    /// The fn's name.
    pub function: &'static str,
    /// `file!()`.
    pub file: &'static str,
    /// `line!()`.
    pub line: u32,
}

impl fmt::Display for Definition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}::{}` at {}:{}",
            self.module_path, self.function, self.file, self.line
        )
    }
}

/// One registered job: its settings and its type-erased entry points.
#[derive(Clone, Copy)]
pub struct JobRegistration {
    /// The stored job name.
    pub name: &'static str,
    /// Default queue.
    pub queue: &'static str,
    /// Default priority (smaller first).
    pub priority: i16,
    /// Default attempt limit.
    pub max_attempts: u32,
    /// Per-attempt timeout.
    pub timeout: Option<Duration>,
    /// The idempotency key template, as written ([`Job::KEY_TEMPLATE`]).
    pub key_template: Option<&'static str>,
    /// How long the key keeps others out, if unique by state or period ([`Job::UNIQUE`]).
    pub unique: Option<crate::Unique>,
    /// The concurrency key template, as written ([`Job::CONCURRENCY_KEY_TEMPLATE`]).
    pub concurrency_key_template: Option<&'static str>,
    /// How many jobs of one concurrency key may run at once ([`Job::CONCURRENCY`]).
    pub concurrency: u32,
    /// The tags its jobs are stored with ([`Job::TAGS`]).
    pub tags: &'static [&'static str],
    /// The payload's fields ([`Job::payload_fields`]).
    pub payload_fields: fn() -> Option<Vec<FieldSpec>>,
    /// The retry policy.
    pub retry_policy: fn() -> RetryPolicy,
    /// The `State<T>`s the handler takes.
    pub states: fn() -> Vec<StateRequirement>,
    /// Decode + run.
    pub run: RunFn,
    /// Where the job was defined.
    pub definition: Definition,
}

impl JobRegistration {
    /// The registration of job type `J`, whose handler is `run`.
    pub const fn of<J: Job>(
        run: RunFn,
        states: fn() -> Vec<StateRequirement>,
        definition: Definition,
    ) -> Self {
        Self {
            name: J::NAME,
            queue: J::QUEUE,
            priority: J::PRIORITY,
            max_attempts: J::MAX_ATTEMPTS,
            timeout: J::TIMEOUT,
            key_template: J::KEY_TEMPLATE,
            unique: J::UNIQUE,
            concurrency_key_template: J::CONCURRENCY_KEY_TEMPLATE,
            concurrency: J::CONCURRENCY,
            tags: J::TAGS,
            payload_fields: J::payload_fields,
            retry_policy: J::retry_policy,
            states,
            run,
            definition,
        }
    }
}

impl fmt::Debug for JobRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRegistration")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("priority", &self.priority)
            .field("max_attempts", &self.max_attempts)
            .field("timeout", &self.timeout)
            .field("key_template", &self.key_template)
            .field("unique", &self.unique)
            .field("concurrency_key_template", &self.concurrency_key_template)
            .field("concurrency", &self.concurrency)
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

inventory::collect!(JobRegistration);

/// A registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two jobs claim the same stored name.
    #[error(
        "job name `{name}` is registered twice: by {first} and by {second}; pin distinct names with #[job(name = \"…\")]"
    )]
    DuplicateName {
        /// The contested name.
        name: &'static str,
        /// One definition.
        first: Box<Definition>,
        /// The other.
        second: Box<Definition>,
    },
}

/// Every known job, by name, in sorted order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    jobs: BTreeMap<&'static str, &'static JobRegistration>,
}

impl Registry {
    /// The registry of every `#[job]` linked into this program.
    pub fn from_inventory() -> Result<Self, RegistryError> {
        Self::from_registrations(inventory::iter::<JobRegistration>)
    }

    /// A registry of the given registrations.
    pub fn from_registrations(
        registrations: impl IntoIterator<Item = &'static JobRegistration>,
    ) -> Result<Self, RegistryError> {
        let mut jobs: BTreeMap<&'static str, &'static JobRegistration> = BTreeMap::new();
        for registration in registrations {
            if let Some(existing) = jobs.insert(registration.name, registration) {
                let (first, second) = if existing.definition <= registration.definition {
                    (existing.definition, registration.definition)
                } else {
                    (registration.definition, existing.definition)
                };
                return Err(RegistryError::DuplicateName {
                    name: registration.name,
                    first: Box::new(first),
                    second: Box::new(second),
                });
            }
        }
        Ok(Self { jobs })
    }

    /// The job registered under `name`.
    pub fn get(&self, name: &str) -> Option<&'static JobRegistration> {
        self.jobs.get(name).copied()
    }

    /// Every registered job, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &'static JobRegistration> + '_ {
        self.jobs.values().copied()
    }

    /// How many jobs are registered.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether no job is registered.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}
