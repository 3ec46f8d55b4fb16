//! In-process wake-ups: an enqueue in this process wakes this process's
//! claim loops for that queue at once instead of at their next poll.
//!
//! Keyed by queue name only, process-wide: two `Jobq` handles on different
//! databases that share a queue name wake each other spuriously, which costs
//! one empty claim and is never wrong.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The name under which a change of queue controls (a pause, a limit, a
/// rate) or a cancel of a running job is announced, to every worker
/// process: no queue has it (a queue name is at least one byte). Workers
/// then read the controls and renew their leases (which finds a cancelled
/// job) at once instead of at their next poll or heartbeat.
pub(crate) const CONTROL: &str = "";

fn table() -> &'static Mutex<HashMap<String, Arc<Notify>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The notifier for `queue` (created on first use).
pub(crate) fn subscribe(queue: &str) -> Arc<Notify> {
    let mut table = table()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Arc::clone(table.entry(queue.to_owned()).or_default())
}

/// Wakes every claim loop of this process waiting on `queue`.
pub(crate) fn notify(queue: &str) {
    let notify = {
        let table = table()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        table.get(queue).cloned()
    };
    if let Some(notify) = notify {
        notify.notify_waiters();
    }
}

/// Whether this process's claim loops of one queue are waiting for jobs,
/// for a waiter that watches the database on their behalf (MySQL's, see
/// `store::mysql::wake`): it asks about a queue only while one of its
/// loops waits, so a process busy with its backlog sends the waiter's
/// statement nothing.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// Claim loops of the queue waiting for a wake-up or their next poll.
    idle: AtomicUsize,
    /// Claims the queue's loops have started: a waiter reports a queue's
    /// due jobs once per claim, not again while the claim it asked for is
    /// still to come.
    claims: AtomicU64,
    /// When the earliest job this process sent back to `pending` for later
    /// (a retry, a snooze) comes due: the loops claim then, whatever the
    /// watcher's next look.
    due: Mutex<Option<tokio::time::Instant>>,
    /// Told when `due` moves earlier.
    hinted: Notify,
}

impl Waiting {
    /// Whether a loop of the queue waits.
    pub(crate) fn idle(&self) -> bool {
        self.idle.load(Ordering::Acquire) > 0
    }

    /// Claims started so far.
    pub(crate) fn claims(&self) -> u64 {
        self.claims.load(Ordering::Acquire)
    }

    /// A loop of the queue starts a claim: a job due by now is its to find.
    pub(crate) fn claiming(&self) {
        self.claims.fetch_add(1, Ordering::AcqRel);
        let mut due = self
            .due
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if due.is_some_and(|at| at <= tokio::time::Instant::now()) {
            *due = None;
        }
    }

    /// A job of the queue this process sent back comes due at `at`.
    pub(crate) fn due_at(&self, at: tokio::time::Instant) {
        let mut due = self
            .due
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if due.is_none_or(|known| at < known) {
            *due = Some(at);
            self.hinted.notify_waiters();
        }
    }

    /// When the earliest job this process sent back comes due, if one is
    /// still to be claimed.
    pub(crate) fn next_due(&self) -> Option<tokio::time::Instant> {
        *self
            .due
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Completes when [`Waiting::due_at`] moves the due time earlier.
    pub(crate) fn hinted(&self) -> tokio::sync::futures::Notified<'_> {
        self.hinted.notified()
    }

    /// A loop of the queue waits until the guard drops.
    pub(crate) fn wait(self: &Arc<Self>) -> IdleGuard {
        if self.idle.fetch_add(1, Ordering::AcqRel) == 0 {
            became_idle().notify_waiters();
        }
        IdleGuard(Arc::clone(self))
    }
}

/// A claim loop waiting (see [`Waiting::wait`]).
#[derive(Debug)]
pub(crate) struct IdleGuard(Arc<Waiting>);

impl Drop for IdleGuard {
    fn drop(&mut self) {
        self.0.idle.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The waiting state of `queue`'s claim loops in this process.
pub(crate) fn waiting(queue: &str) -> Arc<Waiting> {
    static TABLE: OnceLock<Mutex<HashMap<String, Arc<Waiting>>>> = OnceLock::new();
    let mut table = TABLE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Arc::clone(table.entry(queue.to_owned()).or_default())
}

/// Notified whenever a claim loop of any queue starts waiting.
pub(crate) fn became_idle() -> &'static Notify {
    static IDLE: Notify = Notify::const_new();
    &IDLE
}

/// How often a watcher looks (MySQL's waiter sleeps at most this long in
/// one statement; PostgreSQL's and SQLite's look this often): a reap
/// interval shorter than this is kept as configured. An idle worker
/// process's statements are this one per 1.25 s (0.8/s), its presence's
/// refresh every 10 s (0.1/s) and, on MySQL/MariaDB, the controls'
/// waiter's (one a minute) and the waiters' rows' refreshes (two a
/// minute): under one a second in all, where a look every second made
/// them 1.1–1.2.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(1250);

/// A poll interval at least this long is left to the watcher while it
/// watches (the loops then poll only as a safety net); a shorter one is
/// kept as configured, its polls finding jobs sooner than the watcher
/// would.
pub(crate) const POLL_WATCHED_FROM: Duration = Duration::from_millis(500);

/// How recent a watcher's comparison of the controls must be for the
/// pause loop to trust it (a watcher compares them at each look while it
/// watches).
pub(crate) const WATCH_FRESH: std::time::Duration = std::time::Duration::from_secs(3);

/// What a worker's database watcher covers for it (see
/// `Store::listen`), so that an idle worker need not poll: while
/// [`Watch::jobs`] holds, a statement of the watcher's asks the database
/// every [`WATCH_EVERY`] which of the worker's queues have a job due
/// (scheduled, retried, reaped or enqueued, by any process) and wakes
/// their claim loops, which then poll only as a safety net, and tells
/// the reaper when it sees an expired lease (which then reaps only then,
/// or as a safety net, while every queue is covered); while
/// [`Watch::controls_fresh`] holds, the watcher has compared the queue
/// controls with its last look moments ago and woken the worker's pause
/// loop on any change ([`CONTROL`]), which then reads them only as a
/// safety net. Per worker: two workers of a process on different
/// databases are watched apart.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Watchers that cover the worker's queues now.
    jobs: AtomicUsize,
    /// When a watcher last compared the controls.
    controls_seen: Mutex<Option<std::time::Instant>>,
    /// Told when a watcher saw a lease of the worker's queues expired.
    expired: Notify,
    /// Reads of the controls the worker's pause loop began (a count).
    reads_begun: AtomicU64,
    /// The last read of the controls the pause loop finished and published.
    reads_done: tokio::sync::watch::Sender<u64>,
}

impl Watch {
    /// Whether a watcher covers the worker's queues' due jobs now.
    pub(crate) fn jobs(&self) -> bool {
        self.jobs.load(Ordering::Acquire) > 0
    }

    /// A watcher covers `queues`' due jobs until the guard drops; then
    /// their claim loops are woken, to poll again.
    pub(crate) fn cover<'a>(&'a self, queues: &'a [String]) -> Covered<'a> {
        self.jobs.fetch_add(1, Ordering::AcqRel);
        Covered {
            watch: self,
            queues,
        }
    }

    /// A watcher compared the controls just now (and woke the pause loop
    /// if they changed).
    pub(crate) fn controls_compared(&self) {
        *self
            .controls_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
    }

    /// A watcher saw an expired lease in a queue it covers: the reaper
    /// runs now.
    pub(crate) fn lease_expired(&self) {
        self.expired.notify_one();
    }

    /// Completes once a watcher saw an expired lease (at once if one did
    /// since the last time).
    pub(crate) async fn expired(&self) {
        self.expired.notified().await;
    }

    /// The pause loop begins a read of the controls: its ticket, for
    /// [`Watch::controls_read`] once its result is published.
    pub(crate) fn controls_reading(&self) -> u64 {
        self.reads_begun.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The pause loop published what its read `ticket` found.
    pub(crate) fn controls_read(&self, ticket: u64) {
        self.reads_done.send_if_modified(|done| {
            let later = ticket > *done;
            if later {
                *done = ticket;
            }
            later
        });
    }

    /// Wakes the pause loop ([`CONTROL`]) and waits until it has published
    /// a read of the controls begun after this call, at most `within`
    /// (`false` if none came): a watcher that saw the controls change and
    /// a job due in one look lets the claim loops go only after the pause
    /// loop knows the new controls (else a claim could run ahead of a
    /// pause).
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) async fn read_controls_now(&self, within: Duration) -> bool {
        let after = self.reads_begun.load(Ordering::Acquire);
        let mut done = self.reads_done.subscribe();
        notify(CONTROL);
        tokio::time::timeout(within, done.wait_for(|&done| done > after))
            .await
            .is_ok_and(|read| read.is_ok())
    }

    /// Whether a watcher compared the controls within `within`.
    pub(crate) fn controls_fresh(&self, within: std::time::Duration) -> bool {
        self.controls_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() <= within)
    }
}

/// A watcher's cover of a worker's queues (see [`Watch::cover`]).
#[derive(Debug)]
pub(crate) struct Covered<'a> {
    watch: &'a Watch,
    queues: &'a [String],
}

impl Drop for Covered<'_> {
    fn drop(&mut self) {
        self.watch.jobs.fetch_sub(1, Ordering::AcqRel);
        for queue in self.queues {
            notify(queue);
        }
    }
}

/// How long a watcher waits for a claim after reporting a queue's due
/// jobs before it reports them again (a wake-up its loops missed never
/// stalls the queue).
const REPORT_AGAIN: Duration = Duration::from_secs(5);

/// A watcher's view of its queues' claim loops: which queues to look at
/// now, and the due ones it reported (see [`Watch`]).
#[derive(Debug)]
pub(crate) struct Lookout<'a> {
    states: Vec<(&'a String, Arc<Waiting>)>,
    /// Per queue, the loops' claim count when it was last reported due,
    /// and when.
    reported: HashMap<&'a str, (u64, Instant)>,
}

impl<'a> Lookout<'a> {
    /// A view of `queues`; every loop of theirs claims once now (jobs may
    /// have come while no watcher looked).
    pub(crate) fn new(queues: &'a [String]) -> Self {
        for queue in queues {
            notify(queue);
        }
        Self {
            states: queues.iter().map(|q| (q, waiting(q))).collect(),
            reported: HashMap::new(),
        }
    }

    /// The queues to look at: those with a loop waiting for jobs, unless
    /// reported due since its last claim (and less than [`REPORT_AGAIN`]
    /// ago).
    pub(crate) fn queues(&self) -> Vec<String> {
        self.states
            .iter()
            .filter(|(q, state)| {
                state.idle()
                    && self.reported.get(q.as_str()).is_none_or(|&(claims, at)| {
                        claims != state.claims() || at.elapsed() >= REPORT_AGAIN
                    })
            })
            .map(|(q, _)| (*q).clone())
            .collect()
    }

    /// `queue` has a due job: wakes its loops.
    pub(crate) fn due(&mut self, queue: &str) {
        if let Some((name, state)) = self.states.iter().find(|(q, _)| **q == queue) {
            self.reported
                .insert(name.as_str(), (state.claims(), Instant::now()));
            notify(name);
        }
    }
}
