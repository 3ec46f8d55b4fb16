//! The listener: the database's own wake-ups of other processes' enqueues
//! (on backends that have them, PostgreSQL's `LISTEN`), passed to this
//! process's claim loops.

use std::sync::Arc;

use crate::worker::shared::Shared;

/// Listens for other processes' enqueues on the served queues until the
/// worker's background stops (at once, on backends that cannot); its last
/// writes are given up on at the shutdown's deadline.
pub(in crate::worker) async fn listen(shared: Arc<Shared>) {
    shared
        .store
        .listen(
            &shared.queue_names,
            &shared.watch,
            &shared.stop_background,
            &shared.deadline_passed,
        )
        .await;
}
