//! Test-only fault injection at the worker's await points: a panic, or the
//! enclosing task's future dropped there. Compiled always; when nothing is
//! armed a point costs one relaxed atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// A point between a claim and its settle where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Point {
    /// In the claim loop, just after a claim's rows are registered as held.
    Claimed,
    /// In the claim loop, at the start of a turn, just after it read its
    /// queue's controls (paused, limited, rated). Takes [`Action::Stall`].
    ControlsRead,
    /// In the claim loop, while claimed jobs wait in its buffer for a slot.
    Buffered,
    /// In a job's task, before its payload is decoded and its handler run.
    BeforeExecute,
    /// In a job's task, in the decode of its payload (before the handler is built).
    Decode,
    /// In a job's task, after the attempt ended, before its outcome is settled.
    BeforeSettle,
    /// In a job's task, before a success is handed to the completer.
    CompleterSend,
    /// In the completer, before a batch of successes is written.
    CompleterWrite,
    /// In the claim loop's shutdown, before unstarted jobs are released.
    ShutdownRelease,
    /// In the heartbeat, before the leases are renewed.
    Heartbeat,
    /// After a workflow's or batch's job settled for good (committed),
    /// before the release of what waits on it.
    BeforeRelease,
}

/// What happens at an armed point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Panics there.
    Panic,
    /// Ends the enclosing task there, as if its future were dropped: what it
    /// owns is dropped and nothing after the point runs. (Only where the
    /// task's future can end early; elsewhere the same as `Panic`.)
    Drop,
    /// Ends the process there at once, as `kill -9` would: nothing after
    /// the point runs, nothing is cleaned up.
    Abort,
    /// Blocks the thread there for this long, then goes on (the rest of the
    /// runtime runs meanwhile): what a thread preempted there would do.
    Stall(std::time::Duration),
}

static ARMED: AtomicBool = AtomicBool::new(false);
#[allow(clippy::type_complexity)]
static FAULTS: Mutex<Option<HashMap<(String, Point), (Action, u32)>>> = Mutex::new(None);

/// Arms `point` for the worker serving `queue` (its first queue, for the
/// heartbeat): the next `times` passes there do `action`.
pub fn arm(queue: &str, point: Point, action: Action, times: u32) {
    let mut faults = FAULTS.lock().unwrap_or_else(PoisonError::into_inner);
    faults
        .get_or_insert_with(HashMap::new)
        .insert((queue.to_owned(), point), (action, times));
    ARMED.store(true, Ordering::SeqCst);
}

/// What to do at `point` for `queue`: `None` to go on.
pub(crate) fn fire(point: Point, queue: &str) -> Option<Action> {
    if !ARMED.load(Ordering::Relaxed) {
        return None;
    }
    let mut faults = FAULTS.lock().unwrap_or_else(PoisonError::into_inner);
    let entry = faults
        .as_mut()?
        .get_mut(&(queue.to_owned(), point))
        .filter(|(_, times)| *times > 0)?;
    entry.1 -= 1;
    let action = entry.0;
    drop(faults);
    match action {
        Action::Panic => panic!("jobq fault injection: panic at {point:?}"),
        Action::Abort => std::process::abort(),
        Action::Drop => {}
        Action::Stall(pause) => {
            std::thread::sleep(pause);
            return None;
        }
    }
    Some(action)
}

/// At `point`: panics, or ends the enclosing task (returns from it), if armed.
macro_rules! point {
    ($point:ident, $queue:expr) => {
        if let ::std::option::Option::Some(_) =
            $crate::worker::inject::fire($crate::worker::inject::Point::$point, $queue)
        {
            return;
        }
    };
}
pub(crate) use point;

/// At `point`: stalls the thread there if armed with [`Action::Stall`];
/// a point where the task cannot end early, so `Drop` panics there.
macro_rules! stall {
    ($point:ident, $queue:expr) => {
        if let ::std::option::Option::Some(_) =
            $crate::worker::inject::fire($crate::worker::inject::Point::$point, $queue)
        {
            panic!("jobq fault injection: {:?} cannot drop", stringify!($point));
        }
    };
}
pub(crate) use stall;
