//! Statements a test's worker sends: [`counted`] runs a test on a
//! current-thread runtime (every task of a worker it starts runs on that
//! thread) whose default subscriber counts sqlx's per-statement events,
//! read with [`statements`]. Statements sqlx runs on a thread of its own
//! (SQLite's) are not seen.

use std::cell::Cell;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

thread_local! {
    static STATEMENTS: Cell<u64> = const { Cell::new(0) };
}

/// Counts sqlx's per-statement events on this thread.
struct Counter;

impl<S: tracing::Subscriber> Layer<S> for Counter {
    fn on_event(&self, _event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        STATEMENTS.with(|n| n.set(n.get() + 1));
    }
}

/// The statements counted on this thread so far (under [`counted`]).
pub fn statements() -> u64 {
    STATEMENTS.with(Cell::get)
}

/// Runs `test` on a current-thread runtime whose every task reports its
/// statements to this thread's counter (and logs as `JOBQ_TEST_LOG` says).
pub fn counted(test: impl Future<Output = ()>) {
    let log = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_env("JOBQ_TEST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        );
    let subscriber = tracing_subscriber::registry()
        .with(Counter.with_filter(Targets::new().with_target("sqlx::query", LevelFilter::TRACE)))
        .with(log);
    let _default = tracing::subscriber::set_default(subscriber);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(test);
}
