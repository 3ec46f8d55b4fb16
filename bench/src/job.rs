//! The job both sides run: a no-op with a small typed payload, and the probe
//! that counts runs and records enqueue → handler-start latencies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jobq_runtime::{Backend, CompleteIn, JobContext, JobError, Jobq, State, job};
use tokio::sync::Notify;

/// The queue every workload uses (the bench has a database of its own).
pub(crate) const QUEUE: &str = "bench";
/// The stored job name.
pub(crate) const NAME: &str = "bench_noop";
/// The stored attempt limit (the default of `#[job]`).
pub(crate) const MAX_ATTEMPTS: i32 = 20;

/// Does nothing but tell the probe it ran.
#[job(name = "bench_noop", queue = "bench")]
pub(crate) async fn bench_noop(
    probe: State<Probe>,
    user_id: u64,
    account: String,
    locale: String,
    sent_at_us: u64,
) {
    let _ = (user_id, account, locale);
    probe.ran(sent_at_us);
}

impl BenchNoop {
    /// The `i`-th payload: about 80 bytes of JSON. `sent_at_us` is the wall
    /// clock at enqueue for latency runs, 0 otherwise.
    pub(crate) fn nth(i: u64, sent_at_us: u64) -> Self {
        Self::new(
            1_000_000 + i,
            format!("acct-{i:012}"),
            "en-GB".to_owned(),
            sent_at_us,
        )
    }

    /// The JSON the row stores.
    pub(crate) fn json(&self) -> String {
        serde_json::to_string(self).expect("payload serializes")
    }
}

/// What [`bench_remember`] does besides telling the probe: nothing (the
/// baseline of its rows), save a checkpoint, or complete its job in a
/// transaction of its own.
pub(crate) const REMEMBER_PLAIN: u8 = 0;
pub(crate) const REMEMBER_CHECKPOINT: u8 = 1;
pub(crate) const REMEMBER_COMPLETE_IN: u8 = 2;

/// A job that checkpoints once (`mode` [`REMEMBER_CHECKPOINT`]) or
/// completes itself in a transaction ([`REMEMBER_COMPLETE_IN`]), or neither
/// ([`REMEMBER_PLAIN`]), then tells the probe it ran.
#[job(name = "bench_remember", queue = "bench")]
pub(crate) async fn bench_remember(
    ctx: JobContext,
    probe: State<Probe>,
    jobq: State<Jobq>,
    mode: u8,
    n: u64,
) -> Result<(), JobError> {
    match mode {
        REMEMBER_CHECKPOINT => ctx.checkpoint(&n).await?,
        REMEMBER_COMPLETE_IN => {
            macro_rules! in_transaction {
                ($pool:expr) => {{
                    let mut tx = $pool.begin().await.map_err(JobError::retry)?;
                    ctx.complete_in(&mut *tx).await.map_err(JobError::retry)?;
                    tx.commit().await.map_err(JobError::retry)?;
                }};
            }
            match jobq.backend() {
                Backend::MySql => in_transaction!(jobq.mysql_pool().expect("pool")),
                Backend::Postgres => in_transaction!(jobq.pg_pool().expect("pool")),
                _ => in_transaction!(jobq.sqlite_pool().expect("pool")),
            }
        }
        _ => {}
    }
    probe.ran(0);
    Ok(())
}

/// The queue of `bench steady` (its worker serves this one only).
pub(crate) const STEADY_QUEUE: &str = "steady";

/// `bench steady`'s job: tells the probe the time it was scheduled for
/// (µs since the epoch), so the latency counts from the schedule, not from
/// the enqueue call. A warm-up job is counted but not measured.
#[job(name = "steady_noop", queue = "steady")]
pub(crate) async fn steady_noop(probe: State<Probe>, scheduled_us: u64, warmup: bool) {
    probe.ran(if warmup { 0 } else { scheduled_us });
}

/// Wall clock in µs since the epoch: comparable across processes on one machine.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// CPU time so far in ns: of this process's threads, and of the database
/// servers' (`mariadbd`, `mysqld`, `postgres` processes), from
/// `/proc/*/task/*/schedstat` (threads gone meanwhile are not counted).
pub(crate) fn cpu_ns() -> (u64, u64) {
    fn tasks(pid: &str) -> u64 {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return 0;
        };
        dir.flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }
    let mut servers = 0;
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            if matches!(comm.trim(), "mariadbd" | "mysqld" | "postgres") {
                servers += tasks(&pid);
            }
        }
    }
    (tasks("self"), servers)
}

/// Counts handler runs; wakes a waiter when `target` is reached.
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    ran: AtomicU64,
    target: AtomicU64,
    reached: Notify,
    latencies_us: Mutex<Vec<u64>>,
    /// When the first run happened (µs since the epoch), 0 before.
    first_us: AtomicU64,
}

impl Probe {
    /// A probe that signals after `target` runs.
    pub(crate) fn new(target: u64) -> Self {
        let probe = Self::default();
        probe.0.target.store(target, Ordering::SeqCst);
        probe
    }

    /// One handler run.
    pub(crate) fn ran(&self, sent_at_us: u64) {
        if sent_at_us != 0 {
            let latency = now_us().saturating_sub(sent_at_us);
            self.0
                .latencies_us
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(latency);
        }
        let ran = self.0.ran.fetch_add(1, Ordering::Relaxed) + 1;
        if ran == 1 {
            self.0.first_us.store(now_us(), Ordering::Relaxed);
        }
        if ran == self.0.target.load(Ordering::Relaxed) {
            self.0.reached.notify_one();
        }
    }

    /// When the first run happened (µs since the epoch), 0 before.
    pub(crate) fn first_us(&self) -> u64 {
        self.0.first_us.load(Ordering::Relaxed)
    }

    /// How many runs so far.
    pub(crate) fn count(&self) -> u64 {
        self.0.ran.load(Ordering::Relaxed)
    }

    /// Waits until `target` runs happened; an error after `deadline`.
    pub(crate) async fn wait(&self, deadline: Duration) -> Result<(), String> {
        let target = self.0.target.load(Ordering::Relaxed);
        tokio::time::timeout(deadline, async {
            while self.count() < target {
                self.0.reached.notified().await;
            }
        })
        .await
        .map_err(|_| {
            format!(
                "only {} of {target} jobs ran within {deadline:?}",
                self.count()
            )
        })
    }

    /// The recorded latencies in µs, sorted.
    pub(crate) fn latencies(&self) -> Vec<u64> {
        let mut l = self
            .0
            .latencies_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        l.sort_unstable();
        l
    }
}
