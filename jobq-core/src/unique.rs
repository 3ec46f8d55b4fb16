//! [`Unique`]: how long a job's key keeps other jobs of that key out.

use std::time::Duration;

/// How long a job's key keeps another job with the same key from being
/// enqueued, beside the plain idempotency key (taken while its row exists).
///
/// A unique job's key is taken while the job that holds it is in one of
/// the chosen states and, with a period, until that long after it was
/// enqueued; an enqueue of the key meanwhile inserts nothing and returns the
/// holder, as a duplicate idempotency key does. Once the holder has moved
/// on (finished, or its period passed), the next enqueue of the key inserts
/// a new job, which holds the key from then on. Enforced by the database:
/// concurrent enqueues of one key, from any process or Galera node, make
/// one job.
///
/// ```
/// use std::time::Duration;
/// use jobq_core::Unique;
///
/// // At most one digest per user waiting or running; a new one may be
/// // enqueued as soon as the last one finished:
/// let active = Unique::while_active();
/// assert!(active.holds_in("processing") && !active.holds_in("done"));
/// // At most one per user per hour, whatever became of it:
/// let hourly = Unique::for_period(Duration::from_secs(3600));
/// assert!(hourly.holds_in("done"));
/// // Both: one waiting or running, and none again within the hour.
/// let both = Unique::while_active().within(Duration::from_secs(3600));
/// assert_eq!(both.period(), Some(Duration::from_secs(3600)));
/// ```
///
/// A holder keeps the key only through the states it was enqueued with:
/// a job unique [`while_pending`](Self::while_pending) gives its key up
/// when it starts, and a retry that makes it `pending` again does not
/// take the key back (another job may hold it by then). An operator's
/// retry of a finished job does not check its key either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Unique {
    states: u8,
    period: Option<Duration>,
}

/// The bit of each stored status in [`Unique::state_bits`].
const PENDING: u8 = 1;
const PROCESSING: u8 = 2;
const DONE: u8 = 4;
const FAILED: u8 = 8;
const CANCELLED: u8 = 16;
const ANY: u8 = PENDING | PROCESSING | DONE | FAILED | CANCELLED;

impl Unique {
    /// Taken while the holder waits to run (`pending`, retries included
    /// until it starts): a job debounced until a worker picks it up, after
    /// which the next enqueue queues another.
    pub const fn while_pending() -> Self {
        Self {
            states: PENDING,
            period: None,
        }
    }

    /// Taken while the holder waits or runs (`pending` or `processing`,
    /// through its retries): at most one of the key at a time, and the
    /// next may be enqueued once it is done, failed or cancelled.
    pub const fn while_active() -> Self {
        Self {
            states: PENDING | PROCESSING,
            period: None,
        }
    }

    /// Taken while the holder waits, runs or has failed for good: after a
    /// failure the key stays taken until the job is retried to success or
    /// cancelled (or pruned), so a failing job is not silently replaced.
    pub const fn while_active_or_failed() -> Self {
        Self {
            states: PENDING | PROCESSING | FAILED,
            period: None,
        }
    }

    /// Taken for `period` after the holder was enqueued, in any state: at
    /// most one job of the key per period (the period runs from each
    /// holder's enqueue, not from fixed clock windows).
    pub const fn for_period(period: Duration) -> Self {
        Self {
            states: ANY,
            period: Some(period),
        }
    }

    /// The same states, and for at most `period` after the holder was
    /// enqueued.
    pub const fn within(self, period: Duration) -> Self {
        Self {
            states: self.states,
            period: Some(period),
        }
    }

    /// How long after its enqueue a holder keeps the key at most, if limited.
    pub const fn period(&self) -> Option<Duration> {
        self.period
    }

    /// Whether a holder in `status` (as stored: `pending`, `processing`,
    /// `done`, `failed`, `cancelled`) keeps the key, its period aside.
    pub fn holds_in(&self, status: &str) -> bool {
        self.states & Self::state_bit(status) != 0
    }

    /// The states as stored with the holder: one bit per status (see
    /// [`state_bit`](Self::state_bit)).
    #[doc(hidden)]
    pub const fn state_bits(&self) -> u8 {
        self.states
    }

    /// The rules whose [`state_bits`](Self::state_bits) are `states` (only
    /// the bits of stored statuses kept; `pending` always, which every new
    /// job is in) and whose period is `period`: as a worker publishes them.
    #[doc(hidden)]
    pub const fn from_parts(states: u8, period: Option<Duration>) -> Self {
        Self {
            states: (states & ANY) | PENDING,
            period,
        }
    }

    /// The bit of a stored status in [`state_bits`](Self::state_bits)
    /// (`0` for a status jobq does not store): pending 1, processing 2,
    /// done 4, failed 8, cancelled 16; `blocked` (waiting behind its
    /// concurrency key) is pending. Each backend computes the same numbers
    /// in SQL.
    #[doc(hidden)]
    pub fn state_bit(status: &str) -> u8 {
        match status {
            "pending" | "blocked" => PENDING,
            "processing" => PROCESSING,
            "done" => DONE,
            "failed" => FAILED,
            "cancelled" => CANCELLED,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_constructor_holds_in_its_states_only() {
        let all = ["pending", "processing", "done", "failed", "cancelled"];
        let held = |u: Unique| -> Vec<&str> { all.into_iter().filter(|s| u.holds_in(s)).collect() };
        assert_eq!(held(Unique::while_pending()), ["pending"]);
        assert_eq!(held(Unique::while_active()), ["pending", "processing"]);
        assert_eq!(
            held(Unique::while_active_or_failed()),
            ["pending", "processing", "failed"]
        );
        assert_eq!(held(Unique::for_period(Duration::from_secs(1))), all);
        assert!(!Unique::for_period(Duration::from_secs(1)).holds_in("unknown"));
    }

    #[test]
    fn within_keeps_the_states_and_sets_the_period() {
        let u = Unique::while_active().within(Duration::from_secs(60));
        assert_eq!(u.state_bits(), Unique::while_active().state_bits());
        assert_eq!(u.period(), Some(Duration::from_secs(60)));
        assert_eq!(Unique::while_active().period(), None);
    }
}
