//! `Worker::builder(jobq)…build()`.

use std::collections::BTreeSet;
use std::time::Duration;

use jobq_core::{Registry, States};

use super::{QueueSpec, Settings, Worker};
use crate::handle::validate_queue;
use crate::{Error, Jobq, Result};

/// Builds a [`Worker`]; see [`Worker::builder`].
#[derive(Debug)]
#[must_use]
pub struct WorkerBuilder {
    jobq: Jobq,
    queues: Vec<QueueSpec>,
    states: States,
    settings: Settings,
    worker_id: Option<String>,
}

impl WorkerBuilder {
    pub(super) fn new(jobq: Jobq) -> Self {
        Self {
            jobq,
            queues: Vec::new(),
            states: States::default(),
            settings: Settings::default(),
            worker_id: None,
        }
    }

    /// Serves `queue` with at most `concurrency` jobs running at once.
    /// `build` fails if no registered job has this queue as its default.
    pub fn queue(mut self, queue: impl Into<String>, concurrency: usize) -> Self {
        self.queues.push(QueueSpec {
            name: queue.into(),
            concurrency,
            checked: true,
        });
        self
    }

    /// Serves `queue` without checking that a registered job defaults to it:
    /// for queues that only receive jobs enqueued with [`Enqueue::queue`](crate::Enqueue::queue).
    pub fn queue_unchecked(mut self, queue: impl Into<String>, concurrency: usize) -> Self {
        self.queues.push(QueueSpec {
            name: queue.into(),
            concurrency,
            checked: false,
        });
        self
    }

    /// A value handed to handlers that take `State<T>`.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// How long a claim holds a job before another worker may take it over
    /// (default 30 s). Heartbeats renew it while the job runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// How often the leases of running jobs are renewed (default: a third of the lease).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.settings.heartbeat = Some(interval);
        self
    }

    /// Turns heartbeats off (for tests of lease expiry).
    #[doc(hidden)]
    pub fn disable_heartbeats(mut self) -> Self {
        self.settings.heartbeats_enabled = false;
        self
    }

    /// How often an idle queue is polled when no in-process enqueue wakes it (default 500 ms).
    ///
    /// Polling adapts: after a claim that found jobs the next poll comes after
    /// 1/32 of this interval, and the wait doubles after each claim that finds
    /// nothing, back to this interval after five.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.settings.poll = interval;
        self
    }

    /// How often expired leases are looked for (default: a sixth of the lease, jittered ±20 %).
    pub fn reap_interval(mut self, interval: Duration) -> Self {
        self.settings.reap = Some(interval);
        self
    }

    /// How long [`Worker::run_until`] lets running jobs finish after the signal (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.settings.shutdown_timeout = timeout;
        self
    }

    /// The id written to `claimed_by` (default `host:pid:random`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }

    /// Checks the configuration against the job registry and builds the worker.
    ///
    /// Fails when no queue is served, a concurrency is 0, a queue is served
    /// twice, a checked queue has no registered job, a registered job of a
    /// served queue needs a `State<T>` that was not given, or two jobs share a name.
    pub fn build(self) -> Result<Worker> {
        let registry = Registry::from_inventory()?;
        if self.queues.is_empty() {
            return Err(Error::Config(
                "it serves no queue; add one with .queue(name, concurrency)".into(),
            ));
        }
        let mut seen = BTreeSet::new();
        for spec in &self.queues {
            validate_queue(&spec.name).map_err(|e| Error::Config(e.to_string()))?;
            if spec.concurrency == 0 {
                return Err(Error::Config(format!(
                    "queue `{}` has concurrency 0; it must be at least 1",
                    spec.name
                )));
            }
            if !seen.insert(spec.name.as_str()) {
                return Err(Error::Config(format!(
                    "queue `{}` is served twice; give it one .queue(…) with the total concurrency",
                    spec.name
                )));
            }
            if spec.checked && !registry.iter().any(|r| r.queue == spec.name) {
                let known: BTreeSet<&str> = registry.iter().map(|r| r.queue).collect();
                return Err(Error::Config(format!(
                    "queue `{}` has no registered job (queues of registered jobs: {}); check the name, or use .queue_unchecked for a queue fed only by Enqueue::queue overrides",
                    spec.name,
                    known
                        .into_iter()
                        .map(|q| format!("`{q}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        for registration in registry.iter().filter(|r| seen.contains(r.queue)) {
            for requirement in (registration.states)() {
                if !self.states.contains(&requirement) {
                    return Err(Error::Config(format!(
                        "job `{}` ({}) takes `State<{}>`, but the worker was given none; add .state(value)",
                        registration.name, registration.definition, requirement.type_name
                    )));
                }
            }
        }
        let settings = self.settings;
        if settings.lease < Duration::from_millis(100) {
            return Err(Error::Config("the lease must be at least 100 ms".into()));
        }
        if settings.heartbeat_interval() >= settings.lease {
            return Err(Error::Config(format!(
                "the heartbeat interval ({:?}) must be shorter than the lease ({:?})",
                settings.heartbeat_interval(),
                settings.lease
            )));
        }
        let worker_id = self.worker_id.unwrap_or_else(default_worker_id);
        Ok(Worker::new(
            self.jobq,
            self.queues,
            registry,
            self.states,
            settings,
            worker_id,
        ))
    }
}

fn default_worker_id() -> String {
    format!(
        "{}:{}:{:04x}",
        gethostname::gethostname().to_string_lossy(),
        std::process::id(),
        rand::random::<u16>()
    )
}
