//! LISTEN: PostgreSQL's notifications turned into in-process wake-ups.

use std::convert::Infallible;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use super::sql::LOOK;
use crate::store::look;
use crate::wakeup::{self, Watch};

/// The NOTIFY channel; the payload is the queue name.
const CHANNEL: &str = "jobq";

/// Forwards NOTIFYs on `jobq` whose payload is one of `queues` to the
/// in-process wake-ups until `stop`; reconnects with backoff when the
/// connection is lost. After every (re)connect it wakes all `queues` once,
/// since notifications sent while it was not listening are gone.
///
/// The listener holds its connection for as long as it runs, so it gets a
/// one-connection pool of its own (same connect options): parked on the
/// store's pool it would shrink the pool the claims and settles use, and
/// starve them in a pool of one.
///
/// Connecting and the LISTEN statement get the statement `deadline`;
/// waiting for a notification has none (a quiet queue sends nothing), and
/// ends at `stop`.
pub(super) async fn listen(
    store: &PgPool,
    queues: &[String],
    watch: &Watch,
    stop: &CancellationToken,
    deadline: Duration,
) {
    if queues.is_empty() {
        return;
    }
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with((*store.connect_options()).clone());
    let mut failures = 0u32;
    loop {
        let error = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            error = watch_queues(store, &pool, (queues, watch), &mut failures, deadline) => error,
        };
        if matches!(error, sqlx::Error::PoolClosed) {
            break;
        }
        let what =
            "listening for PostgreSQL notifications failed; reconnecting (queues are still polled)";
        if !crate::store::policy::listen_failed(&mut failures, &error, what, stop).await {
            break;
        }
    }
    // A listener dropped on a server that stopped answering sends its
    // UNLISTEN in a task of its own that waits for the server, and the
    // pool's close waits for that: closed in the background, so that a
    // worker's shutdown does not wait with it.
    tokio::spawn(async move { pool.close().await });
}

/// Listens on a connection of `pool` and, while it does, looks at the
/// queues through the `store`'s pool for the worker (`watch`, see
/// `store::look`), until the connection fails; returns the error.
async fn watch_queues(
    store: &PgPool,
    pool: &PgPool,
    (queues, watch): (&[String], &Watch),
    failures: &mut u32,
    deadline: Duration,
) -> sqlx::Error {
    let mut listener = match connect(pool, deadline).await {
        Ok(listener) => listener,
        Err(error) => return error,
    };
    tracing::debug!(channel = CHANNEL, "listening for PostgreSQL notifications");
    *failures = 0;
    wake_all(queues);
    let looking = look::look_while_up(queues, watch, deadline, |watched| {
        let store = store.clone();
        Box::pin(async move { sqlx::query_as(LOOK).bind(watched).fetch_all(&store).await })
    });
    tokio::select! {
        Err(error) = forward_notifications(&mut listener, queues) => error,
        never = looking => match never {},
    }
}

/// A listener on `CHANNEL`, within `deadline`.
async fn connect(pool: &PgPool, deadline: Duration) -> Result<PgListener, sqlx::Error> {
    let connect = async {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        Ok::<_, sqlx::Error>(listener)
    };
    match tokio::time::timeout(deadline, connect).await {
        Ok(listener) => listener,
        Err(_elapsed) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no LISTEN within {deadline:?}"),
        ))),
    }
}

/// Forwards notifications until the connection fails; returns only with
/// the error.
async fn forward_notifications(
    listener: &mut PgListener,
    queues: &[String],
) -> Result<Infallible, sqlx::Error> {
    loop {
        // `Ok(None)`: the connection dropped and sqlx has reconnected (and
        // re-issued LISTEN); whatever was sent in between is lost.
        match listener.try_recv().await? {
            Some(notification) => {
                let queue = notification.payload();
                if queue == wakeup::CONTROL || queues.iter().any(|q| q == queue) {
                    wakeup::notify(queue);
                }
            }
            None => {
                tracing::warn!(
                    "the PostgreSQL notification connection was lost and has been re-established"
                );
                wake_all(queues);
            }
        }
    }
}

/// Wakes `queues`' claim loops and looks at the controls: whatever was
/// announced while no one listened.
fn wake_all(queues: &[String]) {
    wakeup::notify(wakeup::CONTROL);
    for queue in queues {
        wakeup::notify(queue);
    }
}
