//! Helpers every task of the worker uses: quiet logging, caught panics,
//! backoff and pauses, stopping work at a signal, locks, task spans. No state.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::error::Error;

/// Runs `log` (a tracing macro), swallowing a panic of the subscriber (one
/// that writes to a closed pipe panics): a log line must never stop a
/// settle or a worker loop.
pub(super) fn quietly(log: impl FnOnce()) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(log));
}

thread_local! {
    /// Where the last panic on this thread happened, as the panic hook
    /// [`record_panic_locations`] installs saw it.
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Installs (once per process) a panic hook that notes where each panic
/// happened for the thread it happens on, then calls the hook that was set
/// before (the default one prints the report on stderr, as without jobq):
/// a caught handler panic is then recorded with its location
/// ([`panic_site`]). A hook the application sets later replaces it, and
/// panics are then recorded without their location.
pub(super) fn record_panic_locations() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(at) = info.location() {
                let at = format!("{}:{}:{}", at.file(), at.line(), at.column());
                let _ = PANIC_AT.try_with(|slot| *slot.borrow_mut() = Some(at));
            }
            previous(info);
        }));
    });
}

/// Where the panic just caught on this thread happened, if the hook saw
/// it (taken: the next panic's site is its own).
pub(super) fn panic_site() -> Option<String> {
    PANIC_AT
        .try_with(|slot| slot.borrow_mut().take())
        .ok()
        .flatten()
}

/// What a caught panic says, and where it happened when known:
/// `at src/jobs.rs:12:5: boom`-style text after `what`.
pub(super) fn panic_report(what: &str, panic: &(dyn Any + Send)) -> String {
    let message = panic_message(panic);
    match panic_site() {
        Some(at) => format!("{what} panicked at {at}: {message}"),
        None => format!("{what} panicked: {message}"),
    }
}

/// The error for a panic caught in `task`.
pub(super) fn panicked(task: &'static str, panic: &(dyn Any + Send)) -> Error {
    Error::Panicked {
        task,
        message: panic_message(panic),
    }
}

/// What a caught panic says.
pub(super) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "its payload is not a string (std::panic::panic_any), so the panic hook's report on stderr is the place to look".to_owned()
    }
}

/// 100 ms doubling to 5 s: how long to wait after `failures` failed database calls.
pub(super) fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.min(6)).min(5_000);
    Duration::from_millis(rand::random_range(ms / 2..=ms))
}

/// Sleeps `interval` ± 20 % (so workers started together spread out);
/// `false` if `stop` fired first.
pub(super) async fn jittered_pause(stop: &CancellationToken, interval: Duration) -> bool {
    let pause = interval.mul_f64(rand::random_range(0.8..1.2));
    tokio::select! {
        biased;
        () = stop.cancelled() => false,
        () = tokio::time::sleep(pause) => true,
    }
}

/// `work`, unless `stop` fires first: then `None`, and `work` is dropped
/// (a statement of it cut short, its connection closed).
pub(super) async fn unless<T>(
    stop: &CancellationToken,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        output = work => Some(output),
    }
}

/// Locks `mutex`, poisoned or not (what it guards stays consistent across a panic).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `task` in `span`, a task's span with an explicit parent (the worker's).
///
/// The span is closed under its own subscriber at the end: closing a span
/// closes its parent through the thread's default subscriber, and a task
/// may end on a thread whose default is another one (a test that gives each
/// runtime thread its own), which does not know the parent.
pub(super) async fn in_span<F: Future>(span: Span, task: F) -> F::Output {
    let output = task.instrument(span.clone()).await;
    close(span);
    output
}

/// Drops `span` with its own subscriber as the default (see [`in_span`]).
pub(super) fn close(span: Span) {
    match span.with_subscriber(|(_, dispatch)| dispatch.clone()) {
        Some(dispatch) => tracing::dispatcher::with_default(&dispatch, move || drop(span)),
        None => drop(span),
    }
}
